#!/usr/bin/env bash
# Prints, side by side in one run, for pam_keyway.so, pam_unix.so and pam_permit.so: the time to dlopen the module,
# the time from pam_start to the first prompt, and the RSS one authentication adds to a C host (all medians).
# A benchmark, not a test. Needs `make module cli harness`; changes no system file.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-25}
security=$(make -s print-pam-dir)
harness=build/pam-harness
work=$(mktemp -d /tmp/keyway-bench-pam.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"
mkdir "$work/pam.d"
echo 2-4-9-3 | build/keyway --store "$work/keyway.db" enroll gesture --user bench --stdin >/dev/null 2>&1
echo "auth required $PWD/build/pam_keyway.so policy=pattern store=$work/keyway.db" > "$work/pam.d/keyway"
echo "auth required $security/pam_unix.so" > "$work/pam.d/unix"
echo "auth required $security/pam_permit.so" > "$work/pam.d/permit"
# The floor: an empty Swift module linked the way pam_keyway.so is (static runtime, nodelete, version script, strip).
cat > "$work/floor.swift" <<'SWIFT'
@_cdecl("pam_sm_authenticate")
public func pam_sm_authenticate(_ h: OpaquePointer?, _ f: Int32, _ c: Int32,
                                _ v: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 { 0 }
SWIFT
swiftc -O -emit-library -static-stdlib "$work/floor.swift" -o "$work/pam_swift_floor.so" -Xlinker -z -Xlinker nodelete \
    -Xlinker --version-script=pam/exports.map -Xlinker --strip-all 2>/dev/null
echo "auth required $work/pam_swift_floor.so" > "$work/pam.d/floor"

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else print v[int((NR + 1) / 2)] }'; }

printf '%-16s %10s %10s %14s %10s %16s\n' module "size" "dlopen" "first prompt" "RSS added" "(anon / file)"
for name in keyway floor unix permit; do
    case $name in
        keyway) path=$PWD/build/pam_keyway.so; answer=2-4-9-3; user=bench ;;
        unix) path=$security/pam_unix.so; answer=not-the-password; user=root ;;
        permit) path=$security/pam_permit.so; answer=x; user=root ;;
        floor) path=$work/pam_swift_floor.so; answer=x; user=root ;;
    esac
    dlopen=$("$harness" --dlopen "$path" "$rounds" | awk '{ print $2 }')
    prompts=$(for _ in $(seq 1 "$rounds"); do
        "$harness" --bench --answer "$answer" "$work/pam.d" "$name" "$user" | awk '/^first_prompt_us/ { print $2 }'
    done | awk '$1 >= 0' | median)
    runs=$(for _ in $(seq 1 5); do "$harness" --bench --answer "$answer" "$work/pam.d" "$name" "$user"; done)
    rss=$(echo "$runs" | awk '/^rss_added_kb/ { print $2 }' | median)
    anon=$(echo "$runs" | awk '/^anon_added_kb/ { print $2 }' | median)
    file=$(echo "$runs" | awk '/^file_added_kb/ { print $2 }' | median)
    size=$(stat -c %s "$path")
    label="pam_$name.so"; [ "$name" = floor ] && label="empty Swift .so"
    printf '%-16s %9.1fK %8.2fms %12s %8.1fMB %7.1f / %.1fMB\n' "$label" "$(echo "$size / 1024" | bc -l)" \
        "$(echo "$dlopen / 1000" | bc -l)" \
        "$([ "$prompts" = n/a ] && echo n/a || printf '%.2fms' "$(echo "$prompts / 1000" | bc -l)")" \
        "$(echo "$rss / 1024" | bc -l)" "$(echo "$anon / 1024" | bc -l)" "$(echo "$file / 1024" | bc -l)"
done
echo "(medians of $rounds runs; dlopen in fresh child processes; pam_unix pays a 2 s failure delay per run;"
echo " file-backed pages are the module's and its libraries' code and data, shared between processes)"
