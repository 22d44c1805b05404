#!/usr/bin/env bash
# Runs a command (the test suite) where it cannot change the real system, even if it is killed midway.
#
#   scripts/test-isolated.sh COMMAND [ARG...]    run COMMAND isolated, then check the system was left as found
#   scripts/test-isolated.sh --cleanup           only remove what killed runs left (also done before every run)
#   scripts/test-isolated.sh --list-stale        print those directories without removing them
#   scripts/test-isolated.sh --snapshot          print the snapshot the check compares
#
# COMMAND runs in a private mount namespace (unshare --mount, private propagation) in which
#   /etc       is a copy (users, groups, shadow, pam.d, sudoers.d: useradd, visudo and sudo see the test's files),
#   /tmp       is this run's own directory (every temporary directory of the run lives under one root),
#   /run       is a fresh directory holding a copy of utmp if the system has one (utmp, sudo's timestamps),
#   /var/log/{lastlog,faillog,wtmp,btmp}   are copies (useradd and login write them),
#   /var/lib/prometheus/node-exporter      is empty, where it exists (keywayd's metrics by default),
#   /dev       is a tmpfs mirroring the real devices, so a test may bind its own /dev/log socket, with pseudo-
#              terminals of its own (a new devpts instance) for the tests that drive programs in tmux,
# and the command runs in a local login session as logind records one (/run/systemd/sessions/keywaytest, REMOTE=0,
# and the cgroup session-keywaytest.scope under keyway-test-RUN in the systemd hierarchy): the tests are a person at this
# machine, so the terminals their tmux servers and harnesses hold are local by what pam_keyway believes, not by
# a root process merely holding them (pam_keyway(8), LOCAL AND REMOTE). A test that needs a terminal outside any
# session moves its holder out (Tests/KeywayProcessFixture/PAMFixture.swift, `Cgroup`).
# Nothing the command writes there reaches the real files, and when its last process ends the mounts vanish with
# the namespace. The copies live in /var/tmp/keyway-test-runs/run.* (root only, on local disk, never in the checkout;
# SSH host keys and /etc/ssl/private are left out of the copy); a run killed with SIGKILL leaves only that directory,
# which the next run removes. docs/ARCHITECTURE.md §6 explains why the tests need real system files at all.
set -euo pipefail
trap 'echo "test-isolated: failed at line $LINENO" >&2' ERR
cd "$(dirname "$0")/.."
runs=/var/tmp/keyway-test-runs

# What "the system as found" means: the files a test could change, and the names a leak would leave.
# Each part tolerates a file vanishing while it is read (find and sha256sum then exit 1): another process's
# temporary files come and go in /tmp, and under `set -e` that must not end the check without a word.
snapshot() {
    { sha256sum /etc/passwd /etc/group /etc/shadow /etc/gshadow 2>/dev/null || true; }
    { find /etc/pam.d /etc/sudoers.d -type f -exec sha256sum {} + 2>/dev/null || true; } | sort
    for path in /dev/log /run/utmp; do if [ -e "$path" ]; then echo "exists $path"; fi; done
    { getent passwd || true; } | awk -F: '/^kwtest/ { print "user " $1 }'
    # The test suites' own temporary directories (demos and benchmarks use other names).
    { find /tmp -maxdepth 1 \( -name 'keyway-pam-test.*' -o -name 'keyway-store-test.*' -o -name 'keyway-install.*' \
        -o -name 'keyway-harden.*' \) -printf 'temporary %p\n' 2>/dev/null || true; } | sort
}

# A process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or nothing if it is gone.
started() { awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null || true; }

# True when DIR belongs to a run whose runner is gone (killed, or the machine rebooted); a live run's is kept.
stale() {
    local dir=$1 pid
    # A directory without its pid file yet may be a run starting this very moment: leave it a minute.
    if [ ! -f "$dir/pid" ] && [ -n "$(find "$dir" -maxdepth 0 -mmin -1 2>/dev/null)" ]; then return 1; fi
    # The runner's pid and start time: a pid reused by another process does not keep a dead run's directory.
    pid=$(cut -d' ' -f1 "$dir/pid" 2>/dev/null || true)
    if [[ $pid =~ ^[0-9]+$ ]] && [ "$(cut -d' ' -f2 "$dir/pid" 2>/dev/null || true)" = "$(started "$pid")" ]; then
        return 1
    fi
    return 0
}

# Kills what a run left running that still uses DIR (a keywayd the tests started in its own process group, a program
# under a terminal server): any process in the run's mount namespace (its /etc and /tmp are mounts from DIR), or
# whose working directory, root or an open file is under DIR.
reap() {
    local dir=$1 proc link
    for proc in /proc/[0-9]*; do
        if grep -qF " $dir/" "$proc/mountinfo" 2>/dev/null; then kill -KILL "${proc#/proc/}" 2>/dev/null || true; continue; fi
        for link in "$proc/cwd" "$proc/root" "$proc"/fd/*; do
            case $(readlink "$link" 2>/dev/null) in
                "$dir" | "$dir"/*) kill -KILL "${proc#/proc/}" 2>/dev/null || true; break ;;
            esac
        done
    done
}

# Where cgroups are made: systemd's hierarchy, which /proc/PID/cgroup names as logind reads it (a named v1 hierarchy
# on hybrid machines, the unified one otherwise).
hierarchy() {
    local dir
    for dir in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
        if [ -f "$dir/cgroup.procs" ]; then echo "$dir"; return; fi
    done
    echo /sys/fs/cgroup
}

# Removes a run's cgroups (its session's and the tests' own): whatever still runs in them belongs to that run and is
# killed first; a process killed a moment ago may still be leaving, so it is tried for up to two seconds.
remove_cgroup() {
    local dir=$1 try
    for try in 1 2 3 4 5 6 7 8 9 10; do
        find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
        find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null && return 0
        [ -d "$dir" ] || return 0
        sleep 0.2
    done
    echo "test-isolated: could not remove the cgroup $dir yet; the next run will" >&2
}

# Removes the directories of runs whose runner is gone; `list` only prints them.
cleanup() {
    [ -d "$runs" ] || return 0
    local dir
    for dir in "$runs"/run.*; do
        [ -d "$dir" ] || continue
        stale "$dir" || continue
        if [ "${1:-}" = list ]; then echo "$dir"; continue; fi
        reap "$dir"
        # A survivor can still be writing (its files reappear under rm): reap again, a few times, then say so.
        local tries=0
        until rm -rf "$dir" 2>/dev/null; do
            tries=$((tries + 1))
            [ "$tries" -lt 5 ] || { echo "test-isolated: could not remove $dir yet; the next run will" >&2; continue 2; }
            sleep 0.2
            reap "$dir"
        done
        echo "test-isolated: removed $dir, left by a run that did not finish"
    done
    # The session cgroups of runs that are gone (emptied when their processes were killed).
    for dir in "$(hierarchy)"/keyway-test-run.*; do
        [ -d "$dir" ] && [ ! -d "$runs/${dir##*/keyway-test-}" ] || continue
        [ "${1:-}" = list ] && { echo "$dir"; continue; }
        remove_cgroup "$dir"
    done
}

case ${1:-} in
    --cleanup) cleanup; exit 0 ;;
    --list-stale) cleanup list; exit 0 ;;
    --snapshot) snapshot; exit 0 ;;
    "") echo "usage: scripts/test-isolated.sh COMMAND [ARG...] | --cleanup | --snapshot" >&2; exit 64 ;;
esac
[ "$(id -u)" = 0 ] || { echo "test-isolated: run as root (it mounts in a private namespace)" >&2; exit 1; }

cleanup
mkdir -p -m 700 "$runs"
root=$(mktemp -d "$runs/run.XXXXXX")
echo "$$ $(started $$)" >"$root/pid"
before=$(snapshot)
finish() {
    local status=$?
    trap - EXIT INT TERM
    reap "$root"  # what the tests started in other process groups (keywayd, a terminal server's programs)
    rm -rf "$root" 2>/dev/null || { sleep 0.2; reap "$root"; rm -rf "$root"; }
    [ ! -d "${cgroup:-}" ] || remove_cgroup "$cgroup"
    local after
    after=$(snapshot)
    if [ "$before" = "$after" ]; then
        echo "test-isolated: the system was left as found (/etc/passwd, group, shadow, gshadow, pam.d, sudoers.d;" \
            "no kwtest user, /dev/log, /run/utmp or test directory in /tmp added)"
    else
        # Another process changing these files meanwhile (apt, an administrator) shows here too: the check cannot
        # tell who did it, so it reports rather than guesses.
        echo "test-isolated: THE SYSTEM CHANGED during the run:" >&2
        diff <(echo "$before") <(echo "$after") >&2 || true
        [ "$status" != 0 ] || status=1
    fi
    exit "$status"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The run's local session: a cgroup named as systemd names a session's scope (the tests' own cgroups go beside it).
cgroup=$(hierarchy)/keyway-test-${root##*/}
mkdir -p "$cgroup/session-keywaytest.scope" && [ -f "$cgroup/session-keywaytest.scope/cgroup.procs" ] \
    || { echo "test-isolated: cannot make the session's cgroup $cgroup" >&2; exit 1; }
cp -a /etc "$root/etc"
rm -rf "$root"/etc/ssh/ssh_host_*_key "$root/etc/ssl/private"   # secrets the tests never need
mkdir -m 1777 "$root/tmp"
mkdir -m 755 "$root/run" "$root/log" "$root/realdev"
[ -e /run/utmp ] && cp -a /run/utmp "$root/run/utmp"
for f in lastlog faillog wtmp btmp; do [ -f "/var/log/$f" ] && cp -a "/var/log/$f" "$root/log/$f"; done

# Inside the namespace. "$@" is the command; ROOT the run directory.
inside='
set -e
mount --make-rprivate /
mount --rbind /dev "$ROOT/realdev"
mount -t tmpfs -o mode=755,size=1m keyway-test-dev /dev
for entry in "$ROOT"/realdev/* "$ROOT"/realdev/.[!.]*; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    name=${entry##*/}
    case $name in log | pts | ptmx) continue ;; esac
    if [ -L "$entry" ]; then cp -P "$entry" "/dev/$name"
    elif [ -d "$entry" ]; then mkdir "/dev/$name"; mount --rbind "$entry" "/dev/$name"
    else touch "/dev/$name"; mount --bind "$entry" "/dev/$name"
    fi
done
# Terminals of its own (a new devpts instance), so the tests that drive sudo in tmux get pseudo-terminals: a
# bind-mounted /dev/ptmx would look for its pts directory beside the real one and fail (ENOENT).
mkdir /dev/pts
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 keyway-test-pts /dev/pts
ln -s pts/ptmx /dev/ptmx
mount --bind "$ROOT/etc" /etc
# A checkout under /tmp (a CI clone) must stay visible at its own path once /tmp is the run'"'"'s: bind it in first.
case $PWD in /tmp/*) mkdir -p "$ROOT/tmp/${PWD#/tmp/}"; mount --bind "$PWD" "$ROOT/tmp/${PWD#/tmp/}" ;; esac
mount --rbind "$ROOT/tmp" /tmp
mount --bind "$ROOT/run" /run
for f in lastlog faillog wtmp btmp; do
    if [ -f "$ROOT/log/$f" ]; then mount --bind "$ROOT/log/$f" "/var/log/$f"; fi
done
# A keywayd started with its defaults writes node_exporter'"'"'s textfile there: an empty directory of the run'"'"'s own.
if [ -d /var/lib/prometheus/node-exporter ]; then
    mount -t tmpfs -o mode=755,size=1m keyway-test-metrics /var/lib/prometheus/node-exporter
fi
mkdir -p /run/systemd/sessions
printf "UID=0\nUSER=root\nACTIVE=1\nREMOTE=0\nSEAT=seat0\nTYPE=tty\n" >/run/systemd/sessions/keywaytest
echo $$ >"$CGROUP/session-keywaytest.scope/cgroup.procs"
exec "$@"
'
status=0
# KEYWAY_TEST_ROOT tells the tests that write system files that they are isolated (Tests/KeywayProcessFixture/PAMFixture.swift).
ROOT=$root CGROUP=$cgroup KEYWAY_TEST_ROOT=$root KEYWAY_TEST_CGROUP=$cgroup unshare --mount --propagation private -- bash -c "$inside" test-isolated "$@" || status=$?
exit "$status"
