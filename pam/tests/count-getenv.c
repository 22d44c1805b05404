/*
 * count-getenv.so: an LD_PRELOAD library that records every environment read made through the C library's
 * getenv and secure_getenv, with the shared object that made the call (found with dladdr from the return address).
 * The test that pam_keyway.so reads no environment variable (Tests/PAMTests/ModuleArtifactTests.swift) preloads it
 * into the C harness and looks for lines naming the module. Each call appends one line to the file named by
 * $COUNT_GETENV_LOG when the library loads:
 *
 *     FUNCTION NAME CALLER-OBJECT
 *
 *   gcc -O2 -shared -fPIC -o count-getenv.so count-getenv.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char log_path[4096];
static char *(*real_getenv)(const char *);
static char *(*real_secure_getenv)(const char *);

__attribute__((constructor)) static void start(void) {
    real_getenv = (char *(*)(const char *))dlsym(RTLD_NEXT, "getenv");
    real_secure_getenv = (char *(*)(const char *))dlsym(RTLD_NEXT, "secure_getenv");
    const char *path = real_getenv ? real_getenv("COUNT_GETENV_LOG") : NULL;
    if (path && strlen(path) < sizeof log_path) strcpy(log_path, path);
}

static void record(const char *function, const char *name, const void *caller) {
    if (!log_path[0]) return;
    Dl_info info;
    const char *object = dladdr(caller, &info) && info.dli_fname ? info.dli_fname : "?";
    char line[8192];
    int length = snprintf(line, sizeof line, "%s %s %s\n", function, name ? name : "(null)", object);
    if (length < 0 || (size_t)length >= sizeof line) return;
    int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    if (write(fd, line, (size_t)length) != length) { /* a short log line is visible in the test's output */ }
    close(fd);
}

char *getenv(const char *name) {
    record("getenv", name, __builtin_return_address(0));
    return real_getenv ? real_getenv(name) : NULL;
}

char *secure_getenv(const char *name) {
    record("secure_getenv", name, __builtin_return_address(0));
    return real_secure_getenv ? real_secure_getenv(name) : NULL;
}
