#!/usr/bin/env bash
# Prints the SQLite store's added latency per authentication (open the store, read the enrollment, reserve the
# attempt, settle it) with 1, 1,000 and 100,000 enrolled users. A benchmark, not a test: it prints figures.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-400}
swift build -c release --product keyway-probe >/dev/null
probe=.build/release/keyway-probe
work=$(mktemp -d /tmp/keyway-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 700 "$work"
echo "store latency per authentication (release build, $rounds rounds each, $(nproc) cores)"
for users in 1 1000 100000; do
    db="$work/$users.db"
    "$probe" enroll "$db" seed 739155 >/dev/null
    # Bulk-load the users in one transaction: the payload is a real Argon2id string copied from the seed row.
    sqlite3 "$db" "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < $users)
        INSERT INTO enrollments SELECT 'user-' || i, 'passcode', (SELECT payload FROM enrollments WHERE user = 'seed'),
        0, 'bench' FROM n;"
    printf '%7d users: ' "$users"
    "$probe" bench "$db" "$users" "$rounds"
done
