#!/usr/bin/env bash
# Keyway's main job on a throwaway default: a throwaway keywayd on a temporary socket and store, a demo user's
# pattern enrolled through it, then authentication through the real libpam with the real pamtester (under
# pam_wrapper, so /etc/pam.d is not touched). The daemon is stopped and everything removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/keyway-demo.XXXXXX)
daemon=""
trap '[ -z "$daemon" ] || kill "$daemon" 2>/dev/null; rm -rf "$work"' EXIT
chmod 700 "$work"
mkdir "$work/pam.d"
store="$work/keyway.db"
socket="$work/keywayd.sock"
pattern=2-4-9-3
# A real account (enrollment refuses names that are not), in a throwaway store: nothing of nobody's changes.
user=nobody
echo "== Keyway demo (temporary store $store; no system file is changed)"
build/keywayd --socket "$socket" --store "$store" --metrics "$work/keyway.prom" 2>"$work/keywayd.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
echo "== Started keywayd (pid $daemon) on $socket: the one process that opens the store and hashes"
echo "$pattern" | build/keyway --socket "$socket" enroll gesture --user "$user" --stdin 2>/dev/null
echo "== Enrolled the pattern $pattern for the account '$user' (in the throwaway store):"
echo "     1 2 3        2 → 4 → 9 → 3"
echo "     4 5 6"
echo "     7 8 9"
echo "auth required $PWD/build/pam_keyway.so policy=pattern socket=$socket" > "$work/pam.d/keyway-demo"
echo "account required $PWD/build/pam_keyway.so policy=pattern socket=$socket" >> "$work/pam.d/keyway-demo"
# libpam wants an "other" service to fall back on; without one pam_wrapper complains on every run.
security=$(make -s print-pam-dir)
printf 'auth required %s/pam_deny.so\naccount required %s/pam_deny.so\n' "$security" "$security" > "$work/pam.d/other"
pamtest() {
    LD_PRELOAD=libpam_wrapper.so PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$work/pam.d" \
        pamtester keyway-demo "$user" authenticate acct_mgmt
}
if [ -t 0 ]; then
    echo "== Your turn: type a pattern as dot numbers (try $pattern, then something else). Ctrl-D ends."
    while true; do
        if pamtest; then echo "   → accepted"; else echo "   → refused"; fi
        read -r -p "Again? [Y/n] " again || break
        case "$again" in n*|N*) break ;; esac
    done
else
    echo "== No terminal: entering the right pattern, then a wrong one, for you."
    if echo "$pattern" | pamtest; then echo "   → $pattern accepted"; else echo "   → $pattern refused (unexpected)"; exit 1; fi
    if printf '1-5-9-6\n3-4-9-2\n6-1-8-3\n' | pamtest; then echo "   → wrong pattern accepted (unexpected)"; exit 1
    else echo "   → wrong patterns refused"; fi
fi
echo "== Counters and lockouts now:"
build/keyway --socket "$socket" status --user "$user"
echo "== What a monitoring system sees (keyway health; keyway metrics, as node_exporter would read it):"
build/keyway --socket "$socket" health || true
build/keyway --socket "$socket" metrics | grep -E '^keyway_(decisions|attempts)_total'
echo "== Stopping keywayd."
