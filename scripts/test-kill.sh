#!/usr/bin/env bash
# make test-kill: the system-touching tests (real sudo with a throwaway user and sudoers entry, utmp, syslog) are
# started through scripts/test-isolated.sh and killed at a random point, ROUNDS times with SIGKILL (nothing can
# clean up: the runner, swift test and every child die at once) and INTERRUPTS times with SIGINT (as Ctrl-C sends
# to the terminal's process group). After each, the real system must match the snapshot taken first; at the end the
# next run's cleanup must leave no run directory behind. Needs `make module cli harness` and built tests.
set -euo pipefail
trap 'echo "test-kill: failed at line $LINENO" >&2' ERR
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
ROUNDS=${ROUNDS:-10}
INTERRUPTS=${INTERRUPTS:-3}
suites='SudoTests|SyslogTests|ReturnCodeTests|BrokenPipeTests'
log=build/test-kill
rm -rf "$log" && mkdir -p "$log"
scripts/test-isolated.sh --cleanup >/dev/null
before=$(scripts/test-isolated.sh --snapshot) || { echo "test-kill: could not take the snapshot" >&2; exit 1; }

check() {  # what → fails unless the system matches the first snapshot
    local now
    now=$(scripts/test-isolated.sh --snapshot) || { echo "test-kill: could not take the snapshot after $1" >&2; exit 1; }
    if [ "$now" != "$before" ]; then
        echo "test-kill: the system changed after $1:" >&2
        diff <(echo "$before") <(echo "$now") >&2 || true
        exit 1
    fi
}

# Job control: each run gets its own process group, and SIGINT is not ignored in it (bash ignores SIGINT in the
# background jobs of a script without job control, which would make the Ctrl-C rounds meaningless).
set -m

one() {  # signal round → starts the suites in their own process group, signals the whole group at a random moment
    local signal=$1 round=$2 file=$log/$1-$2.txt
    scripts/test-isolated.sh "$SWIFT" test --skip-build --filter "$suites" >"$file" 2>&1 &
    local leader=$!
    local tenths
    if [ $((round % 2)) = 1 ]; then
        # Odd rounds strike inside the real-sudo tests, whatever the machine's speed: 0–3 s after they start.
        for _ in $(seq 1 600); do grep -q 'Suite "real sudo" started' "$file" && break; sleep 0.1; done
        tenths=$((RANDOM % 31))
    else
        # Even rounds strike anywhere in the first 9 s: the namespace's setup, the build check, the first tests.
        tenths=$((RANDOM % 91))
    fi
    sleep "$((tenths / 10)).$((tenths % 10))"
    local alive=yes
    kill -0 "$leader" 2>/dev/null || alive="no (it had finished)"
    kill -s "$signal" -- "-$leader" 2>/dev/null || true
    wait "$leader" 2>/dev/null || true
    # Survivors of a SIGKILL (a sudo in its own process group, say) still see only the copies; let them end.
    for _ in $(seq 1 50); do pgrep -g "$leader" >/dev/null || break; sleep 0.2; done
    pkill -KILL -g "$leader" 2>/dev/null || true
    local when="$((tenths / 10)).$((tenths % 10)) s"
    [ $((round % 2)) = 1 ] && when="$when into the real-sudo tests"
    check "$signal at $when (round $round)"
    local doing
    doing=$({ grep -oE '◇ Test "[^"]{0,60}' "$log/$signal-$round.txt" || true; } | tail -1 | sed 's/◇ Test "//')
    grep -q 'Suite "real sudo" started' "$file" && sudo_hits=$((sudo_hits + 1))
    echo "test-kill: $signal after $when (running: $alive; last test started:" \
        "${doing:-none yet}) → system as found"
}

sudo_hits=0
for round in $(seq 1 "$ROUNDS"); do one KILL "$round"; done
for round in $(seq 1 "$INTERRUPTS"); do one INT "$round"; done
scripts/test-isolated.sh --cleanup >"$log/final-cleanup.txt"
# Each run's own start-up cleanup removed the directory the run before it left; count them all.
left=$(cat "$log"/*.txt | grep -c "left by a run that did not finish" || true)
# Only directories of dead runs count: another run alive on the machine (a second checkout) keeps its own.
remaining=$(scripts/test-isolated.sh --list-stale | wc -l)
[ "$remaining" = 0 ] || { echo "test-kill: $remaining stale run directories remain after cleanup" >&2; exit 1; }
check "the cleanup"
# At least half the rounds must strike once the sudo tests run (their user, sudoers entry and service exist).
[ "$sudo_hits" -ge $(((ROUNDS + INTERRUPTS) / 2)) ] ||
    { echo "test-kill: only $sudo_hits rounds struck after the real-sudo tests had started" >&2; exit 1; }
echo "test-kill: $ROUNDS × SIGKILL and $INTERRUPTS × SIGINT at random points ($sudo_hits after the real-sudo tests had started); killed runs left $left run" \
    "directories (SIGINT runs remove their own), which the next run's cleanup removed; /etc/passwd, group, shadow, gshadow, pam.d and sudoers.d" \
    "unchanged; no kwtest user, /dev/log, /run/utmp or /tmp/keyway-* left"
