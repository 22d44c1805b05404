import Foundation
import KeywayCore
import KeywayFIDO2
import Testing

@testable import KeywayProcessFixture

/// The tests' software security key (`keyway-softkey`, CTAP2 over a Unix socket) and the shim that lets any
/// libfido2 program reach it (`libkeyway-softkey-shim.so`, preloaded), both built beside the test bundle.
final class SoftKey: @unchecked Sendable {
    static let directoryOfBuild: URL = {
        var directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("keyway-softkey").path),
            directory.path != "/"
        {
            directory = directory.deletingLastPathComponent()
        }
        return directory
    }()
    static let program = directoryOfBuild.appendingPathComponent("keyway-softkey").path
    /// Built by `make harness` with gcc, so that every build of the suite (debug, AddressSanitizer) finds it.
    static let shim = packageRoot + "/build/softkey-shim.so"

    /// Where its socket, state, knobs, touch file and log are.
    let directory: String
    private let process = Process()

    /// Starts a key in `directory` (made if missing) and waits for its socket.
    init(_ directory: String) throws {
        self.directory = directory
        mkdir(directory, 0o755)
        process.executableURL = URL(fileURLWithPath: Self.program)
        process.arguments = [directory]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        for _ in 0..<100 where access(socket, F_OK) != 0 { usleep(50_000) }
        #expect(access(socket, F_OK) == 0, "the software key did not start")
    }

    deinit { stop() }

    var socket: String { directory + "/key.sock" }

    /// What a libfido2 program needs in its environment to see this key. Under AddressSanitizer (scripts/harden.sh)
    /// the preloaded shim comes before ASan's runtime, which ASan accepts once told to.
    var environment: [String: String] {
        let asan = ProcessInfo.processInfo.environment["ASAN_OPTIONS"].map { $0 + ":" } ?? ""
        return [
            "LD_PRELOAD": Self.shim, "KEYWAY_SOFTKEY": socket, "ASAN_OPTIONS": asan + "verify_asan_link_order=0",
        ]
    }

    /// Sets the key's knobs (presence, counter, uv, unplugged).
    func knobs(_ text: String) {
        _ = FileManager.default.createFile(atPath: directory + "/knobs", contents: Data(text.utf8))
    }

    /// Touches the key (with `presence = wait`).
    func touch() { _ = FileManager.default.createFile(atPath: directory + "/touch", contents: Data()) }

    /// What the key did, a line per request.
    var log: [String] {
        ((try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? "").split(separator: "\n").map(
            String.init)
    }

    /// Stops the key (SIGKILL: it may be waiting for a touch), and waits for it.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// Security keys through the real libfido2 in keywayd, the real module, real sudo in tmux (docs/ARCHITECTURE.md §19),
/// against the software key. Inside `scripts/test-isolated.sh` only.
@Suite("fido2: a security key", .serialized)
struct FIDO2Tests {
    let fixture = PAMFixture()
    let user = "kwkey\(getpid() % 100_000)"
    var keyDirectory: String { fixture.directory + "/key" }

    /// A user with a passcode and a pattern, keywayd started beside the software key, and `config` written.
    func install(_ config: String) throws -> SoftKey {
        try requireIsolation()
        #expect(try TestAccounts.add(user))
        try fixture.enrollPasscode(user, "739155")
        try fixture.enrollPattern(user, "2-4-9-3")
        _ = fixture.writeConfig(config)
        let key = try SoftKey(keyDirectory)
        fixture.startDaemon(["--config", fixture.configPath], environment: key.environment)
        return key
    }

    func uninstall() {
        unlink("/etc/sudoers.d/keyway-key-\(user)")
        unlink("/etc/pam.d/keyway-key-\(user)")
        TestAccounts.remove(user)
        fixture.remove()
    }

    /// `keyway enroll fido2` as root: the key touched at once (presence = auto).
    func enroll(_ name: String = "yubi") throws -> Run {
        try run(cliPath, ["--socket", fixture.socket, "enroll", "fido2", "--user", user, "--name", name])
    }

    /// sudo for `user` with `policy` in front of pam_unix.
    func installSudo(policy: String) throws {
        let rules =
            "Defaults:\(user) pam_service=keyway-key-\(user), !lecture, passwd_tries=1\n\(user) ALL=(ALL) ALL\n"
        try fixture.installSudoers(rules, at: "/etc/sudoers.d/keyway-key-\(user)")
        let line = "\(modulePath) policy=\(policy) config=\(fixture.configPath) \(fixture.moduleArguments)"
        let stack = """
            auth     [success=done default=ignore] \(line)
            auth     required pam_unix.so
            account  required \(line)
            session  required pam_permit.so

            """
        _ = FileManager.default.createFile(atPath: "/etc/pam.d/keyway-key-\(user)", contents: Data(stack.utf8))
    }

    func sudo() throws -> Terminal {
        try Terminal("setpriv --reuid \(user) --regid \(user) --init-groups sudo -k id -u")
    }

    @Test("enroll a key, then real sudo: a touch → root; nobody touches → the passcode → root")
    func sudoTouchAndFallback() throws {
        defer { uninstall() }
        let key = try install("[fido2]\ntimeout = 3s\n[policy key]\nrequire = fido2 or passcode\n")
        let enrolled = try enroll()
        #expect(enrolled.status == 0, "\(enrolled.text)")
        #expect(enrolled.text.contains("Registered security key 'yubi'"), "\(enrolled.text)")
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", user])
        #expect(status.text.contains("(keys: yubi)"), "\(status.text)")
        try installSudo(policy: "key")

        key.knobs("presence = wait\n")
        let touched = try sudo()
        defer { touched.close() }
        try touched.waitFor("Touch your security key.")
        key.touch()
        let root = try touched.waitFor("[exit ")
        #expect(root.contains("\n0\n[exit 0]"), "\(root)")

        key.knobs("presence = never\n")
        let untouched = try sudo()
        defer { untouched.close() }
        try untouched.waitFor("Touch your security key.")
        try untouched.waitFor("Passcode:", seconds: 20)
        try untouched.type("739155")
        let fallback = try untouched.waitFor("[exit ")
        #expect(fallback.contains("\n0\n[exit 0]"), "\(fallback)")
    }

    @Test("first of (fido2, gesture) at sudo's one prompt: a touch → root; the pattern typed → root")
    func firstOfBothWays() throws {
        defer { uninstall() }
        let key = try install("[policy either]\nrequire = first of (fido2, gesture)\n")
        #expect(try enroll().status == 0)
        try installSudo(policy: "either")
        let prompt = "Touch your security key and press Enter, or type your pattern"

        key.knobs("presence = wait\n")
        let touched = try sudo()
        defer { touched.close() }
        try touched.waitFor(prompt)
        key.touch()
        for _ in 0..<50 where !key.log.contains(where: { $0.hasPrefix("getAssertion ok") }) { usleep(100_000) }
        try touched.type("")
        let root = try touched.waitFor("[exit ")
        #expect(root.contains("\n0\n[exit 0]"), "\(root)")

        key.knobs("presence = never\n")
        let typed = try sudo()
        defer { typed.close() }
        try typed.waitFor(prompt)
        try typed.type("2-4-9-3")
        let pattern = try typed.waitFor("[exit ")
        #expect(pattern.contains("\n0\n[exit 0]"), "\(pattern)")
    }

    @Test("a cloned key (its counter repeats) is refused, logged as a possible clone, and marked in keyway status")
    func clonedKeyRefused() throws {
        defer { uninstall() }
        let key = try install("[policy key]\nrequire = fido2\n")
        #expect(try enroll().status == 0)
        fixture.service("keyway-key", "policy=key config=\(fixture.configPath)")
        let first = try harness(fixture, "keyway-key", user)
        #expect(first.result == "PAM_SUCCESS", "\(first.text)")
        key.knobs("counter = repeat\n")
        let clone = try harness(fixture, "keyway-key", user)
        #expect(clone.result != "PAM_SUCCESS", "\(clone.text)")
        #expect(fixture.daemonLog.contains("may have been cloned"), "\(fixture.daemonLog)")
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", user])
        #expect(status.text.contains("MAY BE CLONED"), "\(status.text)")
        key.knobs("counter = count\n")
        let onward = try harness(fixture, "keyway-key", user)
        #expect(onward.result == "PAM_SUCCESS", "the key itself counts on: \(onward.text)")
    }

    /// The assertion the key made last (its log): the client data hash, the authenticator data, the signature.
    func lastAssertion(_ key: SoftKey) throws -> (hash: [UInt8], authData: [UInt8], signature: [UInt8]) {
        let line = try #require(key.log.last { $0.hasPrefix("getAssertion ok") }, "\(key.log)")
        func field(_ name: String) throws -> [UInt8] {
            let word = try #require(line.split(separator: " ").first { $0.hasPrefix(name + "=") })
            let hex = Array(word.dropFirst(name.count + 1).utf8)
            return stride(from: 0, to: hex.count, by: 2).map {
                UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)!
            }
        }
        return (try field("cdh"), try field("authdata"), try field("sig"))
    }

    /// `fido2-assert -V -p` on an assertion, against the public key keywayd stored: true when Debian's tool accepts it.
    func fido2AssertAccepts(
        _ assertion: (hash: [UInt8], authData: [UInt8], signature: [UInt8]), credential: FIDO2Credential
    ) throws -> Bool {
        // The public key as a SubjectPublicKeyInfo: Ed25519's 32 bytes, or P-256's uncompressed point (04 x y).
        let es256 = credential.algorithm == FIDO2Credential.es256
        let prefix: [UInt8] =
            es256
            ? [
                0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86,
                0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00, 0x04,
            ] : [0x30, 0x2A, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x03, 0x21, 0x00]
        let der = prefix + credential.publicKey
        let pem = "-----BEGIN PUBLIC KEY-----\n\(Data(der).base64EncodedString())\n-----END PUBLIC KEY-----\n"
        let pemPath = fixture.directory + "/key.pem"
        let inputPath = fixture.directory + "/assertion.in"
        _ = FileManager.default.createFile(atPath: pemPath, contents: Data(pem.utf8))
        // The authenticator data as fido2-assert reads it: a CBOR byte string (0x58, its length, the bytes).
        let input =
            [
                Data(assertion.hash).base64EncodedString(), "pam://keyway",
                Data([0x58, UInt8(assertion.authData.count)] + assertion.authData).base64EncodedString(),
                Data(assertion.signature).base64EncodedString(),
            ].joined(separator: "\n") + "\n"
        _ = FileManager.default.createFile(atPath: inputPath, contents: Data(input.utf8))
        let algorithm = es256 ? "es256" : "eddsa"
        return try run("/usr/bin/fido2-assert", ["-V", "-p", "-i", inputPath, pemPath, algorithm]).status == 0
    }

    @Test("fido2-assert -V accepts the assertion keywayd accepted, and refuses the forged one keywayd refused")
    func crossCheckedWithFido2Assert() throws {
        defer { uninstall() }
        let key = try install("[policy key]\nrequire = fido2\n")
        #expect(try enroll().status == 0)
        fixture.service("keyway-key", "policy=key config=\(fixture.configPath)")
        let record = try #require(try fixture.vault().store.enrollment(user: user, factor: .fido2))
        let credential = try FIDO2Keys(decoding: record.payload).credentials[0]
        #expect(credential.algorithm == FIDO2Credential.es256, "keywayd asks for ES256 first")

        let accepted = try harness(fixture, "keyway-key", user)
        #expect(accepted.result == "PAM_SUCCESS", "\(accepted.text)")
        #expect(try fido2AssertAccepts(try lastAssertion(key), credential: credential))

        key.knobs("signature = bad\n")
        let forged = try harness(fixture, "keyway-key", user)
        #expect(forged.result != "PAM_SUCCESS", "\(forged.text)")
        #expect(try !fido2AssertAccepts(try lastAssertion(key), credential: credential))
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", user])
        // Each of the policy's 3 attempts met a forgery, and each was counted.
        let line = status.output.first { $0.contains("fido2:") } ?? ""
        #expect(line.contains("3 consecutive failures"), "the forgeries were counted: \(status.text)")
    }

    @Test(
        "the key's PIN asked by real sudo and never stored: right → root; wrong, never to the key's last 3 → passcode")
    func pinThroughSudo() throws {
        defer { uninstall() }
        let key = try install(
            "[fido2]\npin = ask\nuser-verification = required\ntimeout = 3s\n[policy key]\nrequire = fido2 or passcode\n"
        )
        key.knobs("pin = 4711\n")
        // Enrolling asks for the PIN too: a key with a PIN makes credentials only for a client that proves it.
        let enrolling = try Terminal(
            "\(cliPath) --socket \(fixture.socket) --config \(fixture.configPath) enroll fido2 --user \(user) --name yubi"
        )
        defer { enrolling.close() }
        try enrolling.waitFor("PIN of your security key:")
        try enrolling.type("4711")
        let enrolled = try enrolling.waitFor("[exit ")
        #expect(enrolled.contains("Registered security key 'yubi'") && enrolled.contains("[exit 0]"), "\(enrolled)")
        #expect(key.log.contains { $0.hasPrefix("makeCredential ok") && $0.hasSuffix(" uv") }, "\(key.log)")
        try installSudo(policy: "key")

        let right = try sudo()
        defer { right.close() }
        try right.waitFor("PIN of your security key:")
        try right.type("4711")
        let root = try right.waitFor("[exit ")
        #expect(root.contains("\n0\n[exit 0]"), "\(root)")
        #expect(key.log.contains { $0.hasPrefix("getAssertion ok") && $0.contains(" uv ") }, "\(key.log)")

        // Four tries left at the key: a wrong PIN is sent and refused (three left); the next is not sent, so
        // Keyway never blocks the key, and the policy falls back to the passcode, keywayd saying why.
        let retries = keyDirectory + "/pin-retries"
        _ = FileManager.default.createFile(atPath: retries, contents: Data("4\n".utf8))
        let wrong = try sudo()
        defer { wrong.close() }
        try wrong.waitFor("PIN of your security key:")
        try wrong.type("1111")
        try wrong.waitFor("PIN of your security key:", count: 2)
        try wrong.type("2222")
        try wrong.waitFor("Passcode:", seconds: 20)
        try wrong.type("739155")
        let fallback = try wrong.waitFor("[exit ")
        #expect(fallback.contains("\n0\n[exit 0]"), "\(fallback)")
        let left = try String(contentsOfFile: retries, encoding: .utf8)
        #expect(left == "3\n", "the key's tries: \(left); its log: \(key.log)")
        #expect(!key.log.contains("clientPIN pin-blocked"), "\(key.log)")
        #expect(fixture.daemonLog.contains("3 PIN tries left of its own"), "\(fixture.daemonLog)")
        // The wrong PIN was a counted guess; the PIN itself is in neither the store nor the log.
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", user])
        #expect(
            status.output.contains { $0.contains("fido2:") && $0.contains("1 consecutive failure") }, "\(status.text)")
        #expect(!fixture.daemonLog.contains("4711") && !fixture.daemonLog.contains("1111"))
        let store = try Data(contentsOf: URL(fileURLWithPath: fixture.store))
        #expect(store.range(of: Data("4711".utf8)) == nil && store.range(of: Data("2222".utf8)) == nil)
    }

    @Test("a cloned key against Debian's pam_u2f and against Keyway, through the same software key")
    func cloneSideBySideWithPamU2F() throws {
        defer {
            unlink("/etc/pam.d/keyway-u2f-\(user)")
            uninstall()
        }
        let key = try install("[policy key]\nrequire = fido2\n")
        // pam_u2f's own enrollment tool, through the same key: an ES256 credential (pam_u2f 1.1.0 has no EdDSA).
        let made = try run(
            "/usr/bin/pamu2fcfg", ["-u", user, "-o", "pam://keyway", "-i", "pam://keyway"],
            environment: key.environment)
        let line = made.output.first { $0.hasPrefix(user + ":") } ?? ""
        #expect(made.status == 0 && line.contains(",es256,"), "\(made.text)")
        let authfile = fixture.directory + "/u2f_keys"
        _ = FileManager.default.createFile(atPath: authfile, contents: Data((line + "\n").utf8))
        let u2f = "auth required pam_u2f.so authfile=\(authfile) origin=pam://keyway appid=pam://keyway\n"
        _ = FileManager.default.createFile(atPath: fixture.services + "/u2f", contents: Data(u2f.utf8))
        #expect(try enroll().status == 0)
        fixture.service("keyway-key", "policy=key config=\(fixture.configPath)")

        func u2fResult() throws -> String? {
            try run(harnessPath, [fixture.services, "u2f", user], environment: key.environment).result
        }
        func keywayResult() throws -> String? { try harness(fixture, "keyway-key", user).result }
        #expect(try u2fResult() == "PAM_SUCCESS")
        #expect(try keywayResult() == "PAM_SUCCESS")

        // The clone: a copy of the key whose counter does not move on.
        key.knobs("counter = repeat\n")
        let u2fClone = [try u2fResult(), try u2fResult()]
        let keywayClone = try keywayResult()
        #expect(u2fClone == ["PAM_SUCCESS", "PAM_SUCCESS"], "pam_u2f 1.1.0 keeps no counter: the clone gets in")
        #expect(keywayClone != "PAM_SUCCESS", "keywayd refuses a counter that did not increase")
        #expect(fixture.daemonLog.contains("may have been cloned"), "\(fixture.daemonLog)")
        let u2fAuthfile = try String(contentsOfFile: authfile, encoding: .utf8)
        #expect(u2fAuthfile == line + "\n", "pam_u2f wrote nothing back: no counter is stored")
    }

    @Test("the software key against Debian's fido2-tools: credentials and assertions verify, each knob acts")
    func softKeyAgainstFido2Tools() throws {
        try requireIsolation()
        let checked = try run("/bin/bash", [packageRoot + "/scripts/softkey-check.sh", SoftKey.directoryOfBuild.path])
        #expect(checked.status == 0, "\(checked.text)")
        #expect(checked.text.contains("softkey-check: all passed"), "\(checked.text)")
    }

    @Test("64 parallel attempts with a key that is not the account's: at most lockout-after are counted")
    func parallelWrongKey() throws {
        defer { uninstall() }
        let key = try install("[fido2]\nlockout-after = 5\n[policy key]\nrequire = fido2\n")
        #expect(try enroll().status == 0)
        fixture.service("keyway-key", "policy=key config=\(fixture.configPath)")
        // Another person's key: this one forgets the account's credential.
        rename(keyDirectory + "/state", keyDirectory + "/state.away")
        let results = LockedResults()
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            results.append((try? harness(fixture, "keyway-key", user))?.result ?? "error")
        }
        #expect(!results.all.contains("PAM_SUCCESS"))
        let asked = key.log.filter { $0.hasPrefix("getAssertion") }.count
        #expect(asked <= 5, "the key was asked \(asked) times: \(key.log)")
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", user])
        #expect(status.text.contains("5 consecutive failures"), "\(status.text)")
    }
}

/// Results gathered from concurrent runs.
final class LockedResults: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [String] = []
    func append(_ result: String) { lock.withLock { results.append(result) } }
    var all: [String] { lock.withLock { results } }
}
