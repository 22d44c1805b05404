#!/usr/bin/env bash
# make harden: what runs on every change because Keyway runs inside setuid programs and decides who becomes root.
#   1. the Swift test suite built with AddressSanitizer (any report fails the run), and the PAM suites again with the
#      C host built with AddressSanitizer + UndefinedBehaviorSanitizer;
#   2. valgrind over 1,000 start/authenticate/end cycles of the real module for each kind of answer, and for a
#      `first of` that arms the sensor at keywayd on every cycle;
#   3. every fuzz target for a fixed number of executions;
# and prints a summary. Needs `make module cli harness` (the Makefile's dependencies). Changes no system file.
# docs/HARDENING.md says what each step checks, and why its settings are what they are.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
CYCLES=${CYCLES:-1000}
FUZZ_RUNS=${FUZZ_RUNS:-100000}
out=build/harden
rm -rf "$out" && mkdir -p "$out/asan"
work=$(mktemp -d /tmp/keyway-harden.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"
summary=()
say() { printf '%s\n' "$*"; summary+=("$*"); }
started=$(date +%s)

# 1. AddressSanitizer over the whole Swift suite, with keywayd built with ASan as well (KEYWAY_DAEMON). Only the
#    test products and keywayd are built so: the PAM module cannot link
#    with -sanitize=address (its -z defs refuses the runtime's symbols, which only an executable carries); the
#    module is checked by valgrind below instead. Leak detection is off here: the Swift runtime's one-time
#    metadata caches show as leaks at exit; leaks in the module are valgrind's job (step 2).
echo "== AddressSanitizer: the Swift test suite"
build() {  # log-name swift-build-arguments… → fails the run, showing the errors, when the build fails
    local name=$1
    shift
    if ! $SWIFT build "$@" >"$out/build-$name.txt" 2>&1; then
        grep -E "error" "$out/build-$name.txt" | head -40
        echo "harden: the $name build failed ($out/build-$name.txt)" >&2
        exit 1
    fi
}
build asan --sanitize=address --scratch-path .build/asan --product KeywayPackageTests
build asan-probe --sanitize=address --scratch-path .build/asan --product keyway-probe
# keywayd reads what any local user sends: the suite's daemons (hostile requests included) are an ASan build too.
build asan-daemon --sanitize=address --scratch-path .build/asan --product keywayd
asan_options="log_path=$PWD/$out/asan/report:detect_leaks=0:halt_on_error=1:abort_on_error=1"
if ! ASAN_OPTIONS=$asan_options KEYWAY_DAEMON=$PWD/.build/asan/debug/keywayd \
    $SWIFT test --skip-build --sanitize=address --scratch-path .build/asan --parallel \
    >"$out/asan-tests.txt" 2>&1; then
    grep -E "✘|ERROR" "$out/asan-tests.txt" | head -40
    echo "harden: the suite failed under AddressSanitizer ($out/asan-tests.txt)" >&2
    exit 1
fi
if compgen -G "$out/asan/report*" >/dev/null; then
    cat "$out"/asan/report* | head -60
    echo "harden: AddressSanitizer reported errors ($out/asan/)" >&2
    exit 1
fi
say "AddressSanitizer: $(grep -oE 'Test run with [0-9]+ tests in [0-9]+ suites passed' "$out/asan-tests.txt"), 0 reports"

# Swift has no UndefinedBehaviorSanitizer on Linux (swiftc: "unsupported option '-sanitize=undefined'"), so UBSan
# covers the C host: the PAM suites run again with build/pam-harness built with ASan + UBSan, which also puts every
# malloc and free of the module (uninstrumented) under ASan's allocator: a double or invalid free would abort.
# The one test left out here is the RSS-growth check over 1,000 cycles: ASan's quarantine keeps freed memory on
# purpose, so RSS grows by design in this host; that test runs in the plain suite, and valgrind checks leaks below.
# The suites run side by side, as in `make test` (they are written to: each has its own users, services and
# daemons), which keeps this pass to about half its serial time.
echo "== AddressSanitizer + UndefinedBehaviorSanitizer: the C host over the real module"
${CC:-gcc} -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -Wall -Wextra \
    -o "$out/pam-harness-sanitized" pam/tests/harness.c -lpam -ldl
if ! KEYWAY_HARNESS=$PWD/$out/pam-harness-sanitized ASAN_OPTIONS=$asan_options \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$PWD/$out/asan/ubsan \
    $SWIFT test --skip-build --parallel --filter 'PAMTests' --skip 'thousandCycles' >"$out/sanitized-host.txt" 2>&1; then
    grep -E "✘|ERROR|runtime error" "$out/sanitized-host.txt" | head -40
    echo "harden: the PAM suites failed with the sanitized C host ($out/sanitized-host.txt)" >&2
    exit 1
fi
if compgen -G "$out/asan/*" >/dev/null; then
    cat "$out"/asan/* | head -60
    echo "harden: a sanitizer reported errors in the C host ($out/asan/)" >&2
    exit 1
fi
say "ASan+UBSan C host: $(grep -oE 'Test run with [0-9]+ tests in [0-9]+ suites passed' "$out/sanitized-host.txt"), 0 reports"

# 2. valgrind: CYCLES start/authenticate/end cycles in one process for each kind of answer. The store is hashed at
#    libsodium's least cost (t=1, 8 KiB: keyway-probe enroll-cost): valgrind runs Argon2id ~30× slower, and the hash cost
#    says nothing about memory errors. "definitely lost" must be 0; "possibly lost" (the Swift runtime's caches,
#    reached through interior pointers) must be the same after 1 cycle as after CYCLES: nothing grows per call.
echo "== valgrind: $CYCLES cycles of the real module per scenario"
build probe -c release --product keyway-probe
probe=.build/release/keyway-probe
mkdir "$work/pam.d"
# One user per scenario, so scenarios running side by side never share counters.
for user in alice bob carol dave erin frank root; do "$probe" enroll-cost "$work/keyway.db" "$user" 739155 1 8 >/dev/null; done
# root (in this store only) also has a finger, so its `first of` arms the sensor at keywayd before every prompt; the
# command line enrolls only accounts of the system, and root is the one every machine has.
build/keyway --store "$work/keyway.db" enroll biometric --user root --simulate-touches >/dev/null
# carol is throttled for an hour (9 consecutive failures), so she stays throttled however long valgrind takes.
now_ms=$(($(date +%s) * 1000))
sqlite3 "$work/keyway.db" \
    "INSERT INTO attempts (user, factor, failures, last_failure, recent_mismatches) VALUES ('carol', 'passcode', 9, $now_ms, x'')"
# The module is keywayd's client: one daemon serves every scenario (it is not under valgrind; the module is).
build/keywayd --socket "$work/keywayd.sock" --store "$work/keyway.db" --sensor "$work/sensor" --idle-exit 900 --metrics none \
    2>"$out/keywayd.txt" &
daemon=$!
trap 'kill $daemon 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -S "$work/keywayd.sock" ] && break; sleep 0.05; done
echo "auth required $PWD/build/pam_keyway.so policy=passcode socket=$work/keywayd.sock sensor=$work/run" \
    >"$work/pam.d/kw"
# The same through a configuration of keyway.conf(5)'s settings example, a drop-in and a group variant, which the
# module reads on every call: compiled at the first, then restored from the form it keeps beside the socket.
mkdir -p "$work/keyway.conf.d"
cp man/examples/settings.conf "$work/keyway.conf"
printf '[policy conf]\nrequire = passcode or gesture\n[policy conf for group root]\nrequire = passcode*2\n' \
    >"$work/keyway.conf.d/50-conf.conf"
echo "auth required $PWD/build/pam_keyway.so policy=conf config=$work/keyway.conf socket=$work/keywayd.sock sensor=$work/run" \
    >"$work/pam.d/kwconf"
# first of (biometric, passcode): each cycle arms the sensor at keywayd (a connection held across the prompt, a
# claim-free success by the passcode) and releases it.
printf '[policy either]\nrequire = first of (biometric, passcode)\n' >"$work/either.conf"
echo "auth required $PWD/build/pam_keyway.so policy=either config=$work/either.conf socket=$work/keywayd.sock" \
    >"$work/pam.d/kwfirst"
scenario() {  # name user harness-answers…
    local name=$1 user=$2
    shift 2
    # --pin keeps the module mapped across cycles (libpam unloads it at every pam_end): valgrind would otherwise read
    # its debug information again for each of the CYCLES loads. Loading and unloading are the 1,000-cycle test's.
    local args=(--pin "$PWD/build/pam_keyway.so" "$@" "$work/pam.d" "${SERVICE:-kw}" "$user")
    for cycles in 1 "$CYCLES"; do
        if ! valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 \
            --show-leak-kinds=definite,possible --log-file="$out/valgrind-$name-$cycles.txt" \
            build/pam-harness --cycles "$cycles" "${args[@]}" >"$out/harness-$name-$cycles.txt" 2>&1; then
            echo "harden: valgrind found errors in scenario $name ($out/valgrind-$name-$cycles.txt)" >&2
            return 1
        fi
    done
}
leak() {  # file kind → bytes
    awk -v kind="$2 lost:" '$0 ~ kind { gsub(",", "", $4); print $4; found = 1 } END { if (!found) print 0 }' "$1"
}
# "wrong" repeats one wrong passcode: the first is a counted failure, the repeats are verified through the whole
# hash and refunded (a repeat never counts twice), so every cycle runs the full wrong-answer path without the
# user becoming throttled — which has a scenario of its own.
pids=()
scenario right alice --answer 739155 & pids+=($!)
scenario wrong bob --answer 482915 --answer 482915 --answer 482915 & pids+=($!)
scenario throttled carol --answer 739155 & pids+=($!)
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
pids=()
scenario malformed dave --answer "" --answer "" --answer "" & pids+=($!)
scenario null-reply erin --null-answer & pids+=($!)
SERVICE=kwconf scenario config frank --answer 739155 & pids+=($!)
SERVICE=kwfirst scenario first-of root --answer 739155 & pids+=($!)
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || exit 1
declare -A expected=([right]=PAM_SUCCESS [wrong]=PAM_AUTH_ERR [throttled]=PAM_MAXTRIES [malformed]=PAM_AUTH_ERR
    [null-reply]=PAM_CONV_ERR [config]=PAM_SUCCESS [first-of]=PAM_SUCCESS)
for name in right wrong throttled malformed null-reply config first-of; do
    first=$out/valgrind-$name-1.txt last=$out/valgrind-$name-$CYCLES.txt
    errors=$(awk '/ERROR SUMMARY/ { print $4 }' "$last")
    definite=$(leak "$last" definitely) possible_first=$(leak "$first" possibly) possible=$(leak "$last" possibly)
    result=$(awk '/^result:/ { print $2 }' "$out/harness-$name-$CYCLES.txt")
    [ "$errors" = 0 ] && [ "$definite" = 0 ] || { echo "harden: $name: $errors errors, $definite B definitely lost" >&2; exit 1; }
    [ "$possible" = "$possible_first" ] || {
        echo "harden: $name: 'possibly lost' grew from $possible_first B (1 cycle) to $possible B ($CYCLES)" >&2
        exit 1
    }
    [ "$result" = "${expected[$name]}" ] || { echo "harden: $name ended with $result, not ${expected[$name]}" >&2; exit 1; }
    say "valgrind $name: $CYCLES cycles → $result; 0 errors, 0 B definitely lost, $possible B possibly lost (same after 1 cycle)"
done

# 3. Every fuzz target, FUZZ_RUNS executions each (the configuration a quarter of it), libFuzzer + ASan, from a seed
#    corpus of its own.
echo "== libFuzzer: $FUZZ_RUNS executions per target ($((FUZZ_RUNS / 4)) for config)"
build fuzz --scratch-path .build/fuzz --product keyway-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING
targets=$(KEYWAY_FUZZ_TARGET=list .build/fuzz/debug/keyway-fuzz)
[ "$(echo "$targets" | wc -w)" -ge 8 ] || { echo "harden: keyway-fuzz lists too few targets: $targets" >&2; exit 1; }
seeds() {  # target → seed inputs, one per line
    case $1 in
        pattern) printf '1-2-3-6-9\n2493\n1-3\n' ;;
        passcode) printf '739155\npassword\n\n' ;;
        user-name) printf 'alice\nDOMAIN\\john smith\n..\n' ;;
        module-arguments) printf 'policy=pattern socket=/run/keyway/keywayd.sock debug\ntimeout=30 unenrolled=ignore\n' ;;
        sensor-command) printf 'present alice right-index\nretry Try again.\nunplug\n' ;;
        *) printf 'x\n' ;;
    esac
}
for target in $targets; do
    corpus=$work/corpus-$target
    mkdir -p "$corpus"
    n=0
    while IFS= read -r line; do printf '%s' "$line" >"$corpus/seed-$n"; n=$((n + 1)); done < <(seeds "$target")
    case $target in  # keywayd's messages are binary: a status request and a verify request, as a client sends them
        keywayd-request)
            printf '\001\006\001\000\000\000\005alice' >"$corpus/seed-status"
            printf '\001\002\000\000\000\007gesture\000\000\000\005alice\000\000\000\004sudo\000\001\001\000\000\000\0042493' \
                >"$corpus/seed-verify" ;;
        keywayd-response) printf '\001\004\001' >"$corpus/seed-verdict" ;;
        availability-note)  # alice: the passcode, concealing and not
            printf '\002\000\000\000\000\032keyway availability note 1\000\000\000\005alice%b%b' \
                '\000\000\000\001\000\000\000\010passcode' '\000\000\000\001\000\000\000\010passcode' \
                >"$corpus/seed-note" ;;
        config) cp man/examples/*.conf "$corpus"/ ;;  # keyway.conf(5)'s examples
    esac
    # The configuration target compiles a whole keyway.conf per input and reads every accepted rule back: about
    # 2 ms a run in this debug ASan build (225 s for 100,000), so it runs a quarter of the others' count.
    runs=$FUZZ_RUNS
    if [ "$target" = config ]; then runs=$((FUZZ_RUNS / 4)); fi
    if ! KEYWAY_FUZZ_TARGET=$target .build/fuzz/debug/keyway-fuzz -runs="$runs" -max_len=4096 -seed=1 \
        -artifact_prefix="$out/fuzz-$target-" "$corpus" >"$out/fuzz-$target.txt" 2>&1; then
        tail -30 "$out/fuzz-$target.txt"
        echo "harden: fuzz target $target found a crash ($out/fuzz-$target-*)" >&2
        exit 1
    fi
    done_line=$(grep -E '^Done [0-9]+ runs' "$out/fuzz-$target.txt" || echo "Done ? runs")
    say "fuzz $target: ${done_line#Done }, $(grep -oE 'cov: [0-9]+' "$out/fuzz-$target.txt" | tail -1)"
done

echo
echo "== harden summary ($(($(date +%s) - started)) s)"
printf '  %s\n' "${summary[@]}"
