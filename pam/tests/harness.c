/*
 * keyway-pam-harness: a C host for pam_keyway.so tests and benchmarks, over the real libpam.
 *
 *   harness [options] CONFDIR SERVICE USER
 *     --answer TEXT      answer the next prompt with TEXT (repeatable; "" is an empty answer)
 *     --answer-when FILE TEXT
 *                        answer the next prompt with TEXT once FILE exists (at most 30 s): a person who answers
 *                        after doing something else (touching the sensor while the prompt waits). At that prompt,
 *                        before waiting, it makes the empty file FILE.ready-PID: it is there, waiting for FILE
 *     --null-answer      answer the next prompt with no response (the person gave up)
 *     --conv-error       make the conversation itself fail at the next prompt
 *     --huge-answer N    answer the next prompt with N bytes of 'x'
 *     --answer-hex HEX   answer the next prompt with these bytes (may hold a NUL or invalid UTF-8; the module
 *                        sees a C string, so it ends at the first NUL)
 *     --rhost HOST       set PAM_RHOST (a remote session)
 *     --tty TTY          set PAM_TTY (as sudo does: /dev/pts/N); without it PAM_TTY is a pseudo-terminal this
 *                        process opens and holds the master side of, as a program run at a console makes one:
 *                        when its standard input is not a terminal, a virtual console (/dev/tty63, else
 *                        /dev/console) becomes it (pam_keyway(8), LOCAL AND REMOTE: a root-held master is local
 *                        only through the holder's own terminal, or a local logind session)
 *     --no-tty           leave PAM_TTY unset (as `ssh -T host sudo -S` does)
 *     --utmp FILE        (first) read and write FILE as utmp instead of the system's, in this process only
 *     --user-hex HEX     authenticate the user with these bytes instead of USER (invalid UTF-8, say)
 *     --silent           pass PAM_SILENT
 *     --acct             also call pam_acct_mgmt after pam_authenticate
 *     --acct-only        call only pam_acct_mgmt
 *     --cycles N         repeat start/authenticate/end N times (answers restart each cycle); print RSS
 *     --bench            print microseconds to the first prompt and kB of RSS added by one authentication
 *     --pin PATH         dlopen PATH once (RTLD_NODELETE) before the first cycle, so libpam's dlclose at pam_end
 *                        leaves that module mapped: valgrind then reads its debug information once, not per cycle
 *   harness --dlopen PATH          dlopen(PATH) once in this process: print the microseconds it took and the kB of
 *                                  resident memory it added (a benchmark runs one process per sample)
 *   harness --utmp-add LINE HOST   add a logged-in user process on LINE from HOST to utmp (tests of remote sessions)
 *   harness --utmp-remove LINE     mark that entry dead again
 *
 * Prints every message as "info: …", "error: …", "prompt: …" / "prompt-echo: …", then "result: NAME (code)".
 * A CONFDIR of "-" uses the system /etc/pam.d (pam_start), otherwise pam_start_confdir.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <security/pam_appl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <utmpx.h>

enum kind { ANSWER, NULL_ANSWER, CONV_ERROR };
struct answer { enum kind kind; const char *text; size_t length; /* 0: strlen(text) */ const char *when; };
struct script { struct answer answers[64]; int count, next; int quiet; struct timespec start; long first_prompt_us; };

static long elapsed_us(const struct timespec *from) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - from->tv_sec) * 1000000L + (now.tv_nsec - from->tv_nsec) / 1000L;
}

static long rss_kb(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) { if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0; fclose(f); }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* RssAnon or RssFile from /proc/self/status, in kB. */
static long status_kb(const char *field) {
    char line[256];
    long value = 0;
    size_t length = strlen(field);
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, length) == 0) { value = atol(line + length + 1); break; }
    fclose(f);
    return value;
}

/* FILE.ready-PID, made empty: this process is at a prompt, about to wait for FILE (--answer-when). */
static void mark_waiting(const char *file) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s.ready-%ld", file, (long)getpid()) >= (int)sizeof path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
}

static int converse(int count, const struct pam_message **messages, struct pam_response **responses, void *data) {
    struct script *script = data;
    struct pam_response *replies = calloc((size_t)count, sizeof *replies);
    if (!replies) return PAM_BUF_ERR;
    for (int i = 0; i < count; i++) {
        const struct pam_message *m = messages[i];
        switch (m->msg_style) {
        case PAM_TEXT_INFO: if (!script->quiet) printf("info: %s\n", m->msg); break;
        case PAM_ERROR_MSG: if (!script->quiet) printf("error: %s\n", m->msg); break;
        case PAM_PROMPT_ECHO_OFF:
        case PAM_PROMPT_ECHO_ON: {
            if (script->first_prompt_us < 0) script->first_prompt_us = elapsed_us(&script->start);
            if (!script->quiet) printf("%s: %s\n", m->msg_style == PAM_PROMPT_ECHO_ON ? "prompt-echo" : "prompt", m->msg);
            if (script->next >= script->count) { free(replies); return PAM_CONV_ERR; }
            struct answer a = script->answers[script->next++];
            if (a.when) mark_waiting(a.when);
            for (int waited = 0; a.when && access(a.when, F_OK) != 0 && waited < 1500; waited++) usleep(20000);
            if (a.kind == CONV_ERROR) { free(replies); return PAM_CONV_ERR; }
            if (a.kind == ANSWER) {  /* the whole buffer, bytes after an embedded NUL included */
                size_t length = a.length ? a.length : strlen(a.text);
                replies[i].resp = malloc(length + 1);
                if (!replies[i].resp) { free(replies); return PAM_BUF_ERR; }
                memcpy(replies[i].resp, a.text, length);
                replies[i].resp[length] = 0;
            }
            break;
        }
        default: free(replies); return PAM_CONV_ERR;
        }
    }
    fflush(stdout);
    *responses = replies;
    return PAM_SUCCESS;
}

/* The bytes a hex string spells, NUL-terminated after *length bytes (which may themselves hold a NUL). */
static char *from_hex(const char *hex, size_t *length) {
    size_t n = strlen(hex) / 2;
    char *bytes = calloc(n + 1, 1);
    if (!bytes) { perror("calloc"); exit(1); }
    for (size_t k = 0; k < n; k++) { unsigned v = 0; sscanf(hex + 2 * k, "%2x", &v); bytes[k] = (char)v; }
    *length = n;
    return bytes;
}

static const char *code_name(int code) {
    switch (code) {
    case PAM_SUCCESS: return "PAM_SUCCESS";
    case PAM_AUTH_ERR: return "PAM_AUTH_ERR";
    case PAM_CONV_ERR: return "PAM_CONV_ERR";
    case PAM_MAXTRIES: return "PAM_MAXTRIES";
    case PAM_AUTHINFO_UNAVAIL: return "PAM_AUTHINFO_UNAVAIL";
    case PAM_IGNORE: return "PAM_IGNORE";
    case PAM_SERVICE_ERR: return "PAM_SERVICE_ERR";
    case PAM_SYSTEM_ERR: return "PAM_SYSTEM_ERR";
    case PAM_PERM_DENIED: return "PAM_PERM_DENIED";
    case PAM_USER_UNKNOWN: return "PAM_USER_UNKNOWN";
    case PAM_ABORT: return "PAM_ABORT";
    default: return "OTHER";
    }
}

static long resident_kb(void) {  /* resident set of this process, from /proc/self/statm */
    long size = 0, resident = -1;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (!statm) return -1;
    if (fscanf(statm, "%ld %ld", &size, &resident) != 2) resident = -1;
    fclose(statm);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* One dlopen(path) in this process, which must be fresh (one run per sample: a forked child's RSS would also count
   the parent's pages it touches): the microseconds it took and the kB of resident memory it added. */
static int dlopen_bench(const char *path) {
    long before = resident_kb();
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    void *h = dlopen(path, RTLD_NOW);
    long us = elapsed_us(&start);
    if (!h) { fprintf(stderr, "dlopen %s failed: %s\n", path, dlerror()); return 1; }
    printf("dlopen_us: %ld\ndlopen_rss_kb: %ld\n", us, resident_kb() - before);
    return 0;
}

static int utmp_change(const char *line, const char *host) {
    struct utmpx entry;
    memset(&entry, 0, sizeof entry);
    strncpy(entry.ut_line, line, sizeof entry.ut_line - 1);
    size_t length = strlen(line);
    strncpy(entry.ut_id, line + (length > 4 ? length - 4 : 0), sizeof entry.ut_id);
    entry.ut_pid = getpid();
    entry.ut_type = host ? USER_PROCESS : DEAD_PROCESS;
    if (host) {
        strncpy(entry.ut_user, "kwtest", sizeof entry.ut_user - 1);
        strncpy(entry.ut_host, host, sizeof entry.ut_host - 1);
    }
    setutxent();
    struct utmpx *written = pututxline(&entry);
    endutxent();
    if (!written) { perror("pututxline"); return 1; }
    return 0;
}

int main(int argc, char **argv) {
    struct script script = { .first_prompt_us = -1 };
    const char *rhost = NULL;
    int flags = 0, acct = 0, acct_only = 0, cycles = 1, bench = 0;
    int i = 1;
    /* SIGPIPE keeps its default here, as in login or su: this host models a real one, so a module that wrote to a
       closed socket without MSG_NOSIGNAL would kill it and fail the test. Its own output is read to the end. */
    /* One environment read of the host's own, through the PLT as a module's would be: the control that shows a
       preloaded getenv counter (pam/tests/count-getenv.c) is seeing this process's reads at all. */
    if (getenv("KEYWAY_HARNESS_CONTROL")) fputs("KEYWAY_HARNESS_CONTROL is set\n", stderr);
    if (argc == 3 && strcmp(argv[1], "--dlopen") == 0) return dlopen_bench(argv[2]);
    /* --utmp FILE first: this process's utmp (for --utmp-add and --utmp-remove, and for the module's reads) is FILE,
       so a test writes the records it needs without a system-wide /run/utmp that other programs would write to. */
    if (argc >= 3 && strcmp(argv[1], "--utmp") == 0) {
        if (utmpxname(argv[2]) != 0) { perror("utmpxname"); return 1; }
        argv += 2;
        argc -= 2;
    }
    if (argc == 4 && strcmp(argv[1], "--utmp-add") == 0) return utmp_change(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "--utmp-remove") == 0) return utmp_change(argv[2], NULL);
    const char *tty = NULL, *user_override = NULL;
    int no_tty = 0;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--answer") == 0 && i + 1 < argc && script.count < 64)
            script.answers[script.count++] = (struct answer){ ANSWER, argv[++i], 0, NULL };
        else if (strcmp(argv[i], "--answer-when") == 0 && i + 2 < argc && script.count < 64) {
            script.answers[script.count++] = (struct answer){ ANSWER, argv[i + 2], 0, argv[i + 1] };
            i += 2;
        }
        else if (strcmp(argv[i], "--null-answer") == 0 && script.count < 64)
            script.answers[script.count++] = (struct answer){ NULL_ANSWER, NULL, 0, NULL };
        else if (strcmp(argv[i], "--conv-error") == 0 && script.count < 64)
            script.answers[script.count++] = (struct answer){ CONV_ERROR, NULL, 0, NULL };
        else if (strcmp(argv[i], "--huge-answer") == 0 && i + 1 < argc && script.count < 64) {
            size_t n = (size_t)atol(argv[++i]);
            char *text = malloc(n + 1);
            memset(text, 'x', n); text[n] = 0;
            script.answers[script.count++] = (struct answer){ ANSWER, text, n, NULL };
        }
        else if (strcmp(argv[i], "--answer-hex") == 0 && i + 1 < argc && script.count < 64) {
            size_t n;
            char *bytes = from_hex(argv[++i], &n);
            script.answers[script.count++] = (struct answer){ ANSWER, bytes, n, NULL };
        }
        else if (strcmp(argv[i], "--user-hex") == 0 && i + 1 < argc) {
            size_t n;
            user_override = from_hex(argv[++i], &n);
        }
        else if (strcmp(argv[i], "--rhost") == 0 && i + 1 < argc) rhost = argv[++i];
        else if (strcmp(argv[i], "--tty") == 0 && i + 1 < argc) tty = argv[++i];
        else if (strcmp(argv[i], "--no-tty") == 0) no_tty = 1;
        else if (strcmp(argv[i], "--silent") == 0) flags |= PAM_SILENT;
        else if (strcmp(argv[i], "--acct") == 0) acct = 1;
        else if (strcmp(argv[i], "--acct-only") == 0) acct_only = 1;
        else if (strcmp(argv[i], "--cycles") == 0 && i + 1 < argc) cycles = atoi(argv[++i]);
        else if (strcmp(argv[i], "--bench") == 0) { bench = 1; script.quiet = 1; }
        else if (strcmp(argv[i], "--pin") == 0 && i + 1 < argc) {
            if (!dlopen(argv[++i], RTLD_NOW | RTLD_NODELETE)) { fprintf(stderr, "--pin: %s\n", dlerror()); return 1; }
        }
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 64; }
    }
    if (argc - i != 3) { fprintf(stderr, "usage: harness [options] CONFDIR SERVICE USER\n"); return 64; }
    if (!tty && !no_tty) {  /* a terminal of our own: this process holds its master side for as long as it runs */
        int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0) tty = ptsname(master);
        if (!isatty(0)) {
            int console = open("/dev/tty63", O_RDWR | O_NOCTTY);
            if (console < 0) console = open("/dev/console", O_RDWR | O_NOCTTY);
            if (console > 0) { dup2(console, 0); close(console); }
        }
    }
    const char *confdir = argv[i], *service = argv[i + 1], *user = user_override ? user_override : argv[i + 2];
    if (cycles > 1) script.quiet = 1;
    long rss_before = rss_kb(), rss_first = 0;
    long anon_before = status_kb("RssAnon"), file_before = status_kb("RssFile"), anon_first = 0, file_first = 0;
    int result = PAM_SYSTEM_ERR;
    for (int cycle = 1; cycle <= cycles; cycle++) {
        struct pam_conv conv = { converse, &script };
        pam_handle_t *pamh = NULL;
        script.next = 0;
        clock_gettime(CLOCK_MONOTONIC, &script.start);
        int status = strcmp(confdir, "-") == 0 ? pam_start(service, user, &conv, &pamh)
                                               : pam_start_confdir(service, user, &conv, confdir, &pamh);
        if (status != PAM_SUCCESS) { printf("result: pam_start failed (%d)\n", status); return 1; }
        if (rhost) pam_set_item(pamh, PAM_RHOST, rhost);
        if (tty) pam_set_item(pamh, PAM_TTY, tty);
        result = acct_only ? pam_acct_mgmt(pamh, flags) : pam_authenticate(pamh, flags);
        if (!acct_only && acct && cycles == 1) {
            printf("authenticate: %s (%d)\n", code_name(result), result);
            result = pam_acct_mgmt(pamh, flags);
        }
        pam_end(pamh, result);
        if (cycle == 1) { rss_first = rss_kb(); anon_first = status_kb("RssAnon"); file_first = status_kb("RssFile"); }
        if (cycles > 1 && (cycle == 1 || cycle == 100 || cycle == cycles))
            printf("cycle %d: %s rss_kb %ld\n", cycle, code_name(result), rss_kb());
    }
    if (bench)
        printf("first_prompt_us: %ld\nrss_added_kb: %ld\nanon_added_kb: %ld\nfile_added_kb: %ld\n", script.first_prompt_us,
               rss_first - rss_before, anon_first - anon_before, file_first - file_before);
    printf("result: %s (%d)\n", code_name(result), result);
    return 0;
}
