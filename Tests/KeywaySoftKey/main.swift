// keyway-softkey: a software FIDO2 security key for the tests that must run without hardware. It speaks CTAP2
// (getInfo, makeCredential, getAssertion, clientPIN; Ed25519 through libsodium, ES256 through libcrypto) to any
// program built on libfido2 (pam_u2f, fido2-tools, keywayd) through the LD_PRELOAD shim in Tests/SoftKeyShim. Not
// installed.
//
//   keyway-softkey DIR &
//   LD_PRELOAD=build/softkey-shim.so KEYWAY_SOFTKEY=DIR/key.sock fido2-token -L    (make harness builds the shim)
//
// DIR holds key.sock (the socket, mode 0666), state (the credentials: copy it to another DIR for a clone of the key),
// knobs (how it behaves: Knobs.swift), pin-retries (the PIN's tries left), touch (made by a test to touch the key
// when `presence = wait`) and log (a line per request). scripts/softkey-check.sh shows Debian's libfido2 tools using it.
import CKeywayLibc
import KeywayPlatform

/// Writes `line` to standard error and exits with status 2.
func fail(_ line: String) -> Never {
    Descriptor.printError("keyway-softkey: " + line)
    exit(2)
}

let arguments = CommandLine.arguments
guard arguments.count == 2, !arguments[1].hasPrefix("-") else { fail("usage: keyway-softkey DIR") }
BrokenPipe.ignoreSignal()
guard Sodium.start() else { fail("libsodium could not start") }
guard let directory = KeyDirectory.open(arguments[1]) else { fail("cannot open the directory \(arguments[1])") }
let listener: Int32
do {
    listener = try Listener.listen(in: directory)
} catch {
    fail(error.reason)
}
Descriptor.write("keyway-softkey: listening on \(directory.path(of: Listener.socketName))\n", to: 1)
Listener.serve(listener, key: SoftKey(directory: directory))
