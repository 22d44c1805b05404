#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests and the benchmark: nothing of the system's is used or changed.
#
#   scripts/pg-cluster.sh start DIR [PORT]   initdb in DIR (an empty directory), start it on a Unix socket in DIR
#                                            (and on 127.0.0.1:PORT when a port is given), create the database
#                                            `keyway` (no schema: keyway store migrate makes it) and the login
#                                            role keyway_host; prints the URI keywayd uses
#   scripts/pg-cluster.sh stop DIR           stop it at once (SIGQUIT: as a crash would) and remove DIR
#   scripts/pg-cluster.sh halt DIR           stop it (immediate) and keep DIR; `resume` starts it again
#   scripts/pg-cluster.sh resume DIR
#   scripts/pg-cluster.sh freeze DIR         SIGSTOP the server and its backends (a hung database, a partition);
#   scripts/pg-cluster.sh thaw DIR           `thaw` sends SIGCONT
#   scripts/pg-cluster.sh sql DIR SQL        run SQL as the owner (keyway_owner) in the database keyway
#   scripts/pg-cluster.sh role DIR NAME      create a login role NAME with a random password (no grants:
#                                            keyway store migrate --grant NAME), its password added to DIR/pgpass
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

command=${1:-}
dir=${2:-}
[ -n "$dir" ] || { echo "usage: scripts/pg-cluster.sh start|stop|halt|resume|sql|role DIR ..." >&2; exit 64; }
case $command in
    start)
        port=${3:-}
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
EOF
        as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
        # The watchdog: started in its own session, so it outlives a caller killed with its process group.
        watch=${WATCH_PID:-$PPID}
        setsid bash -c '
            while kill -0 "$1" 2>/dev/null && [ -d "$2/data" ]; do sleep 1; done
            if [ -d "$2/data" ]; then
                (cd / && setpriv --reuid=postgres --regid=postgres --init-groups -- \
                    "$3/pg_ctl" -D "$2/data" -m immediate stop) >/dev/null 2>&1 || true
                rm -rf "$2"
            fi' pg-cluster-watchdog "$watch" "$dir" "$bin" </dev/null >/dev/null 2>&1 &
        echo "${port:-5432}" >"$dir/port"
        PGPASSFILE="$dir/pgpass" "$bin/psql" -X -q -h "$dir" -p "${port:-5432}" -U keyway_owner -d postgres \
            -c "CREATE DATABASE keyway" >/dev/null
        "$0" role "$dir" keyway_host >/dev/null
        echo "postgresql://keyway_host@/keyway?host=$dir&port=${port:-5432}"
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
        as_postgres "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
        rm -rf "$dir"
        ;;
    *) echo "pg-cluster: unknown command '$command'" >&2; exit 64 ;;
esac
