#!/usr/bin/env bash
# make test-deb (run by .ci/run): the Debian package, end to end, as an administrator would use it.
#
#   1. On the real system: installs the tools it needs (debhelper, dpkg-dev, lintian, pamtester; apt-get update
#      first, only when one is missing), builds build/keyway_VERSION_ARCH.deb with `make deb`, runs lintian on it.
#   2. Inside scripts/test-isolated.sh (a private mount namespace where /etc, /run and /tmp are copies):
#      `apt-get install ./build/keyway_*.deb` (dependencies resolved by apt), checks what landed where and that
#      common-auth is untouched while the profile is off, `pam-auth-update --enable keyway` and checks the Keyway
#      line comes before pam_unix, starts keywayd as keywayd.service does, creates a throwaway user with a password,
#      enrolls a pattern, and authenticates through real sudo (the stock /etc/pam.d/sudo, which includes
#      common-auth): with the pattern; with a wrong pattern, Enter and the password; with nothing but the password
#      while keywayd is stopped. Then `apt-get remove` must restore common-auth byte for byte and leave the password
#      working (real sudo and pamtester login), and `apt-get purge` must remove /var/lib/keyway and /etc/keyway.
#
# WHAT IT CHANGES ON THE REAL SYSTEM, and why that is acceptable: the dpkg state. The package is really installed
# (/usr/sbin, /lib/x86_64-linux-gnu/security, /lib/systemd/system, /usr/share, /var/lib/dpkg, /var/lib/keyway) and
# pam-auth-update records its state in /var/lib/pam, because that is what is being tested. It is acceptable only
# because everything is put back: the package is purged on every exit path (a trap), /var/lib/pam is restored if it
# differs, and a run killed with SIGKILL (no trap runs) leaves a marker, /var/tmp/keyway-test-deb.installed, from
# which the next run knows the installed keyway is its own and purges it first. /etc/pam.d (common-auth), the
# throwaway user and its sudoers drop-in are written only in the namespace's copy of /etc, so the real PAM stack is
# never changed, even by a killed run; the trap still restores common-auth from its saved copy and removes the user
# and the drop-in. It refuses to run if keyway is already installed and was not installed by this test.
set -euo pipefail
trap 'echo "test-deb: failed at line $LINENO" >&2' ERR
cd "$(dirname "$0")/.."
fail() { echo "test-deb: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root (it installs and purges the package)"
export DEBIAN_FRONTEND=noninteractive
apt_get() { apt-get -y -qq -o DPkg::Lock::Timeout=300 "$@"; }
marker=/var/tmp/keyway-test-deb.installed
deb_path() { echo "build/${1:-keyway}_$(dpkg-parsechangelog -S Version)_$(dpkg-architecture -qDEB_HOST_ARCH).deb"; }

# True while dpkg knows keyway (installed, half-installed, or its configuration files left after a removal).
known() { local s; s=$(dpkg-query -W -f='${db:Status-Status}' keyway 2>/dev/null) && [ "$s" != not-installed ]; }
# A package left installed by a killed run of this test (its marker says so) is purged; any other is refused.
leftover() {
    known || { rm -f "$marker"; return 0; }
    [ -e "$marker" ] || fail "keyway is installed and not by this test: remove it first (apt-get purge keyway)"
    echo "test-deb: purging the keyway package a killed run of this test left installed"
    dpkg --purge keyway-lock >/dev/null
    apt_get purge keyway >/dev/null
    rm -f "$marker"
}

if [ -z "${KEYWAY_TEST_DEB_INSIDE:-}" ]; then
    # Phase 1, on the real system: packages installed here keep their files in the real /etc.
    missing=""
    for p in debhelper dpkg-dev lintian pamtester sudo passwd login; do
        dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        echo "test-deb: installing:$missing"
        apt-get update -qq && apt_get install $missing >/dev/null
    fi
    leftover
    mkdir -p build
    deb=$(deb_path)
    lock_deb=$(deb_path keyway-lock)
    make -s deb >build/test-deb-build.log 2>&1 || { tail -30 build/test-deb-build.log >&2; fail "make deb failed"; }
    [ -f "$deb" ] || fail "make deb did not make $deb"
    [ -f "$lock_deb" ] || fail "make deb did not make $lock_deb"
    echo "test-deb: built $deb and $lock_deb"
    # Errors and warnings fail the test; the informational tags shown (-I) are justified in docs/PACKAGING.md.
    lint=0
    lintian -I --fail-on error,warning "$deb" "$lock_deb" >build/test-deb-lintian.txt 2>&1 || lint=$?
    grep -v 'running with root privileges' build/test-deb-lintian.txt || true
    [ "$lint" = 0 ] || fail "lintian reports errors or warnings for $deb or $lock_deb"
    echo "test-deb: lintian: no error or warning"
    # A server installs keyway alone: nothing of X or cairo comes with it; the lock screen's package has them.
    if dpkg-deb -f "$deb" Depends | grep -Eq 'libx11|libcairo|libxcb'; then
        fail "keyway depends on an X library: $(dpkg-deb -f "$deb" Depends)"
    fi
    dpkg-deb -f "$lock_deb" Depends | grep -q 'libx11' && dpkg-deb -f "$lock_deb" Depends | grep -q 'libcairo' ||
        fail "keyway-lock does not depend on libx11 and libcairo: $(dpkg-deb -f "$lock_deb" Depends)"
    echo "test-deb: keyway depends on no X library; keyway-lock on libx11 and libcairo"
    KEYWAY_TEST_DEB_INSIDE=1 exec scripts/test-isolated.sh "$PWD/scripts/test-deb.sh"
fi

# Phase 2, inside the namespace: /etc is a copy; dpkg's state, /usr, /lib and /var/lib are the real ones.
work=$(mktemp -d /tmp/keyway-test-deb.XXXXXX)
deb=$(deb_path)
user=kwdeb$((RANDOM % 10000))
sudoers=/etc/sudoers.d/keyway-test-deb
password=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 16)
pattern=2-4-9-3
daemon=""
cp -a /etc/pam.d/common-auth "$work/common-auth"
tar -C /var/lib -cf "$work/var-lib-pam.tar" pam
pam_state() { find /var/lib/pam -type f -exec sha256sum {} + | sort; }
pam_before=$(pam_state)
debconf_profiles() { debconf-show libpam-runtime | grep 'libpam-runtime/profiles'; }
debconf_before=$(debconf_profiles)

stop_daemon() {
    if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; daemon=""; fi
}
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    set +e
    stop_daemon
    rm -f "$sudoers"
    if getent passwd "$user" >/dev/null; then userdel "$user"; fi
    if known; then
        echo "test-deb: purging keyway (cleanup)" >&2
        dpkg --purge keyway-lock >/dev/null 2>&1
        apt_get purge keyway >/dev/null 2>&1 || dpkg --purge keyway
    fi
    if ! cmp -s "$work/common-auth" /etc/pam.d/common-auth; then
        echo "test-deb: restoring /etc/pam.d/common-auth from its copy (cleanup)" >&2
        cp -a "$work/common-auth" /etc/pam.d/common-auth
    fi
    if [ "$(pam_state)" != "$pam_before" ]; then
        echo "test-deb: restoring /var/lib/pam (cleanup)" >&2
        rm -rf /var/lib/pam && tar -C /var/lib -xf "$work/var-lib-pam.tar"
    fi
    rm -rf /var/lib/keyway /etc/keyway   # a purge already did, unless the test failed before installing
    rm -f "$marker"
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

expect_mode() {  # path "mode owner"
    [ -e "$1" ] || fail "$1 is missing"
    [ "$(stat -c '%a %U' "$1")" = "$2" ] || fail "$1 is $(stat -c '%a %U' "$1"), expected $2"
}
# sudo as the throwaway user on a terminal root's `script` holds, as a local one (the profile's policy is for local
# sessions only, and a session without a terminal is remote: pam_keyway(8), LOCAL AND REMOTE). Each argument answers
# one prompt, typed once that prompt is on the screen (sudo flushes what was typed ahead). Prints what `id -u` printed;
# the whole screen goes to sudo.err; the status is sudo's.
as_user_sudo() {
    local fifo="$work/sudo.in" screen="$work/sudo.screen" pid status=0 asked=0 answer
    trap '' PIPE  # an answer sudo no longer reads must not end this (a subshell of the caller's $(...))
    rm -f "$fifo"
    mkfifo "$fifo"
    : >"$screen"
    script -qec "su $user -c 'out=\$(sudo -S -k id -u) && echo id:\$out'" /dev/null <"$fifo" >"$screen" 2>&1 &
    pid=$!
    exec 7>"$fifo"
    for answer in "$@"; do
        asked=$((asked + 1))
        for _ in $(seq 300); do  # up to 30 s for the prompt
            [ "$(grep -o -E '(\): |assword[^:]*: )' "$screen" | wc -l)" -ge "$asked" ] && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        sleep 0.2
        printf '%s\n' "$answer" >&7 2>/dev/null || true
    done
    exec 7>&-
    wait "$pid" || status=$?
    tr -d '\r' <"$screen" >>"$work/sudo.err"
    tr -d '\r' <"$screen" | sed -n 's/^id://p'
    return "$status"
}

# --- install ---
touch "$marker"
lock_deb=$(deb_path keyway-lock)
apt_get install "./$deb" "./$lock_deb" >"$work/apt-install.log" 2>&1 ||
    { cat "$work/apt-install.log" >&2; fail "apt-get install failed"; }
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
expect_mode "/lib/$multiarch/security/pam_keyway.so" "644 root"
expect_mode /usr/bin/keyway "755 root"
expect_mode /usr/sbin/keywayd "755 root"
expect_mode /usr/share/pam-configs/keyway "644 root"
expect_mode /etc/keyway "755 root"
expect_mode /etc/keyway/keyway.conf "644 root"
expect_mode /var/lib/keyway "700 root"
expect_mode /lib/systemd/system/keywayd.socket "644 root"
grep -q '^ExecStart=/usr/sbin/keywayd ' /lib/systemd/system/keywayd.service || fail "keywayd.service does not run /usr/sbin/keywayd"
dpkg-query -W -f='${Conffiles}\n' keyway | grep -q '/etc/keyway/keyway.conf' || fail "keyway.conf is not a conffile"
expect_mode /usr/bin/keyway-lock "755 root"
expect_mode /etc/pam.d/keyway-lock "644 root"
dpkg-query -W -f='${Conffiles}\n' keyway-lock | grep -q '/etc/pam.d/keyway-lock' ||
    fail "/etc/pam.d/keyway-lock is not a conffile"
cmp -s pam/examples/keyway-lock /etc/pam.d/keyway-lock || fail "/etc/pam.d/keyway-lock is not pam/examples/keyway-lock"
keyway-lock --help | grep -q '^usage: keyway-lock' || fail "keyway-lock --help does not print its usage"
! ldd /usr/bin/keyway /usr/sbin/keywayd "/lib/$multiarch/security/pam_keyway.so" | grep -Eq 'libX11|libcairo' ||
    fail "keyway, keywayd or the module links an X library"
keyway policy check || fail "the shipped /etc/keyway/keyway.conf does not check"
cmp -s "$work/common-auth" /etc/pam.d/common-auth || fail "installing changed common-auth while the profile is off"
echo "test-deb: installed; the files are in place and common-auth is unchanged (the profile is off)"

# --- enable the profile ---
pam-auth-update --enable keyway
keyway_line=$(grep -n 'pam_keyway\.so' /etc/pam.d/common-auth | cut -d: -f1 | head -1)
unix_line=$(grep -n '^auth.*pam_unix\.so' /etc/pam.d/common-auth | cut -d: -f1 | head -1)
[ -n "$keyway_line" ] || fail "pam-auth-update --enable keyway put no Keyway line in common-auth"
[ "$keyway_line" -lt "$unix_line" ] || fail "the Keyway line (line $keyway_line) does not come before pam_unix ($unix_line)"
grep -Eq '^auth[[:space:]]+\[success=[0-9]+ default=ignore\][[:space:]]+pam_keyway\.so policy=common-auth next=password' \
    /etc/pam.d/common-auth || fail "the Keyway line is not [success=N default=ignore] ... policy=common-auth next=password"
echo "test-deb: enabled: common-auth line $keyway_line is Keyway's, before pam_unix on line $unix_line:"
grep -E 'pam_keyway|pam_unix' /etc/pam.d/common-auth | sed 's/^/    /'

# --- keywayd, started as keywayd.service starts it (systemd is not assumed) ---
read -r -a exec_start <<<"$(sed -n 's/^ExecStart=//p' /lib/systemd/system/keywayd.service)"
"${exec_start[@]}" 2>"$work/keywayd.log" &
daemon=$!
for _ in $(seq 100); do [ -S /run/keyway/keywayd.sock ] && break; sleep 0.05; done
[ -S /run/keyway/keywayd.sock ] || { cat "$work/keywayd.log" >&2; fail "keywayd did not create its socket"; }
echo "test-deb: keywayd runs: ${exec_start[*]}"

# --- a throwaway user with a password, a sudoers drop-in, a pattern ---
useradd -M -s /bin/bash "$user"   # no home: nothing of it outside the namespace's /etc
echo "$user:$password" | chpasswd
printf 'Defaults:%s !lecture, passwd_tries=1\n%s ALL=(ALL) ALL\n' "$user" "$user" >"$work/sudoers"
visudo -cqf "$work/sudoers" || fail "the sudoers drop-in does not check"
install -m 440 "$work/sudoers" "$sudoers"
echo "$pattern" | keyway enroll gesture --user "$user" --stdin >"$work/enroll.log" 2>&1 || fail "enrolling the pattern failed"
# The person runs keyway for their own account from a login shell (its PATH from /etc/login.defs, no sbin).
found=$(runuser -l "$user" -c 'command -v keyway' 2>/dev/null) || fail "keyway is not on $user's PATH"
[ "$found" = /usr/bin/keyway ] || fail "keyway on $user's PATH is '$found', not /usr/bin/keyway"
runuser -l "$user" -c 'keyway status' >"$work/status.log" 2>&1 ||
    fail "keyway status as $user failed: $(cat "$work/status.log")"
grep -q gesture "$work/status.log" || fail "keyway status as $user does not show the pattern: $(cat "$work/status.log")"
echo "test-deb: $user's login shell finds /usr/bin/keyway, and keyway status shows their pattern"

# --- real sudo, through /etc/pam.d/sudo and the generated common-auth ---
out=$(as_user_sudo "$pattern") || fail "sudo with the right pattern failed: $(cat "$work/sudo.err")"
[ "$out" = 0 ] || fail "sudo with the right pattern printed '$out'"
echo "test-deb: sudo with the pattern → id -u = 0"
out=$(as_user_sudo 3-4-9-2 "" "$password") ||
    fail "sudo with a wrong pattern, Enter, then the password failed: $(cat "$work/sudo.err")"
[ "$out" = 0 ] || fail "sudo with the password after a wrong pattern printed '$out'"
echo "test-deb: sudo with a wrong pattern, Enter, then the password → id -u = 0"
if out=$(as_user_sudo 3-4-9-2 "" not-the-password); then
    fail "sudo with a wrong pattern and a wrong password succeeded ('$out')"
fi
echo "test-deb: sudo with a wrong pattern and a wrong password → refused"
# The module in real sudo kept the compiled /etc/keyway/keyway.conf beside keywayd's socket (ConfigurationCache).
kept=$(find /run/keyway -maxdepth 1 -name 'keyway.conf-*.compiled' -user root -perm 644 | head -1)
[ -n "$kept" ] || fail "the module in sudo kept no compiled keyway.conf in /run/keyway: $(ls -la /run/keyway)"
echo "test-deb: the module in sudo kept the compiled keyway.conf: $kept"
# keywayd noted the user's availability for the module (keywayd(8), --notes): root's alone, named by the name in hex.
note=/run/keyway/keywayd.sock.notes/$(printf %s "$user" | od -An -tx1 | tr -d ' \n')
[ "$(stat -c %U:%a "$note" 2>/dev/null)" = root:600 ] ||
    fail "keywayd left no root-only note about $user: $(ls -la /run/keyway/keywayd.sock.notes 2>&1)"
echo "test-deb: keywayd noted $user's availability: $note"
stop_daemon
[ ! -e /run/keyway/keywayd.sock.notes ] || fail "keywayd, stopped with SIGTERM, left its notes"
out=$(as_user_sudo "$password") || fail "sudo with keywayd stopped failed: $(cat "$work/sudo.err")"
[ "$out" = 0 ] || fail "sudo with keywayd stopped printed '$out'"
echo "test-deb: keywayd stopped: sudo goes straight to the password → id -u = 0"

# --- the lock screen's package goes alone, its PAM service with it ---
apt_get purge keyway-lock >"$work/apt-purge-lock.log" 2>&1 ||
    { cat "$work/apt-purge-lock.log" >&2; fail "apt-get purge keyway-lock failed"; }
[ ! -e /usr/bin/keyway-lock ] && [ ! -e /etc/pam.d/keyway-lock ] || fail "purging keyway-lock left its files"
[ -x /usr/sbin/keywayd ] || fail "purging keyway-lock took keyway with it"
echo "test-deb: keyway-lock installed beside keyway (its service a conffile, keyway linking no X) and purged alone"

# --- remove: common-auth byte for byte, the password still works ---
apt_get remove keyway >"$work/apt-remove.log" 2>&1 || { cat "$work/apt-remove.log" >&2; fail "apt-get remove failed"; }
cmp "$work/common-auth" /etc/pam.d/common-auth || fail "apt-get remove did not restore common-auth byte for byte"
[ ! -e "/lib/$multiarch/security/pam_keyway.so" ] || fail "apt-get remove left the module"
[ -d /var/lib/keyway ] && [ -e /etc/keyway/keyway.conf ] || fail "apt-get remove did not keep the store and the conffile"
[ ! -e "$kept" ] || fail "apt-get remove left the compiled keyway.conf $kept"
[ ! -e /run/keyway/keywayd.sock.notes ] || fail "apt-get remove left keywayd's notes: $(ls -la /run/keyway)"
out=$(as_user_sudo "$password") || fail "sudo with the password failed after removal: $(cat "$work/sudo.err")"
[ "$out" = 0 ] || fail "sudo with the password after removal printed '$out'"
printf '%s\n' "$password" | pamtester login "$user" authenticate >/dev/null 2>&1 ||
    fail "pamtester login $user authenticate failed after removal"
echo "test-deb: removed: common-auth is byte for byte the original; sudo and pamtester login take the password"

# --- purge: the state goes ---
apt_get purge keyway >"$work/apt-purge.log" 2>&1 || { cat "$work/apt-purge.log" >&2; fail "apt-get purge failed"; }
[ ! -e /var/lib/keyway ] || fail "apt-get purge left /var/lib/keyway"
[ ! -e /etc/keyway ] || fail "apt-get purge left /etc/keyway"
[ ! -e /usr/share/pam-configs/keyway ] || fail "apt-get purge left the profile"
! known || fail "keyway is still known to dpkg after the purge"
cmp -s "$work/common-auth" /etc/pam.d/common-auth || fail "common-auth changed after the purge"
[ "$(pam_state)" = "$pam_before" ] || fail "/var/lib/pam differs from before the test"
[ "$(debconf_profiles)" = "$debconf_before" ] ||
    fail "pam-auth-update's debconf selection changed: $debconf_before → $(debconf_profiles)"
echo "test-deb: purged: /var/lib/keyway and /etc/keyway are gone; common-auth and /var/lib/pam are as found"
