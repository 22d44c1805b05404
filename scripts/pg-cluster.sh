#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests and the benchmark: nothing of the system's is used or changed.
#
#   scripts/pg-cluster.sh start DIR [PORT [tls]]
#                                            initdb in DIR (an empty directory), start it on a Unix socket in DIR
#                                            (and on 127.0.0.1:PORT when a port is given; with `tls`, TCP takes TLS
#                                            only, with a certificate for localhost from DIR/ca.crt), create the
#                                            database `keyway` (no schema: keyway store migrate makes it) and the
#                                            login role keyway_host; prints the URI keywayd uses (with `tls`, the
#                                            TCP one, with sslrootcert)
#   scripts/pg-cluster.sh stop DIR           stop it at once (SIGQUIT: as a crash would) and remove DIR
#   scripts/pg-cluster.sh halt DIR           stop it (immediate) and keep DIR; `resume` starts it again
#   scripts/pg-cluster.sh resume DIR
#   scripts/pg-cluster.sh freeze DIR         SIGSTOP the server and its backends (a hung database, a partition);
#   scripts/pg-cluster.sh thaw DIR           `thaw` sends SIGCONT
#   scripts/pg-cluster.sh sql DIR SQL        run SQL as the owner (keyway_owner) in the database keyway
#   scripts/pg-cluster.sh role DIR NAME      create a login role NAME with a random password (no grants:
#                                            keyway store migrate --grant NAME), its password added to DIR/pgpass
#   scripts/pg-cluster.sh standby DIR PRIMARY sync|async
#                                            a standby of the cluster in PRIMARY (pg_basebackup -R) in DIR, on a
#                                            socket of its own there; `sync` makes the primary wait for it at
#                                            every commit (synchronous_standby_names); prints its URI
#   scripts/pg-cluster.sh promote DIR        promote a standby to a primary (a new timeline)
#   scripts/pg-cluster.sh pooler DIR PORT SIZE
#                                            PgBouncer in transaction mode in front of it, on a socket in DIR
#                                            numbered PORT (no TCP), at most SIZE server connections; prints its URI
#
# The server runs as the system's `postgres` user (PostgreSQL refuses root; setpriv, no PAM session) with its data, socket and log in DIR.
# A watchdog stops it and removes DIR when the process that started it (WATCH_PID, default the caller) is gone, so
# a test killed with SIGKILL leaves no server behind. Roles: keyway_owner (a superuser) owns the schema; it,
# keyway_host and the roles made by `role` log in with scram-sha-256 passwords kept in DIR/pgpass (root's, 0600),
# the way keywayd is meant to (keywayd(8), FLEETS). Nothing is trusted: DIR is postgres's, mode 0700, so no other
# local user reaches the socket, and a connection that does (root, postgres) still needs a password.
set -euo pipefail
# Descriptors the caller leaked (a test process's pipes: Foundation makes them without close-on-exec) must not
# reach the server or the watchdog, which outlive the call and would hold another program's pipe open. 255 is the
# script itself.
for fd in /proc/$$/fd/*; do
    fd=${fd##*/}
    if [ "$fd" -gt 2 ] && [ "$fd" != 255 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
done
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/initdb" ] || { echo "pg-cluster: PostgreSQL is not installed (apt-get install postgresql-15)" >&2; exit 1; }
# setpriv, not runuser: runuser opens a PAM session, which logs to /dev/log, and a test that holds /dev/log to
# capture syslog would then stall the server's start. From /, which postgres may enter.
as_postgres() { (cd / && setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"); }
psql_owner() {
    PGPASSFILE="$1/pgpass" "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$1" -p "$(cat "$1/port")" -U keyway_owner -d keyway "${@:2}"
}

# The watchdog: started in its own session, so it outlives a caller killed with its process group; it stops the
# server in $1 and removes the directory once the watched process is gone.
watchdog() {
    setsid bash -c '
        while kill -0 "$1" 2>/dev/null && [ -d "$2/data" ]; do sleep 1; done
        if [ -d "$2/data" ]; then
            [ -f "$2/pgbouncer.pid" ] && kill -9 "$(cat "$2/pgbouncer.pid")" 2>/dev/null
            (cd / && setpriv --reuid=postgres --regid=postgres --init-groups -- \
                "$3/pg_ctl" -D "$2/data" -m immediate stop) >/dev/null 2>&1 || true
            rm -rf "$2"
        fi' pg-cluster-watchdog "${WATCH_PID:-$PPID}" "$1" "$bin" </dev/null >/dev/null 2>&1 &
}

command=${1:-}
dir=${2:-}
[ -n "$dir" ] || { echo "usage: scripts/pg-cluster.sh start|standby|promote|stop|halt|resume|freeze|thaw|sql|role DIR ..." >&2; exit 64; }
case $command in
    start)
        port=${3:-}
        tls=${4:-}
        [ -d "$dir" ] && [ -z "$(ls -A "$dir")" ] || { echo "pg-cluster: $dir must be an empty directory" >&2; exit 1; }
        chown postgres: "$dir"
        chmod 0700 "$dir"
        owner_password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
        install -m 600 /dev/null "$dir/pgpass"
        echo "*:*:*:keyway_owner:$owner_password" >"$dir/pgpass"
        # initdb (as postgres) reads the owner's password from a file of its own, gone once it has.
        install -m 600 -o postgres -g postgres /dev/null "$dir/owner-password"
        echo "$owner_password" >"$dir/owner-password"
        as_postgres "$bin/initdb" -D "$dir/data" -U keyway_owner --pwfile="$dir/owner-password" \
            --auth-local=scram-sha-256 --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 -N >"$dir/initdb.log"
        rm -f "$dir/owner-password"
        listen="''"
        [ -n "$port" ] && listen="'127.0.0.1'"
        cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = $listen
port = ${port:-5432}
unix_socket_directories = '$dir'
max_connections = 120
shared_buffers = 32MB
EOF
        cat >"$dir/data/pg_hba.conf" <<EOF
local all all scram-sha-256
host all all 127.0.0.1/32 scram-sha-256
local replication keyway_owner scram-sha-256
EOF
        if [ "$tls" = tls ]; then
            # As the guide sets a server up: a certificate authority of its own (here the run's), the server's
            # certificate for localhost signed by it, ssl = on, and TCP connections with TLS only (hostssl).
            openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout "$dir/ca.key" \
                -out "$dir/ca.crt" -days 2 -subj "/CN=Keyway test CA" 2>/dev/null
            openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout "$dir/data/server.key" \
                -out "$dir/server.csr" -subj "/CN=localhost" 2>/dev/null
            printf 'subjectAltName = DNS:localhost, IP:127.0.0.1\n' >"$dir/server.ext"
            openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
                -extfile "$dir/server.ext" -out "$dir/data/server.crt" 2>/dev/null
            chown postgres: "$dir/data/server.key" "$dir/data/server.crt"
            chmod 600 "$dir/data/server.key"
            printf "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n" >>"$dir/data/postgresql.conf"
            sed -i 's/^host all all/hostssl all all/' "$dir/data/pg_hba.conf"
        fi
        as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
        watchdog "$dir"
        echo "${port:-5432}" >"$dir/port"
        PGPASSFILE="$dir/pgpass" "$bin/psql" -X -q -h "$dir" -p "${port:-5432}" -U keyway_owner -d postgres \
            -c "CREATE DATABASE keyway" >/dev/null
        "$0" role "$dir" keyway_host >/dev/null
        if [ "$tls" = tls ]; then
            echo "postgresql://keyway_host@localhost:$port/keyway?sslrootcert=$dir/ca.crt"
        else
            echo "postgresql://keyway_host@/keyway?host=$dir&port=${port:-5432}"
        fi
        ;;
    standby)
        primary=${3:?standby DIR PRIMARY sync|async}
        mode=${4:?standby DIR PRIMARY sync|async}
        [ -d "$dir" ] && [ -z "$(ls -A "$dir")" ] || { echo "pg-cluster: $dir must be an empty directory" >&2; exit 1; }
        chown postgres: "$dir"
        chmod 0700 "$dir"
        install -m 600 "$primary/pgpass" "$dir/pgpass"
        cp "$primary/port" "$dir/port"
        port=$(cat "$dir/port")
        owner_password=$(sed -n 's/^[*]:[*]:[*]:keyway_owner://p' "$primary/pgpass")
        # pg_basebackup (as postgres) reads the owner's password from a file of its own, gone once it has.
        install -m 600 -o postgres -g postgres /dev/null "$dir/owner-pgpass"
        echo "*:*:*:keyway_owner:$owner_password" >"$dir/owner-pgpass"
        as_postgres env PGPASSFILE="$dir/owner-pgpass" "$bin/pg_basebackup" -h "$primary" -p "$port" \
            -U keyway_owner -D "$dir/data" -X stream -R -c fast >"$dir/basebackup.log" 2>&1
        rm -f "$dir/owner-pgpass"
        printf "listen_addresses = ''\nunix_socket_directories = '%s'\n" "$dir" >>"$dir/data/postgresql.conf"
        # Replication as the owner, its password in the standby's own data directory (postgres's, 0700).
        printf "primary_conninfo = 'host=%s port=%s user=keyway_owner password=%s application_name=standby'\n" \
            "$primary" "$port" "$owner_password" >>"$dir/data/postgresql.auto.conf"
        as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
        watchdog "$dir"
        want=async
        if [ "$mode" = sync ]; then
            want=sync
            psql_owner "$primary" -c "ALTER SYSTEM SET synchronous_standby_names = 'standby'" \
                -c "SELECT pg_reload_conf()" >/dev/null
        fi
        state=
        for _ in $(seq 150); do
            state=$(psql_owner "$primary" -At -c \
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'")
            [ "$state" = "$want" ] && break
            sleep 0.1
        done
        [ "$state" = "$want" ] || { echo "pg-cluster: the standby streams as '$state', not $want" >&2; exit 1; }
        echo "postgresql://keyway_host@/keyway?host=$dir&port=$port"
        ;;
    pooler)
        port=${3:?pooler DIR PORT SIZE}
        size=${4:?pooler DIR PORT SIZE}
        # PgBouncer checks SCRAM itself from the roles' stored secrets, and logs in to the server with them.
        psql_owner "$dir" -At -c "SELECT format('\"%s\" \"%s\"', rolname, rolpassword) FROM pg_authid
            WHERE rolpassword IS NOT NULL" \
            >"$dir/userlist.txt"
        cat >"$dir/pgbouncer.ini" <<EOF
[databases]
keyway = host=$dir port=$(cat "$dir/port") dbname=keyway
[pgbouncer]
listen_addr =
listen_port = $port
unix_socket_dir = $dir
auth_type = scram-sha-256
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = $size
max_client_conn = 2000
server_reset_query =
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
        chown postgres: "$dir/userlist.txt" "$dir/pgbouncer.ini"
        chmod 600 "$dir/userlist.txt" "$dir/pgbouncer.ini"
        as_postgres /usr/sbin/pgbouncer -d "$dir/pgbouncer.ini" >"$dir/pgbouncer.out" 2>&1
        # Its Unix socket only (no TCP port, which another program's connection may hold), and answering: a socket
        # file left by a PgBouncer that then failed is not enough.
        for _ in $(seq 100); do
            [ -S "$dir/.s.PGSQL.$port" ] && PGPASSFILE="$dir/pgpass" psql -X -At -h "$dir" -p "$port" -U keyway_host \
                -d keyway -c 'SELECT 1' >/dev/null 2>&1 && break
            sleep 0.05
        done
        PGPASSFILE="$dir/pgpass" psql -X -At -h "$dir" -p "$port" -U keyway_host -d keyway -c 'SELECT 1' >/dev/null 2>&1 ||
            { echo "pg-cluster: pgbouncer did not start" >&2; cat "$dir/pgbouncer.log" >&2; exit 1; }
        echo "postgresql://keyway_host@/keyway?host=$dir&port=$port"
        ;;
    promote)
        as_postgres "$bin/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
        ;;
    role)
        name=${3:?role NAME}
        password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
        psql_owner "$dir" -c "CREATE ROLE $name LOGIN PASSWORD '$password'" >/dev/null
        echo "*:*:*:$name:$password" >>"$dir/pgpass"
        echo "$name"
        ;;
    sql)
        psql_owner "$dir" -At -c "$3"
        ;;
    halt)
        as_postgres "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
        ;;
    resume)
        as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
        ;;
    freeze | thaw)
        signal=STOP; [ "$command" = thaw ] && signal=CONT
        postmaster=$(head -n 1 "$dir/data/postmaster.pid")
        kill -"$signal" "$postmaster" $(pgrep -P "$postmaster")
        ;;
    stop)
        [ -d "$dir/data" ] || exit 0
        if [ -f "$dir/pgbouncer.pid" ]; then kill -9 "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true; fi
        as_postgres "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
        rm -rf "$dir"
        ;;
    *) echo "pg-cluster: unknown command '$command'" >&2; exit 64 ;;
esac
