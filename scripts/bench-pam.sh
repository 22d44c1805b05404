#!/usr/bin/env bash
# Prints, side by side in one run, for pam_keyway.so, pam_unix.so and pam_permit.so: the time to dlopen the module,
# the time from pam_start to the first prompt, and the RSS one authentication adds to a C host (all medians).
# A benchmark, not a test. Needs `make module cli harness`; changes no system file.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-25}
security=/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)/security
harness=build/pam-harness
work=$(mktemp -d /tmp/keyway-bench-pam.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"
mkdir "$work/pam.d"
echo 2-4-9-3 | build/keyway --store "$work/keyway.db" enroll gesture --user bench --stdin >/dev/null 2>&1
echo "auth required $PWD/build/pam_keyway.so policy=pattern store=$work/keyway.db" > "$work/pam.d/keyway"
echo "auth required $security/pam_unix.so" > "$work/pam.d/unix"
echo "auth required $security/pam_permit.so" > "$work/pam.d/permit"

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else print v[int((NR + 1) / 2)] }'; }

printf '%-16s %10s %10s %14s %10s\n' module "size" "dlopen" "first prompt" "RSS added"
for name in keyway unix permit; do
    case $name in
        keyway) path=$PWD/build/pam_keyway.so; answer=2-4-9-3; user=bench ;;
        unix) path=$security/pam_unix.so; answer=not-the-password; user=root ;;
        permit) path=$security/pam_permit.so; answer=x; user=root ;;
    esac
    dlopen=$("$harness" --dlopen "$path" "$rounds" | awk '{ print $2 }')
    prompts=$(for _ in $(seq 1 "$rounds"); do
        "$harness" --bench --answer "$answer" "$work/pam.d" "$name" "$user" | awk '/^first_prompt_us/ { print $2 }'
    done | awk '$1 >= 0' | median)
    rss=$(for _ in $(seq 1 5); do
        "$harness" --bench --answer "$answer" "$work/pam.d" "$name" "$user" | awk '/^rss_added_kb/ { print $2 }'
    done | median)
    size=$(stat -c %s "$path")
    printf '%-16s %9.1fK %8.2fms %12s %8.1fMB\n' "pam_$name.so" "$(echo "$size / 1024" | bc -l)" \
        "$(echo "$dlopen / 1000" | bc -l)" \
        "$([ "$prompts" = n/a ] && echo n/a || printf '%.2fms' "$(echo "$prompts / 1000" | bc -l)")" \
        "$(echo "$rss / 1024" | bc -l)"
done
echo "(medians of $rounds runs; dlopen in fresh child processes; pam_unix pays a 2 s failure delay per run)"
