#!/usr/bin/env bash
# Checks `make install` and `make uninstall` in a staging directory (DESTDIR): what lands where, with which
# owner and mode, that uninstall refuses while a PAM stack names the module, and that it keeps the store.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d /tmp/keyway-install.XXXXXX)
case "$stage" in /tmp/keyway-install.*) ;; *) echo "test-install: no staging directory" >&2; exit 1 ;; esac
trap 'rm -rf "$stage"' EXIT
fail() { echo "test-install: $*" >&2; exit 1; }
expect_mode() {  # path mode owner
    [ -e "$stage$1" ] || fail "$1 was not installed"
    [ "$(stat -c '%a %U' "$stage$1")" = "$2 $3" ] || fail "$1 is $(stat -c '%a %U' "$stage$1"), expected $2 $3"
}
make -s install DESTDIR="$stage" >/dev/null
pamdir=$(make -s print-pam-dir)
expect_mode "$pamdir/pam_keyway.so" 644 root
expect_mode /usr/local/bin/keyway 755 root
[ ! -e "$stage/usr/local/sbin/keyway" ] || fail "keyway is in sbin too, off a user's PATH"
expect_mode /usr/local/bin/keyway-lock 755 root
expect_mode /usr/local/share/man/man1/keyway-lock.1 644 root
expect_mode /usr/local/share/doc/keyway/examples/keyway-lock 644 root
expect_mode /usr/local/share/man/man8/pam_keyway.8 644 root
expect_mode /usr/local/share/man/man8/keyway.8 644 root
expect_mode /usr/local/share/doc/keyway/examples/sudo 644 root
expect_mode /usr/local/share/doc/keyway/examples/gdm-fingerprint 644 root
expect_mode /usr/local/share/man/man5/keyway.conf.5 644 root
expect_mode /usr/local/share/doc/keyway/examples/keyway.conf/wheel.conf 644 root
expect_mode /usr/local/share/bash-completion/completions/keyway 644 root
grep -q 'complete -F _keyway keyway' "$stage/usr/local/share/bash-completion/completions/keyway" \
    || fail "the bash completion is not keyway's"
expect_mode /etc/keyway 755 root
expect_mode /var/lib/keyway 700 root
cmp -s build/pam_keyway.so "$stage$pamdir/pam_keyway.so" || fail "the installed module is not build/pam_keyway.so"
mkdir -p "$stage/etc/pam.d"
# Another copy of the module, named by its own path, and the name in a comment or an argument: not this module.
printf 'auth required /opt/other/pam_keyway.so\n# pam_keyway.so policy=pattern\nauth required pam_unix.so # pam_keyway.so\n' \
    > "$stage/etc/pam.d/other-copy"
echo "auth [success=done default=ignore] pam_keyway.so policy=pattern" > "$stage/etc/pam.d/sudo"
if make -s uninstall DESTDIR="$stage" >"$stage/refusal" 2>&1; then fail "uninstall went ahead while /etc/pam.d/sudo names the module"; fi
grep -qF "$stage/etc/pam.d/sudo:1: auth [success=done default=ignore] pam_keyway.so policy=pattern" "$stage/refusal" \
    || fail "the refusal does not list the line that uses the module: $(cat "$stage/refusal")"
if grep -q other-copy "$stage/refusal"; then fail "the refusal lists a line that does not use this module"; fi
[ -e "$stage$pamdir/pam_keyway.so" ] || fail "a refused uninstall removed the module"
rm "$stage/etc/pam.d/sudo"
touch "$stage/var/lib/keyway/keyway.db"
echo "# kept" > "$stage/etc/keyway/keyway.conf"
make -s uninstall DESTDIR="$stage" > "$stage/report" 2>&1 \
    || fail "uninstall refused with only another copy in use: $(cat "$stage/report")"
[ ! -e "$stage$pamdir/pam_keyway.so" ] || fail "uninstall left the module"
[ ! -e "$stage/usr/local/bin/keyway" ] || fail "uninstall left the CLI"
[ ! -e "$stage/usr/local/bin/keyway-lock" ] || fail "uninstall left the lock screen"
[ ! -e "$stage/usr/local/share/bash-completion/completions/keyway" ] || fail "uninstall left the completion"
[ -e "$stage/var/lib/keyway/keyway.db" ] || fail "uninstall removed the store"
[ -e "$stage/etc/keyway/keyway.conf" ] || fail "uninstall removed the configuration"
grep -qF "Kept $stage/etc/keyway: it holds your configuration (keyway.conf)" "$stage/report" \
    || fail "uninstall did not say it kept /etc/keyway: $(cat "$stage/report")"
echo "test-install: install and uninstall behave (module at $pamdir)"
