// The C library, as the code the PAM module loads sees it (docs/ARCHITECTURE.md §4).
//
// Embedded Swift has no Glibc overlay, so everything the module reaches imports this instead, in both build modes:
// the same headers, and the few things the overlay added in Swift (errno is a macro Swift cannot import) as
// functions. In the full-mode build these headers belong to the toolchain's Glibc module, so their types are the
// same types keywayd and the CLI see through `import Glibc`.
#pragma once

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <utmpx.h>

/// errno of the calling thread.
static inline int keyway_errno(void) { return errno; }

/// open(2) without its variadic mode argument, which Swift cannot call.
static inline int keyway_open(const char *path, int flags, mode_t mode) { return open(path, flags, mode); }

/// fcntl(2) with an integer argument, for the same reason.
static inline int keyway_fcntl(int fd, int command, int argument) { return fcntl(fd, command, argument); }

/// True when an interrupt (SIGINT or SIGQUIT: Ctrl-C, Ctrl-\\) is pending for this thread or process, blocked by the
/// host until it is ready for it (sudo blocks both while it authenticates). Looks only: the signal stays pending,
/// for the host to act on once it unblocks it.
static inline int keyway_interrupt_pending(void) {
    sigset_t pending;
    if (sigpending(&pending) != 0) return 0;
    return sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGQUIT) == 1;
}

/// Ignores a signal (SIG_IGN is a cast Swift cannot import).
static inline void keyway_ignore_signal(int signal_number) { signal(signal_number, SIG_IGN); }

/// A function of libm, found in libm loaded on first use (NULL when it cannot be): the PAM module does not link
/// libm, whose load cost (0.13 ms and 350 KB in every host: docs/BENCHMARKS.md, "The module's build and load") only
/// the simulated sensor's statistics need. Where libm is already loaded (the CLI, keywayd) this finds the loaded copy.
static inline void *keyway_libm_function(const char *name) {
    void *libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
    return libm ? dlsym(libm, name) : NULL;
}

/// openat(2) without its variadic mode argument.
static inline int keyway_openat(int directory, const char *path, int flags) { return openat(directory, path, flags); }

/// openat with a mode, for a file it may create.
static inline int keyway_openat_mode(int directory, const char *path, int flags, mode_t mode) {
    return openat(directory, path, flags, mode);
}

/// What identifies the code this function was built into: the device, inode, size and modification time (seconds,
/// nanoseconds) of the file it was loaded from (the module, or the program). 0, or -1 when that file cannot be told.
#ifdef __USE_GNU
typedef Dl_info keyway_dl_info;
#else
// dladdr is a GNU extension, declared only under _GNU_SOURCE, which this header does not define (it would change the
// headers the Glibc module sees); the declaration and the structure are glibc's own.
typedef struct {
    const char *dli_fname;
    void *dli_fbase;
    const char *dli_sname;
    void *dli_saddr;
} keyway_dl_info;
extern int dladdr(const void *address, keyway_dl_info *info);
#endif

static inline int keyway_code_identity(unsigned long long out[5]) {
    keyway_dl_info info;
    if (dladdr((const void *)&keyway_code_identity, &info) == 0 || info.dli_fname == NULL || info.dli_fname[0] != '/')
        return -1;
    struct stat status;
    if (stat(info.dli_fname, &status) != 0) return -1;
    out[0] = (unsigned long long)status.st_dev;
    out[1] = (unsigned long long)status.st_ino;
    out[2] = (unsigned long long)status.st_size;
    out[3] = (unsigned long long)status.st_mtim.tv_sec;
    out[4] = (unsigned long long)status.st_mtim.tv_nsec;
    return 0;
}

/// The name of a directory entry (a fixed array Swift sees as a tuple).
static inline const char *keyway_dirent_name(const struct dirent *entry) { return entry->d_name; }

/// Sends `length` bytes of `data` (at most 256) and, when `fd` is not negative, the descriptor `fd` with them
/// (SCM_RIGHTS), in one message over a Unix socket; never raises SIGPIPE. The cmsg macros are not Swift's to call.
static inline ssize_t keyway_send_with_descriptor(int socket, const void *data, size_t length, int fd) {
    char copy[256];
    if (length > sizeof copy) return -1;
    memcpy(copy, data, length);
    struct iovec part = { copy, length };
    union { char space[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } control;
    memset(&control, 0, sizeof control);
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    if (fd >= 0) {
        message.msg_control = control.space;
        message.msg_controllen = sizeof control.space;
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(header), &fd, sizeof(int));
    }
    return sendmsg(socket, &message, MSG_NOSIGNAL);
}

// Descriptors another process passes (SCM_RIGHTS) are hostile until checked (keywayd(8), "Descriptors";
// docs/ARCHITECTURE.md §10). The kernel accepts them from any peer unless the socket refuses them, and the last close
// of one can block (a TCP socket with SO_LINGER and a full send queue), so keywayd refuses them where it can,
// receives every one it is sent where it cannot, and disarms each before it lets go of it.

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83  // Linux 6.16 and later; older kernels answer ENOPROTOOPT
#endif

/// The most descriptors one SCM_RIGHTS message can carry (the kernel's SCM_MAX_FD).
#define KEYWAY_MAX_PASSED 253

/// Tells the kernel whether `socket` (a listener's setting is inherited by the connections it accepts) takes
/// descriptors: with `accept` 0, a peer's sendmsg with SCM_RIGHTS fails with EPERM and nothing reaches us.
/// 0 on success; the errno otherwise (ENOPROTOOPT: a kernel older than 6.16).
static inline int keyway_accept_passed_descriptors(int socket, int accept) {
    int value = accept ? 1 : 0;
    return setsockopt(socket, SOL_SOCKET, SO_PASSRIGHTS, &value, sizeof value) == 0 ? 0 : errno;
}

/// Makes accept(2) on the listener `socket` wait (clears O_NONBLOCK) and give up after `milliseconds` (SO_RCVTIMEO,
/// which Linux applies to accept: it then fails with EAGAIN). 0 on success; the errno otherwise.
static inline int keyway_accept_waits(int socket, int milliseconds) {
    int flags = fcntl(socket, F_GETFL);
    if (flags < 0 || fcntl(socket, F_SETFL, flags & ~O_NONBLOCK) != 0) return errno;
    struct timeval timeout = { milliseconds / 1000, (milliseconds % 1000) * 1000 };
    return setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) == 0 ? 0 : errno;
}

/// Receives one message without waiting, with room for every descriptor a message can carry, so the kernel never
/// drops one on this thread. Every control message is walked: each passed descriptor is stored in `fds` (room for
/// KEYWAY_MAX_PASSED; close-on-exec) and counted in `*passed`; `*odd` is set when the message held control data
/// that was not descriptors, or was truncated. Returns the bytes read, 0 when the peer has closed, -2 when nothing
/// is there yet, -1 on error (errno read here, at once).
static inline ssize_t keyway_receive_message(int socket, void *data, size_t capacity, int *fds, int *passed,
                                             int *odd) {
    struct iovec part = { data, capacity };
    union { char space[CMSG_SPACE(sizeof(int) * KEYWAY_MAX_PASSED) + CMSG_SPACE(64)]; struct cmsghdr align; } control;
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof control.space;
    *passed = 0;
    *odd = 0;
    ssize_t count = recvmsg(socket, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (count < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? -2 : -1;
    if (message.msg_flags & MSG_CTRUNC) *odd = 1;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) {
            *odd = 1;
            continue;
        }
        size_t bytes = header->cmsg_len - CMSG_LEN(0);
        for (size_t offset = 0; offset + sizeof(int) <= bytes && *passed < KEYWAY_MAX_PASSED; offset += sizeof(int)) {
            memcpy(&fds[*passed], CMSG_DATA(header) + offset, sizeof(int));
            *passed += 1;
        }
    }
    return count;
}

/// Disarms and closes a descriptor keywayd did not ask for, so that its close cannot block: a socket's lingering
/// close becomes an abortive one (SO_LINGER with 0 seconds), and a Unix socket is shut down and emptied first,
/// since descriptors still queued on it would be released by its close (the kernel nests them at most 4 deep). A
/// listening Unix socket is emptied too: each connection still waiting on it is accepted and disposed of, since its
/// queue may hold descriptors that the listener's close would release here (a lingering TCP socket).
static inline void keyway_dispose_descriptor_at(int fd, int depth) {
    struct stat info;
    if (fstat(fd, &info) == 0 && S_ISSOCK(info.st_mode)) {
        struct linger abortive = { 1, 0 };
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &abortive, sizeof abortive);
        struct sockaddr_storage address;
        socklen_t length = sizeof address;
        int local = depth < 8 && getsockname(fd, (struct sockaddr *)&address, &length) == 0
            && address.ss_family == AF_UNIX;
        int listening = 0;
        socklen_t size = sizeof listening;
        if (local && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 && listening) {
            // Not waiting for more: a connection that arrives meanwhile is accepted only if it is already there.
            (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
            for (int connections = 0; connections < 4096; connections++) {
                int waiting = accept(fd, NULL, NULL);  // accept4 is declared only under _GNU_SOURCE
                if (waiting < 0) break;
                (void)fcntl(waiting, F_SETFD, FD_CLOEXEC);
                keyway_dispose_descriptor_at(waiting, depth + 1);
            }
        } else if (local) {
            (void)shutdown(fd, SHUT_RDWR);
            char bytes[512];
            int inner[KEYWAY_MAX_PASSED];
            int passed = 0, odd = 0;
            for (int messages = 0; messages < 100000; messages++) {
                ssize_t count = keyway_receive_message(fd, bytes, sizeof bytes, inner, &passed, &odd);
                for (int i = 0; i < passed; i++) keyway_dispose_descriptor_at(inner[i], depth + 1);
                if (count <= 0) break;
            }
        }
    }
    close(fd);
}

/// Shuts the connected socket `fd` down both ways (after which no peer can queue anything on it) and says whether its
/// receive queue is empty: 1 when it is (its close then releases no one's descriptors, so it cannot block), 0 when
/// something is queued, -1 when it could not be told.
static inline int keyway_shut_and_empty(int fd) {
    (void)shutdown(fd, SHUT_RDWR);
    int queued = 0;
    if (ioctl(fd, FIONREAD, &queued) != 0) return -1;
    return queued == 0 ? 1 : 0;
}

/// keyway_dispose_descriptor_at for a descriptor received from a client.
static inline void keyway_dispose_descriptor(int fd) { keyway_dispose_descriptor_at(fd, 0); }

/// True when `fd` is a terminal device: a character device that answers as a terminal.
static inline int keyway_is_terminal_device(int fd) {
    struct stat info;
    return fstat(fd, &info) == 0 && S_ISCHR(info.st_mode) && isatty(fd) == 1;
}
