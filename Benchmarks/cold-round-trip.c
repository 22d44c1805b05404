/*
 * cold-round-trip: the least one request to another process costs on this machine, the floor under every keywayd
 * round trip. A server process does what any daemon must and nothing more (poll its listening socket, accept, poll
 * the connection, read the request, write the answer, close); the client does what pam_keyway.so does per request
 * (socket, connect, send, poll, read, close). Requests are GAP_US apart: a real authentication asks keywayd
 * seconds after its last request, so both processes start cold (caches, scheduler), which back-to-back requests
 * hide. Prints one line:
 *
 *     round trip, GAP_US µs apart: median M µs, min A µs, max B µs, p99 P µs over N requests
 *
 *   gcc -O2 -o cold-round-trip cold-round-trip.c
 *   cold-round-trip DIRECTORY ROUNDS GAP_US       (the socket is made in DIRECTORY and removed on exit)
 */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int compare(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static void serve(int listener) {
    for (;;) {
        struct pollfd incoming = { .fd = listener, .events = POLLIN };
        if (poll(&incoming, 1, -1) < 0) continue;
        int connection = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (connection < 0) continue;
        struct pollfd request = { .fd = connection, .events = POLLIN };
        char buffer[256];
        ssize_t length = 0;
        if (poll(&request, 1, 1000) == 1) length = read(connection, buffer, sizeof buffer);
        if (length > 0 && write(connection, buffer, (size_t)length) != length) { /* the client sees a short answer */ }
        close(connection);
    }
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: cold-round-trip DIRECTORY ROUNDS GAP_US\n"); return 2; }
    int rounds = atoi(argv[2]), gap = atoi(argv[3]);
    if (rounds < 1 || gap < 0) { fprintf(stderr, "cold-round-trip: bad ROUNDS or GAP_US\n"); return 2; }
    struct sockaddr_un address = { .sun_family = AF_UNIX };
    if (snprintf(address.sun_path, sizeof address.sun_path, "%s/floor.sock", argv[1]) >= (int)sizeof address.sun_path) {
        fprintf(stderr, "cold-round-trip: directory name too long\n"); return 2;
    }
    unlink(address.sun_path);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 64) != 0) {
        perror("cold-round-trip: listen"); return 1;
    }
    pid_t server = fork();
    if (server < 0) { perror("cold-round-trip: fork"); return 1; }
    if (server == 0) serve(listener);
    close(listener);

    long long *samples = calloc((size_t)rounds, sizeof *samples);
    char request[61];   /* the size of pam_keyway.so's availability question */
    memset(request, 'k', sizeof request);
    int failed = 0;
    for (int i = 0; i < rounds && !failed; i++) {
        usleep((useconds_t)gap);
        long long start = now_ns();
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        char answer[sizeof request];
        struct pollfd reply = { .fd = s, .events = POLLIN };
        if (s < 0 || connect(s, (struct sockaddr *)&address, sizeof address) != 0 ||
            send(s, request, sizeof request, MSG_NOSIGNAL) != (ssize_t)sizeof request || poll(&reply, 1, 5000) != 1 ||
            read(s, answer, sizeof answer) != (ssize_t)sizeof answer) {
            perror("cold-round-trip: request"); failed = 1;
        }
        close(s);
        samples[i] = (now_ns() - start) / 1000;
    }
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    unlink(address.sun_path);
    if (failed) return 1;
    qsort(samples, (size_t)rounds, sizeof *samples, compare);
    printf("round trip, %d µs apart: median %lld µs, min %lld µs, max %lld µs, p99 %lld µs over %d requests\n", gap,
           samples[rounds / 2], samples[0], samples[rounds - 1], samples[(rounds * 99) / 100], rounds);
    free(samples);
    return 0;
}
