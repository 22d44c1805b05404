#!/usr/bin/env bash
# The tests' software security key checked against an implementation that is not ours: Debian's libfido2 tools
# (fido2-token, fido2-cred, fido2-assert) reach keyway-softkey through the LD_PRELOAD shim, make EdDSA and ES256
# credentials, verify their self attestation, get assertions and verify them, read the PIN's tries left, see each
# knob act (DIR/knobs, Knobs.swift), and Debian's pamu2fcfg enroll the key.
#
#   swift build --product keyway-softkey && make harness     (the key, and build/softkey-shim.so)
#   scripts/softkey-check.sh .build/debug
#
# Prints each step; exits non-zero at the first failure. Starts its keys on a temporary directory and stops them
# (by their process ids) and removes it on exit. Python's ctypes drives libfido2 directly for the cancel step
# (skipped without python3); pamu2fcfg (package pamu2fcfg) is optional and skipped when absent.
set -euo pipefail

bin=${1:?usage: scripts/softkey-check.sh BINDIR (the build products, e.g. /tmp/softkey-build/debug)}
bin=$(cd "$bin" && pwd)
shim=${SOFTKEY_SHIM:-$(cd "$(dirname "$0")/.." && pwd)/build/softkey-shim.so}
softkey=$bin/keyway-softkey

step() { printf '== %s\n' "$*"; }
ok() { printf '   ok: %s\n' "$*"; }
skip() { printf '   skipped: %s\n' "$*"; }
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}

[ -x "$softkey" ] || fail "no $softkey (build the product keyway-softkey)"
[ -f "$shim" ] || fail "no $shim (make harness builds it)"
for tool in fido2-token fido2-cred fido2-assert base64 od; do
    command -v "$tool" >/dev/null || fail "$tool is missing (fido2-tools, coreutils)"
done

work=$(mktemp -d /tmp/softkey-check.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        # SIGKILL: a key waiting for a touch may have been started with SIGTERM blocked (a test runner's mask).
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# start_key DIR: runs a key on DIR and waits for its socket (it appears only once the key listens).
start_key() {
    "$softkey" "$1" >"$1.out" 2>&1 &
    pids+=("$!")
    for _ in $(seq 100); do
        [ -S "$1/key.sock" ] && return 0
        sleep 0.05
    done
    cat "$1.out" >&2
    fail "keyway-softkey did not listen on $1/key.sock"
}

key=$work/key
start_key "$key"
sock=$key/key.sock
dev=softkey:$sock

# with_key SOCKET COMMAND...: COMMAND with the shim preloaded and pointed at SOCKET.
with_key() {
    local socket=$1
    shift
    LD_PRELOAD=$shim KEYWAY_SOFTKEY=$socket "$@"
}
knobs() { printf '%s\n' "$@" >"$key/knobs"; }
log_count() { grep -c -x -- "$1" "$key/log" || true; }
b64() { head -c "$1" /dev/urandom | base64 -w0; }
# counter_of FILE: the signature count in the authenticator data (line 3 of fido2-assert -G's output, a CBOR byte
# string: 0x58 0x25, then rpIdHash (32), flags (1), counter (4, big-endian)).
counter_of() { printf '%d' "0x$(sed -n 3p "$1" | base64 -d | od -An -tx1 -j35 -N4 | tr -d ' \n')"; }
flags_of() { printf '%d' "0x$(sed -n 3p "$1" | base64 -d | od -An -tx1 -j34 -N1 | tr -d ' \n')"; }

step "fido2-token -L lists the soft key (and nothing of it without KEYWAY_SOFTKEY)"
with_key "$sock" fido2-token -L | tee "$work/list"
grep -q "^$dev: .*(Keyway software key)" "$work/list" || fail "fido2-token -L does not list $dev"
if LD_PRELOAD=$shim fido2-token -L | grep -q softkey; then fail "the shim listed the key without KEYWAY_SOFTKEY"; fi
ok "listed as $dev"

step "fido2-token -I: getInfo through libfido2"
with_key "$sock" fido2-token -I "$dev" >"$work/info"
grep -q "version strings: FIDO_2_0" "$work/info" || fail "no FIDO_2_0 in: $(cat "$work/info")"
grep -q "caps: 0x0c" "$work/info" || fail "capabilities are not CBOR|NMSG"
ok "$(grep -E 'aaguid|options' "$work/info" | tr '\n' ' ')"

step "fido2-cred -M makes an EdDSA credential; fido2-cred -V verifies its attestation (x5c)"
rp=keyway.test
printf '%s\n%s\nalice\n%s\n' "$(b64 32)" "$rp" "$(b64 16)" >"$work/cred.in"
with_key "$sock" fido2-cred -M -i "$work/cred.in" -o "$work/cred.out" "$dev" eddsa
[ "$(sed -n 3p "$work/cred.out")" = packed ] || fail "the attestation format is not packed"
fido2-cred -V -i "$work/cred.out" -o "$work/cred.v" eddsa
credential_id=$(sed -n 1p "$work/cred.v")
sed -n '2,$p' "$work/cred.v" >"$work/pub.pem"
grep -q "BEGIN PUBLIC KEY" "$work/pub.pem" || fail "fido2-cred -V gave no public key"
[ "$(log_count 'makeCredential ok eddsa')" = 1 ] || fail "the key's log has no 'makeCredential ok eddsa'"
ok "credential $credential_id verified (packed, x5c attestation)"

step "fido2-cred -M makes an ES256 credential too; algorithms = eddsa refuses it"
with_key "$sock" fido2-cred -M -i "$work/cred.in" -o "$work/cred-es.out" "$dev" es256
fido2-cred -V -i "$work/cred-es.out" -o "$work/cred-es.v" es256
es_id=$(sed -n 1p "$work/cred-es.v")
sed -n '2,$p' "$work/cred-es.v" >"$work/pub-es.pem"
knobs "algorithms = eddsa"
if with_key "$sock" fido2-cred -M -q -i "$work/cred.in" "$dev" es256 >/dev/null 2>"$work/es256.err"; then
    fail "an es256 credential was made by a key told to make Ed25519 alone"
fi
grep -q "FIDO_ERR_UNSUPPORTED_ALGORITHM" "$work/es256.err" || fail "es256: $(cat "$work/es256.err")"
knobs ""
ok "ES256 credential $es_id verified; refused with algorithms = eddsa"

# assert OUT [fido2-assert -G options...]: an assertion for the credential on the key, verified with its public key
# (ES_ASSERT=1: the ES256 credential's).
assert() {
    local out=$1 id=$credential_id pem=$work/pub.pem alg=eddsa
    shift
    if [ "${ES_ASSERT:-}" = 1 ]; then id=$es_id pem=$work/pub-es.pem alg=es256; fi
    printf '%s\n%s\n%s\n' "$(b64 32)" "$rp" "$id" >"$work/assert.in"
    with_key "$sock" fido2-assert -G "$@" -i "$work/assert.in" -o "$out" "$dev"
    fido2-assert -V -i "$out" "$pem" "$alg"
}

step "fido2-assert -G gets assertions; fido2-assert -V verifies them; the counter counts"
assert "$work/a1" -p
fido2-assert -V -p -i "$work/a1" "$work/pub.pem" eddsa  # and the user presence bit is signed
assert "$work/a2" -p
c1=$(counter_of "$work/a1")
c2=$(counter_of "$work/a2")
[ "$c1" = 1 ] && [ "$c2" = 2 ] || fail "counters $c1, $c2 (expected 1, 2)"
ok "verified; sig counts $c1 then $c2"

step "an ES256 assertion verifies with fido2-assert -V"
ES_ASSERT=1 assert "$work/a-es" -p
ok "verified (es256)"

step "a PIN: fido2-token -I reads clientPin and the tries left"
knobs $'pin = 4321\npin-retries = 5'
with_key "$sock" fido2-token -I "$dev" >"$work/info-pin"
grep -q "clientPin" "$work/info-pin" || fail "no clientPin option: $(cat "$work/info-pin")"
grep -q "pin retries: 5" "$work/info-pin" || fail "no 'pin retries: 5': $(cat "$work/info-pin")"
knobs ""
ok "$(grep -E 'clientPin|pin retries|pin protocols' "$work/info-pin" | tr '\n' ' ')"

step "an assertion does not verify under another credential's key"
with_key "$sock" fido2-cred -M -i "$work/cred.in" -o "$work/cred2.out" "$dev" eddsa
fido2-cred -V -i "$work/cred2.out" -o "$work/cred2.v" eddsa
sed -n '2,$p' "$work/cred2.v" >"$work/pub2.pem"
if fido2-assert -V -i "$work/a2" "$work/pub2.pem" eddsa 2>/dev/null; then fail "verified under the wrong key"; fi
ok "rejected"

step "counter = repeat (a cloned key): still verifies, the sig count does not increase"
knobs "counter = repeat"
assert "$work/a3" -p
c3=$(counter_of "$work/a3")
[ "$c3" = "$c2" ] || fail "sig count $c3 after $c2 with counter = repeat"
ok "verified; sig count $c3 again"

step "counter = back: verifies, the sig count goes back"
knobs "counter = back"
assert "$work/a4" -p
c4=$(counter_of "$work/a4")
[ "$c4" = $((c2 - 1)) ] || fail "sig count $c4 with counter = back (stored $c2)"
ok "verified; sig count $c4"
knobs "counter = count"

step "a copy of DIR/state is a clone: both keys sign, from the same counter"
clone=$work/clone
mkdir "$clone"
cp "$key/state" "$clone/state"
start_key "$clone"
sock_saved=$sock dev_saved=$dev
sock=$clone/key.sock dev=softkey:$clone/key.sock
assert "$work/a5" -p
sock=$sock_saved dev=$dev_saved
assert "$work/a6" -p
c5=$(counter_of "$work/a5")
c6=$(counter_of "$work/a6")
[ "$c5" = $((c2 + 1)) ] && [ "$c6" = "$c5" ] || fail "clone $c5, original $c6 (expected both $((c2 + 1)))"
ok "clone and original both sent sig count $c5"

step "another relying party: CTAP2_ERR_NO_CREDENTIALS, at once"
printf '%s\nother.test\n%s\n' "$(b64 32)" "$credential_id" >"$work/other.in"
if with_key "$sock" fido2-assert -G -i "$work/other.in" "$dev" >/dev/null 2>"$work/other.err"; then
    fail "an assertion for another relying party"
fi
grep -q FIDO_ERR_NO_CREDENTIALS "$work/other.err" || fail "other rp: $(cat "$work/other.err")"
[ "$(log_count 'getAssertion no-credentials')" = 1 ] || fail "no 'getAssertion no-credentials' in the log"
ok "$(tr -d '\n' <"$work/other.err")"

step "uv = none: uv=true is refused; uv = builtin: the UV flag is signed"
if assert "$work/a7" -t uv=true 2>"$work/uv.err" >/dev/null; then fail "uv=true answered without uv = builtin"; fi
grep -q FIDO_ERR_UNSUPPORTED_OPTION "$work/uv.err" || fail "uv: $(cat "$work/uv.err")"
knobs "uv = builtin"
with_key "$sock" fido2-token -I "$dev" >"$work/info.uv"
grep -q "^options:.* uv," "$work/info.uv" || fail "getInfo does not list uv"
assert "$work/a8" -t uv=true
fido2-assert -V -v -i "$work/a8" "$work/pub.pem" eddsa
[ $(($(flags_of "$work/a8") & 4)) = 4 ] || fail "no UV flag"
knobs ""
ok "refused with FIDO_ERR_UNSUPPORTED_OPTION, then verified with the UV bit"

step "presence = wait: the request waits for DIR/touch, and takes it"
knobs "presence = wait"
printf '%s\n%s\n%s\n' "$(b64 32)" "$rp" "$credential_id" >"$work/wait.in"
with_key "$sock" fido2-assert -G -i "$work/wait.in" -o "$work/a9" "$dev" &
waiting=$!
pids+=("$waiting")
sleep 1
kill -0 "$waiting" 2>/dev/null || fail "fido2-assert did not wait for the touch"
touch "$key/touch"
wait "$waiting" || fail "fido2-assert failed after the touch"
[ ! -e "$key/touch" ] || fail "the touch was not taken"
fido2-assert -V -i "$work/a9" "$work/pub.pem" eddsa
ok "waited, then answered; the touch file is gone"

step "presence = never: CTAP2_ERR_USER_ACTION_TIMEOUT after presence-timeout"
knobs "presence = never" "presence-timeout = 1"
if with_key "$sock" fido2-assert -G -i "$work/wait.in" "$dev" >/dev/null 2>"$work/never.err"; then
    fail "an assertion nobody touched"
fi
grep -q FIDO_ERR_USER_ACTION_TIMEOUT "$work/never.err" || fail "never: $(cat "$work/never.err")"
ok "$(tr -d '\n' <"$work/never.err")"

step "fido_dev_cancel from another thread (python ctypes, libfido2 loaded RTLD_LOCAL as by a PAM module)"
if command -v python3 >/dev/null; then
    knobs "presence = never"
    with_key "$sock" python3 - "$dev" "$rp" "$credential_id" <<'EOF' || fail "cancel"
import base64, ctypes, sys, threading, time
# libfido2 loaded RTLD_LOCAL, out of RTLD_NEXT's reach: the shim finds it with dlopen(RTLD_NOLOAD). Its interposed
# functions are called through the global scope, where the preloaded shim comes first (as pam_u2f's calls resolve).
fido = ctypes.CDLL("libfido2.so.1")
interposed = ctypes.CDLL(None)
fido.fido_dev_new.restype = ctypes.c_void_p
fido.fido_assert_new.restype = ctypes.c_void_p
for name in ("fido_dev_open", "fido_dev_get_assert", "fido_dev_cancel", "fido_assert_set_rp",
             "fido_assert_set_clientdata_hash", "fido_assert_allow_cred"):
    getattr(fido, name).argtypes = None
path, rp, cred = sys.argv[1].encode(), sys.argv[2].encode(), base64.b64decode(sys.argv[3])
fido.fido_init(0)
dev, a = ctypes.c_void_p(fido.fido_dev_new()), ctypes.c_void_p(fido.fido_assert_new())
assert interposed.fido_dev_open(dev, path) == 0, "fido_dev_open"
fido.fido_assert_set_rp(a, rp)
fido.fido_assert_set_clientdata_hash(a, b"\x01" * 32, ctypes.c_size_t(32))
fido.fido_assert_allow_cred(a, cred, ctypes.c_size_t(len(cred)))
result = {}
def get():
    result["r"] = fido.fido_dev_get_assert(dev, a, None)
thread = threading.Thread(target=get)
started = time.monotonic()
thread.start()
time.sleep(0.5)
assert fido.fido_dev_cancel(dev) == 0, "fido_dev_cancel"
thread.join(10)
took = time.monotonic() - started
assert not thread.is_alive(), "fido_dev_get_assert did not return after the cancel"
print("   fido_dev_get_assert returned 0x%x (FIDO_ERR_KEEPALIVE_CANCEL is 0x2d) after %.1f s" % (result["r"], took))
assert result["r"] == 0x2D
EOF
    [ "$(log_count 'getAssertion cancelled')" = 1 ] || fail "no 'getAssertion cancelled' in the log"
    ok "cancelled"
else
    skip "no python3"
fi
knobs ""

step "unplugged = yes: every request is answered by closing the connection"
knobs "unplugged = yes"
if with_key "$sock" fido2-token -I "$dev" >/dev/null 2>"$work/unplugged.err"; then fail "an unplugged key answered"; fi
[ "$(log_count unplugged)" -ge 1 ] || fail "no 'unplugged' in the log"
ok "$(tr -d '\n' <"$work/unplugged.err")"
knobs ""

step "pamu2fcfg (optional)"
if command -v pamu2fcfg >/dev/null; then
    # pam_u2f 1.1.0 (Debian 12) knows ES256 and RS256 alone: the key makes it an ES256 credential.
    with_key "$sock" timeout 20 pamu2fcfg -u root -o pam://keyway -i pam://keyway >"$work/pamu2fcfg.out" \
        2>"$work/pamu2fcfg.err" || fail "pamu2fcfg: $(cat "$work/pamu2fcfg.err")"
    grep -q "^root:.*,es256," "$work/pamu2fcfg.out" || fail "pamu2fcfg wrote: $(cat "$work/pamu2fcfg.out")"
    ok "pamu2fcfg enrolled an ES256 credential: $(cut -c1-60 "$work/pamu2fcfg.out")..."
else
    skip "pamu2fcfg is not installed"
fi

step "the key's log"
sort "$key/log" | uniq -c
echo "softkey-check: all passed"
