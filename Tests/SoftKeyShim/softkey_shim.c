/* The tests' software security key, as libfido2 sees it: an LD_PRELOAD library that adds the key to libfido2's
 * device list and carries libfido2's CTAP messages to it over a Unix stream socket.
 *
 *     LD_PRELOAD=.build/debug/libkeyway-softkey-shim.so KEYWAY_SOFTKEY=/tmp/key/key.sock fido2-token -L
 *
 * With KEYWAY_SOFTKEY unset the shim passes every call through untouched. With it set:
 *   - fido_dev_info_manifest lists the real devices, then one more: "softkey:<socket path>" ("Keyway software key"),
 *     whose io and transport functions are the ones below (so fido_dev_new_with_info + fido_dev_open_with_info reach
 *     it without more interposition: libfido2 copies both from the device list);
 *   - fido_dev_open of a "softkey:" path gives the device those functions first.
 * libfido2 then bypasses its CTAPHID framing (src/io.c, fido_tx/fido_rx with transport functions): each message is
 * one frame on the socket, `command (1 byte) | length (4 bytes, big-endian) | payload`, both ways.
 *
 * libfido2 is never linked: the shim is preloaded into programs (pamtester, then pam_u2f.so) that load it only later,
 * and a PAM module's libraries are loaded RTLD_LOCAL, out of reach of RTLD_NEXT and RTLD_DEFAULT. So each function is
 * looked up when it is called: RTLD_NEXT first, then in the libfido2 already loaded (dlopen with RTLD_NOLOAD).
 * <fido.h> is included for the types and prototypes alone. */
#define _GNU_SOURCE
#include "softkey_shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <fido.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The largest frame payload taken from the soft key (libfido2's own FIDO_MAXMSG is 2 KiB). */
#define SOFTKEY_MAX_PAYLOAD (1u << 20)
#define SOFTKEY_HEADER 5

/* One open connection to the soft key: the io handle libfido2 keeps for the device. */
struct softkey {
    int fd;
    pthread_mutex_t write_lock; /* a cancel (tx) may come from another thread while one waits in rx */
    pthread_mutex_t read_lock;
    unsigned char *pending; /* bytes received and not yet taken: the start of the next frame(s) */
    size_t pending_len;
    size_t pending_cap;
};

/* The socket's path when the shim is active, else NULL. */
static const char *softkey_socket(void) {
    const char *path = getenv(KEYWAY_SOFTKEY_ENV);
    return (path != NULL && path[0] != '\0') ? path : NULL;
}

static int has_prefix(const char *path) {
    return path != NULL && strncmp(path, KEYWAY_SOFTKEY_PREFIX, strlen(KEYWAY_SOFTKEY_PREFIX)) == 0;
}

/* libfido2's `name`: the next definition after this library's (a program linked with libfido2), or the one in the
 * libfido2 already loaded by someone else (a PAM module, loaded RTLD_LOCAL). NULL when libfido2 is not loaded. The
 * pointer is only used during the call that asked for it, while whoever called us keeps libfido2 loaded. */
static void *real_function(const char *name) {
    void *function = dlsym(RTLD_NEXT, name);
    if (function != NULL) return function;
    void *library = dlopen("libfido2.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (library == NULL) return NULL;
    function = dlsym(library, name);
    dlclose(library); /* only drops the reference RTLD_NOLOAD took */
    return function;
}

/* ---- io functions: open and close a connection; read and write are never called with transport functions ---- */

static void *softkey_open(const char *path) {
    if (has_prefix(path)) path += strlen(KEYWAY_SOFTKEY_PREFIX);
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    if (path == NULL || strlen(path) == 0 || strlen(path) >= sizeof address.sun_path) return NULL;
    memcpy(address.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return NULL;
    int connected;
    do {
        connected = connect(fd, (const struct sockaddr *)&address, sizeof address);
    } while (connected != 0 && errno == EINTR);
    if (connected != 0) {
        close(fd);
        return NULL;
    }
    struct softkey *key = calloc(1, sizeof *key);
    if (key == NULL) {
        close(fd);
        return NULL;
    }
    key->fd = fd;
    pthread_mutex_init(&key->write_lock, NULL);
    pthread_mutex_init(&key->read_lock, NULL);
    return key;
}

static void softkey_close(void *handle) {
    struct softkey *key = handle;
    if (key == NULL) return;
    close(key->fd);
    pthread_mutex_destroy(&key->write_lock);
    pthread_mutex_destroy(&key->read_lock);
    free(key->pending);
    free(key);
}

static int softkey_read(void *handle, unsigned char *buf, size_t len, int ms) {
    (void)handle, (void)buf, (void)len, (void)ms;
    return -1;
}

static int softkey_write(void *handle, const unsigned char *buf, size_t len) {
    (void)handle, (void)buf, (void)len;
    return -1;
}

/* ---- transport functions: one frame per message ---- */

static struct softkey *handle_of(fido_dev_t *dev) {
    void *(*io_handle)(const fido_dev_t *) = (void *(*)(const fido_dev_t *))real_function("fido_dev_io_handle");
    return io_handle != NULL ? io_handle(dev) : NULL;
}

/* Sends `cmd | len | buf` whole, in one write where the kernel takes it (frames never interleave: the lock). */
static int softkey_tx(fido_dev_t *dev, uint8_t cmd, const unsigned char *buf, size_t len) {
    struct softkey *key = handle_of(dev);
    if (key == NULL || len > SOFTKEY_MAX_PAYLOAD || (len > 0 && buf == NULL)) return -1;
    size_t total = SOFTKEY_HEADER + len;
    unsigned char *frame = malloc(total);
    if (frame == NULL) return -1;
    frame[0] = cmd;
    frame[1] = (unsigned char)(len >> 24);
    frame[2] = (unsigned char)(len >> 16);
    frame[3] = (unsigned char)(len >> 8);
    frame[4] = (unsigned char)len;
    if (len > 0) memcpy(frame + SOFTKEY_HEADER, buf, len);
    size_t sent = 0;
    pthread_mutex_lock(&key->write_lock);
    while (sent < total) {
        ssize_t n = send(key->fd, frame + sent, total - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        sent += (size_t)n;
    }
    pthread_mutex_unlock(&key->write_lock);
    free(frame);
    return sent == total ? (int)len : -1;
}

static long long monotonic_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* Takes the first complete frame off `pending`: 1 with it in *cmd, *payload, *payload_len (pointing into pending,
 * valid until the next receive), 0 when none is complete yet, -1 for a frame too large to be one of ours. */
static int next_frame(struct softkey *key, uint8_t *cmd, const unsigned char **payload, size_t *payload_len,
                      size_t *consumed) {
    if (key->pending_len < SOFTKEY_HEADER) return 0;
    const unsigned char *p = key->pending;
    uint32_t length = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if (length > SOFTKEY_MAX_PAYLOAD) return -1;
    if (key->pending_len < SOFTKEY_HEADER + (size_t)length) return 0;
    *cmd = p[0];
    *payload = p + SOFTKEY_HEADER;
    *payload_len = length;
    *consumed = SOFTKEY_HEADER + (size_t)length;
    return 1;
}

static void drop_pending(struct softkey *key, size_t count) {
    memmove(key->pending, key->pending + count, key->pending_len - count);
    key->pending_len -= count;
}

/* Appends what the socket has now to `pending`: 1 on bytes, -1 on the end of the stream or an error, 0 on EINTR. */
static int receive_some(struct softkey *key) {
    unsigned char chunk[4096];
    ssize_t n = recv(key->fd, chunk, sizeof chunk, 0);
    if (n < 0) return (errno == EINTR || errno == EAGAIN) ? 0 : -1;
    if (n == 0) return -1;
    if (key->pending_cap - key->pending_len < (size_t)n) {
        size_t capacity = key->pending_cap ? key->pending_cap : 8192;
        while (capacity - key->pending_len < (size_t)n) capacity *= 2;
        unsigned char *grown = realloc(key->pending, capacity);
        if (grown == NULL) return -1;
        key->pending = grown;
        key->pending_cap = capacity;
    }
    memcpy(key->pending + key->pending_len, chunk, (size_t)n);
    key->pending_len += (size_t)n;
    return 1;
}

/* Waits up to `ms` milliseconds (forever when negative) for a frame of `cmd`; frames of other commands are skipped.
 * Copies at most `len` bytes of its payload into `buf` and returns how many; -1 on a timeout, a closed connection or
 * an error. */
static int softkey_rx(fido_dev_t *dev, uint8_t cmd, unsigned char *buf, size_t len, int ms) {
    struct softkey *key = handle_of(dev);
    if (key == NULL || (len > 0 && buf == NULL)) return -1;
    long long deadline = ms < 0 ? -1 : monotonic_ms() + ms;
    int result = -1;
    pthread_mutex_lock(&key->read_lock);
    for (;;) {
        uint8_t got;
        const unsigned char *payload;
        size_t payload_len, consumed;
        int framed = next_frame(key, &got, &payload, &payload_len, &consumed);
        if (framed < 0) break;
        if (framed > 0) {
            if (got == cmd) {
                size_t count = payload_len < len ? payload_len : len;
                if (count > 0) memcpy(buf, payload, count);
                drop_pending(key, consumed);
                result = (int)count;
                break;
            }
            drop_pending(key, consumed);
            continue;
        }
        int wait = -1;
        if (deadline >= 0) {
            long long left = deadline - monotonic_ms();
            wait = left > 0 ? (left > 0x7fffffff ? 0x7fffffff : (int)left) : 0;
        }
        struct pollfd entry = {.fd = key->fd, .events = POLLIN, .revents = 0};
        int ready = poll(&entry, 1, wait);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) break; /* the time is up, or poll failed */
        if (receive_some(key) < 0) break;
    }
    pthread_mutex_unlock(&key->read_lock);
    return result;
}

static const fido_dev_io_t softkey_io = {softkey_open, softkey_close, softkey_read, softkey_write};
static const fido_dev_transport_t softkey_transport = {softkey_rx, softkey_tx};

/* ---- the interposed functions ---- */

int fido_dev_info_manifest(fido_dev_info_t *devlist, size_t ilen, size_t *olen) {
    int (*real)(fido_dev_info_t *, size_t, size_t *) =
        (int (*)(fido_dev_info_t *, size_t, size_t *))real_function("fido_dev_info_manifest");
    const char *socket_path = softkey_socket();
    int r = real != NULL ? real(devlist, ilen, olen) : FIDO_ERR_INTERNAL;
    if (socket_path == NULL || olen == NULL) return r;
    if (r != FIDO_OK || *olen > ilen) *olen = 0; /* no hidraw devices: the soft key alone */
    int (*set)(fido_dev_info_t *, size_t, const char *, const char *, const char *, const fido_dev_io_t *,
               const fido_dev_transport_t *) =
        (int (*)(fido_dev_info_t *, size_t, const char *, const char *, const char *, const fido_dev_io_t *,
                 const fido_dev_transport_t *))real_function("fido_dev_info_set");
    if (set == NULL || devlist == NULL || *olen >= ilen) return FIDO_OK;
    size_t size = strlen(KEYWAY_SOFTKEY_PREFIX) + strlen(socket_path) + 1;
    char *path = malloc(size);
    if (path == NULL) return FIDO_OK;
    snprintf(path, size, "%s%s", KEYWAY_SOFTKEY_PREFIX, socket_path);
    if (set(devlist, *olen, path, "Keyway", "software key", &softkey_io, &softkey_transport) == FIDO_OK) *olen += 1;
    free(path);
    return FIDO_OK;
}

int fido_dev_open(fido_dev_t *dev, const char *path) {
    int (*real)(fido_dev_t *, const char *) = (int (*)(fido_dev_t *, const char *))real_function("fido_dev_open");
    if (real == NULL) return FIDO_ERR_INTERNAL;
    if (softkey_socket() != NULL && has_prefix(path)) {
        int (*set_io)(fido_dev_t *, const fido_dev_io_t *) =
            (int (*)(fido_dev_t *, const fido_dev_io_t *))real_function("fido_dev_set_io_functions");
        int (*set_transport)(fido_dev_t *, const fido_dev_transport_t *) =
            (int (*)(fido_dev_t *, const fido_dev_transport_t *))real_function("fido_dev_set_transport_functions");
        if (set_io == NULL || set_transport == NULL) return FIDO_ERR_INTERNAL;
        int r = set_io(dev, &softkey_io);
        if (r != FIDO_OK) return r;
        if ((r = set_transport(dev, &softkey_transport)) != FIDO_OK) return r;
    }
    return real(dev, path);
}
