/*
 * count-hash.so: an LD_PRELOAD library that records every run of a slow password hash, independently of the
 * PAM modules' own logs. It wraps libsodium's crypto_pwhash (pam_keyway.so verifies a passcode by calling it
 * itself; see Sources/KeywayPlatform/Sodium.swift) and libcrypt's crypt_r, crypt_rn, crypt_ra and crypt
 * (pam_unix.so imports crypt_r). Each call appends one line to $COUNT_HASH_LOG:
 *
 *     PID FUNCTION MICROSECONDS
 *
 * with a single O_APPEND write, so lines from concurrent processes never interleave. Unique pids = guesses that
 * reached the slow hash. The real function is found with dlsym(RTLD_NEXT) (or in its library, see real()), so the
 * hash itself is unchanged.
 *
 *   gcc -O2 -shared -fPIC -o count-hash.so count-hash.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000L + t.tv_nsec / 1000L;
}

static void record(const char *function, long elapsed_us) {
    const char *path = getenv("COUNT_HASH_LOG");
    if (!path) return;
    char line[128];
    int length = snprintf(line, sizeof line, "%ld %s %ld\n", (long)getpid(), function, elapsed_us);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    if (write(fd, line, (size_t)length) != length) { /* nothing more to do: the count would be short, not wrong */ }
    close(fd);
}

/* Looks the real symbol up once; aborts rather than pretend a hash ran. RTLD_NEXT searches only the global scope,
 * and libpam dlopens each module RTLD_LOCAL, so libsodium and libcrypt (a module's own dependencies) are usually
 * not in it: then the symbol is taken from the already loaded library that defines it (RTLD_NOLOAD). */
static void *real(const char *name, const char *library) {
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        void *handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
        if (!handle) handle = dlopen(library, RTLD_NOW);
        if (handle) f = dlsym(handle, name);
    }
    if (!f) { fprintf(stderr, "count-hash: no real %s in %s\n", name, library); abort(); }
    return f;
}

int crypto_pwhash(unsigned char *out, unsigned long long outlen, const char *passwd, unsigned long long passwdlen,
                  const unsigned char *salt, unsigned long long opslimit, size_t memlimit, int alg) {
    static int (*next)(unsigned char *, unsigned long long, const char *, unsigned long long, const unsigned char *,
                       unsigned long long, size_t, int);
    if (!next) next = real("crypto_pwhash", "libsodium.so.23");
    long start = now_us();
    int status = next(out, outlen, passwd, passwdlen, salt, opslimit, memlimit, alg);
    record("crypto_pwhash", now_us() - start);
    return status;
}

struct crypt_data;

char *crypt_r(const char *phrase, const char *setting, struct crypt_data *data) {
    static char *(*next)(const char *, const char *, struct crypt_data *);
    if (!next) next = real("crypt_r", "libcrypt.so.1");
    long start = now_us();
    char *result = next(phrase, setting, data);
    record("crypt_r", now_us() - start);
    return result;
}

char *crypt_rn(const char *phrase, const char *setting, void *data, int size) {
    static char *(*next)(const char *, const char *, void *, int);
    if (!next) next = real("crypt_rn", "libcrypt.so.1");
    long start = now_us();
    char *result = next(phrase, setting, data, size);
    record("crypt_rn", now_us() - start);
    return result;
}

char *crypt_ra(const char *phrase, const char *setting, void **data, int *size) {
    static char *(*next)(const char *, const char *, void **, int *);
    if (!next) next = real("crypt_ra", "libcrypt.so.1");
    long start = now_us();
    char *result = next(phrase, setting, data, size);
    record("crypt_ra", now_us() - start);
    return result;
}

char *crypt(const char *phrase, const char *setting) {
    static char *(*next)(const char *, const char *);
    if (!next) next = real("crypt", "libcrypt.so.1");
    long start = now_us();
    char *result = next(phrase, setting);
    record("crypt", now_us() - start);
    return result;
}
