#!/usr/bin/env bash
# A throwaway fprintd on a private D-Bus bus for the tests: a virtual fingerprint reader, a mock polkit that allows
# everything fprintd asks, and print storage in DIR. Nothing of the system's bus, readers or prints is used or changed.
#
#   scripts/fprintd-bus.sh start DIR           start a bus (DIR/bus.sock, its own DIR/bus.conf), the polkit mock and
#                                              fprintd with libfprint's virtual reader (DIR/reader.sock) and its
#                                              prints in DIR/prints; prints the bus address (unix:path=DIR/bus.sock)
#                                              as the last line. DIR is an empty directory.
#   scripts/fprintd-bus.sh start DIR system    the same, and the bus listens at /run/dbus/system_bus_socket too, for
#                                              a setuid program's module (pam_fprintd in sudo reads no environment);
#                                              only inside scripts/test-isolated.sh, whose /run is a private copy
#   scripts/fprintd-bus.sh stop DIR            stop all three and remove DIR
#   scripts/fprintd-bus.sh kill-fprintd DIR    SIGKILL fprintd only (a crash mid-verify), bus and mock stay up
#   scripts/fprintd-bus.sh restart-fprintd DIR start fprintd again (SIGKILL first if it still runs), same prints
#   scripts/fprintd-bus.sh scan DIR ID         put finger ID on the reader: enrolls print ID, or matches it when ID
#                                              is the enrolled one (any other ID is a non-match)
#   scripts/fprintd-bus.sh cmd DIR TEXT        send the reader any command of libfprint's virtual device: ERROR N,
#                                              RETRY N, SLEEP MS, FINGER 0|1, UNPLUG, SET_ENROLL_STAGES N,
#                                              SET_CANCELLATION_ENABLED 0|1 ...; prints its answer (if any)
#   scripts/fprintd-bus.sh logind DIR          start python3-dbusmock's logind on the bus (DIR/logind.pid), for
#                                              keywayd's sleep; `stop` stops it too
#   scripts/fprintd-bus.sh sleep DIR true|false  the mock logind emits PrepareForSleep(true) (going to sleep) or
#                                              (false) (resumed)
#   scripts/fprintd-bus.sh inhibitors DIR      the mock logind's inhibitors, one "WHO MODE" line each
#   scripts/fprintd-bus.sh run DIR CMD...      run CMD with DBUS_SYSTEM_BUS_ADDRESS set to the private bus
#                                              (fprintd-enroll, fprintd-verify, fprintd-list, a test's client)
#
# The reader: each command is one connection to DIR/reader.sock, the bare text (no newline: it would become part
# of the ID), answered by the reader closing the connection once it has queued the command. The reader only reads
# commands while fprintd has the device open; `start` claims it once and sends SET_KEEP_ALIVE 1 so that the socket
# stays for fprintd's life. A SCAN counts only while the device is claimed (before or after VerifyStart or
# EnrollStart); one sent while nobody claims the device is thrown away when the next Claim opens it, and an ERROR
# sent then makes that Claim fail (net.reactivated.Fprint.Error.Internal). Five SCANs of the same ID enroll a
# finger (the device has 5 stages; SET_ENROLL_STAGES changes that). After UNPLUG fprintd has no reader until
# restart-fprintd.
#
# Run it as root (fprintd keeps its prints as root, the tests enroll for other users); DIR is made 0755 so that a
# client of another uid can reach the bus. fprintd's debug log is DIR/fprintd.log, the bus's
# DIR/dbus.log, the mock's DIR/polkit.log; their pids are DIR/fprintd.pid, DIR/dbus.pid, DIR/polkit.pid.
# A watchdog stops them and removes DIR when the process that started them (WATCH_PID, default the caller) is gone,
# so a test killed with SIGKILL leaves nothing behind.
set -euo pipefail
# Descriptors the caller leaked (a test process's pipes: Foundation makes them without close-on-exec) must not
# reach the daemons or the watchdog, which outlive the call and would hold another program's pipe open. 255 is the
# script itself.
for fd in /proc/$$/fd/*; do
    fd=${fd##*/}
    if [ "$fd" -gt 2 ] && [ "$fd" != 255 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
done
python=/usr/bin/python3 # the system's: python3-dbusmock and python3-dbus are installed for it, not for a pyenv one
fprintd=/usr/libexec/fprintd
script=$(readlink -f "$0")

# alive PIDFILE: the process named in PIDFILE exists and is no zombie.
alive() {
    local pid state
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] || return 1
    state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "${state%% *}" != Z ]
}
# halt PIDFILE SIGNAL: send SIGNAL, wait up to 3 s for the process to go, then SIGKILL it.
halt() {
    alive "$1" || return 0
    kill -"$2" "$(cat "$1")" 2>/dev/null || true
    for _ in $(seq 30); do alive "$1" || return 0; sleep 0.1; done
    kill -KILL "$(cat "$1")" 2>/dev/null || true
    for _ in $(seq 20); do alive "$1" || return 0; sleep 0.1; done
}
has_owner() {
    dbus-send --bus="$address" --print-reply=literal --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner "string:$1" 2>/dev/null | grep -q true
}
# fail MESSAGE LOG: stop what this call started (DIR stays, for its logs: `stop` or the watchdog removes it).
fail() {
    echo "fprintd-bus: $1 (see $2)" >&2
    halt "$dir/fprintd.pid" TERM
    if [ "$command" = start ]; then
        halt "$dir/polkit.pid" TERM
        halt "$dir/dbus.pid" TERM
    fi
    exit 1
}
# reader TEXT: one command to the virtual reader; prints what it answers (LIST does), waits for it to close.
reader() {
    "$python" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as e:
    sys.exit("fprintd-bus: the reader %s does not answer: %s" % (sys.argv[1], e))
s.sendall(sys.argv[2].encode())
while True:
    data = s.recv(4096)
    if not data:
        break
    sys.stdout.buffer.write(data)
' "$dir/reader.sock" "$1"
}
# start_fprintd: fprintd on the bus, its reader socket kept open (Claim, SET_KEEP_ALIVE 1, Release).
start_fprintd() {
    rm -f "$dir/reader.sock"
    env FP_DRIVERS_WHITELIST=virtual_device FP_VIRTUAL_DEVICE="$dir/reader.sock" STATE_DIRECTORY="$dir/prints" \
        DBUS_SYSTEM_BUS_ADDRESS="$address" G_MESSAGES_DEBUG=all \
        "$fprintd" -t </dev/null >>"$dir/fprintd.log" 2>&1 &
    echo $! >"$dir/fprintd.pid"
    for _ in $(seq 100); do
        has_owner net.reactivated.Fprint && break
        alive "$dir/fprintd.pid" || fail "fprintd exited" "$dir/fprintd.log"
        sleep 0.1
    done
    has_owner net.reactivated.Fprint || fail "fprintd is not on the bus after 10 s" "$dir/fprintd.log"
    "$python" -c '
import dbus, os, socket, sys, time
address, sock, out = sys.argv[1:4]
bus = dbus.bus.BusConnection(address)
manager = dbus.Interface(bus.get_object("net.reactivated.Fprint", "/net/reactivated/Fprint/Manager"),
                         "net.reactivated.Fprint.Manager")
deadline = time.monotonic() + 10
while True:
    try:
        path = manager.GetDefaultDevice()
        break
    except dbus.DBusException as e:
        if time.monotonic() > deadline:
            sys.exit("fprintd has no reader: %s" % e)
        time.sleep(0.1)
device = dbus.Interface(bus.get_object("net.reactivated.Fprint", path), "net.reactivated.Fprint.Device")
device.Claim("")
try:
    while not os.path.exists(sock):
        if time.monotonic() > deadline:
            sys.exit("no reader socket %s" % sock)
        time.sleep(0.05)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock)
    s.sendall(b"SET_KEEP_ALIVE 1")
    while s.recv(4096):
        pass
finally:
    device.Release()
with open(out, "w") as f:
    print(path, file=f)
' "$address" "$dir/reader.sock" "$dir/device" >>"$dir/keepalive.log" 2>&1 ||
        fail "fprintd's virtual reader did not come up" "$dir/keepalive.log and $dir/fprintd.log"
}

command=${1:-}
dir=${2:-}
[ -n "$dir" ] || {
    echo "usage: scripts/fprintd-bus.sh start|stop|kill-fprintd|restart-fprintd|scan|cmd|logind|sleep|inhibitors|run DIR ..." >&2
    exit 64
}
dir=$(readlink -m "$dir")
address=unix:path=$dir/bus.sock
case $command in
    start)
        [ -d "$dir" ] && [ -z "$(ls -A "$dir")" ] || { echo "fprintd-bus: $dir must be an empty directory" >&2; exit 1; }
        [ -x "$fprintd" ] || { echo "fprintd-bus: fprintd is not installed (apt-get install fprintd)" >&2; exit 1; }
        "$python" -c 'import dbusmock, dbus' 2>/dev/null ||
            { echo "fprintd-bus: $python has no dbusmock (apt-get install python3-dbusmock)" >&2; exit 1; }
        chmod 0755 "$dir"
        install -d -m 0700 "$dir/prints"
        system_listen=""
        if [ "${3:-}" = system ]; then
            [ -n "${KEYWAY_TEST_ROOT:-}" ] || { echo "fprintd-bus: 'system' only inside scripts/test-isolated.sh" >&2; exit 1; }
            [ ! -e /run/dbus/system_bus_socket ] || { echo "fprintd-bus: /run/dbus/system_bus_socket exists" >&2; exit 1; }
            install -d -m 0755 /run/dbus
            system_listen="<listen>unix:path=/run/dbus/system_bus_socket</listen>"
            echo /run/dbus/system_bus_socket >"$dir/system-socket"
        fi
        # A system bus of its own: fprintd and the mock must be allowed to own their names (no policy allows
        # nothing: not even owning a name, nor receiving a reply) and any uid may connect and call anything.
        cat >"$dir/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$dir/bus.sock</listen>
  $system_listen
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
EOF
        # The watchdog: started in its own session, so it outlives a caller killed with its process group; from
        # the start, so that a failed start is cleaned up too.
        watch=${WATCH_PID:-$PPID}
        setsid bash -c '
            while kill -0 "$1" 2>/dev/null && [ -f "$2/bus.conf" ]; do sleep 1; done
            [ -f "$2/bus.conf" ] && "$3" stop "$2"' fprintd-bus-watchdog "$watch" "$dir" "$script" \
            </dev/null >/dev/null 2>&1 &
        dbus-daemon --config-file="$dir/bus.conf" --nofork --print-address=1 \
            </dev/null >"$dir/bus.address" 2>"$dir/dbus.log" &
        echo $! >"$dir/dbus.pid"
        for _ in $(seq 100); do
            [ -s "$dir/bus.address" ] && break
            alive "$dir/dbus.pid" || fail "dbus-daemon exited" "$dir/dbus.log"
            sleep 0.1
        done
        [ -s "$dir/bus.address" ] || fail "dbus-daemon did not start in 10 s" "$dir/dbus.log"
        DBUS_SYSTEM_BUS_ADDRESS=$address "$python" -m dbusmock --system --template polkitd \
            </dev/null >"$dir/polkit.log" 2>&1 &
        echo $! >"$dir/polkit.pid"
        # The mock owns its name before its template is loaded: retry until SetAllowed is there.
        allowed=false
        for _ in $(seq 100); do
            if dbus-send --bus="$address" --print-reply --dest=org.freedesktop.PolicyKit1 \
                /org/freedesktop/PolicyKit1/Authority org.freedesktop.DBus.Mock.SetAllowed \
                array:string:net.reactivated.fprint.device.setusername,net.reactivated.fprint.device.enroll,net.reactivated.fprint.device.verify \
                >/dev/null 2>&1; then
                allowed=true
                break
            fi
            alive "$dir/polkit.pid" || fail "the polkit mock exited" "$dir/polkit.log"
            sleep 0.1
        done
        $allowed || fail "the polkit mock did not answer in 10 s" "$dir/polkit.log"
        start_fprintd
        echo "$address"
        ;;
    logind)
        DBUS_SYSTEM_BUS_ADDRESS=$address "$python" -m dbusmock --system --template logind \
            </dev/null >"$dir/logind.log" 2>&1 &
        echo $! >"$dir/logind.pid"
        for _ in $(seq 100); do
            dbus-send --bus="$address" --print-reply --dest=org.freedesktop.login1 /org/freedesktop/login1 \
                org.freedesktop.login1.Manager.ListInhibitors >/dev/null 2>&1 && exit 0
            alive "$dir/logind.pid" || { echo "fprintd-bus: the logind mock exited (see $dir/logind.log)" >&2; exit 1; }
            sleep 0.1
        done
        echo "fprintd-bus: the logind mock did not answer in 10 s (see $dir/logind.log)" >&2
        exit 1
        ;;
    sleep)
        going=${3:?sleep DIR true|false}
        "$python" -c '
import dbus, sys
bus = dbus.bus.BusConnection(sys.argv[1])
mock = bus.get_object("org.freedesktop.login1", "/org/freedesktop/login1")
mock.EmitSignal("org.freedesktop.login1.Manager", "PrepareForSleep", "b", [dbus.Boolean(sys.argv[2] == "true")],
                dbus_interface="org.freedesktop.DBus.Mock")
' "$address" "$going"
        ;;
    inhibitors)
        "$python" -c '
import dbus, sys
bus = dbus.bus.BusConnection(sys.argv[1])
manager = dbus.Interface(bus.get_object("org.freedesktop.login1", "/org/freedesktop/login1"),
                         "org.freedesktop.login1.Manager")
for what, who, why, mode, uid, pid in manager.ListInhibitors():
    print(who, mode)
' "$address"
        ;;
    stop)
        [ -f "$dir/bus.conf" ] || exit 0
        halt "$dir/logind.pid" TERM
        halt "$dir/fprintd.pid" TERM
        halt "$dir/polkit.pid" TERM
        halt "$dir/dbus.pid" TERM
        [ ! -f "$dir/system-socket" ] || rm -f "$(cat "$dir/system-socket")"
        rm -rf "$dir"
        ;;
    kill-fprintd)
        halt "$dir/fprintd.pid" KILL
        ;;
    restart-fprintd)
        halt "$dir/fprintd.pid" KILL
        start_fprintd
        ;;
    scan)
        id=${3:?scan DIR ID}
        reader "SCAN $id"
        ;;
    cmd)
        text=${3:?cmd DIR TEXT}
        reader "$text"
        ;;
    run)
        shift 2
        [ $# -gt 0 ] || { echo "fprintd-bus: run DIR CMD..." >&2; exit 64; }
        exec env DBUS_SYSTEM_BUS_ADDRESS="$address" "$@"
        ;;
    *) echo "fprintd-bus: unknown command '$command'" >&2; exit 64 ;;
esac
