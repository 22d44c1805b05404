import Foundation
import Testing

@testable import KeywayProcessFixture

@Suite("pam_keyway.so as built: exports, runtime, linking")
struct ModuleArtifactTests {
    /// The names through which a shared object can reach the process environment in libc.
    static let environmentSymbols: Set<String> = [
        "getenv", "secure_getenv", "__libc_secure_getenv", "environ", "__environ", "_environ", "setenv", "putenv",
        "unsetenv", "clearenv",
    ]
    /// The plain C host, even when the suite runs with a sanitized one (KEYWAY_HARNESS): these tests watch what the
    /// module reads and loads, and an ASan host must come first among the libraries and brings libm with it.
    static let plainHarness = packageRoot + "/build/pam-harness"

    /// A fixture where alice has the passcode 739155 and the service "passcode" asks for it; the caller removes it.
    static func passcodeService() throws -> PAMFixture {
        let fixture = PAMFixture()
        try fixture.enrollPasscode("alice", "739155")
        fixture.service("passcode", "policy=passcode")
        return fixture
    }
    @Test("exports only pam_sm_authenticate, pam_sm_setcred and pam_sm_acct_mgmt")
    func exports() throws {
        let symbols = try run("/usr/bin/nm", ["-D", "--defined-only", modulePath])
        #expect(symbols.status == 0, "\(symbols.text)")
        let global = symbols.output.compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard fields.count == 3, fields[1].first?.isUppercase == true else { return nil }
            return String(fields[2])
        }
        #expect(global.sorted() == ["pam_sm_acct_mgmt", "pam_sm_authenticate", "pam_sm_setcred"])
        // No function at all besides them in the dynamic table, not even a local one.
        let functions = symbols.output.compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard fields.count == 3, ["T", "t", "W", "i"].contains(fields[1]) else { return nil }
            return String(fields[2])
        }
        #expect(functions.sorted() == ["pam_sm_acct_mgmt", "pam_sm_authenticate", "pam_sm_setcred"], "\(functions)")
    }

    @Test("no Swift runtime or Foundation among the shared libraries, no RUNPATH, no NODELETE, stripped")
    func linking() throws {
        let libraries = try run("/usr/bin/ldd", [modulePath])
        #expect(libraries.status == 0)
        #expect(!libraries.text.contains("libswift"), "\(libraries.text)")
        #expect(!libraries.text.contains("Foundation"), "\(libraries.text)")
        #expect(!libraries.text.contains("not found"), "\(libraries.text)")
        let dynamic = try run("/usr/bin/readelf", ["-d", modulePath])
        #expect(!dynamic.text.contains("RUNPATH") && !dynamic.text.contains("RPATH"), "\(dynamic.text)")
        // Unloaded at pam_end like any module, so a host keeps none of its pages (docs/ARCHITECTURE.md §4).
        #expect(!dynamic.text.contains("NODELETE"), "\(dynamic.text)")
        let kind = try run("/usr/bin/file", [modulePath])
        #expect(kind.text.contains("stripped") && !kind.text.contains("not stripped"), "\(kind.text)")
    }

    @Test("Embedded Swift: libc and libpam only; no libm, no libstdc++, no Swift runtime")
    func embedded() throws {
        let needed = try run("/usr/bin/readelf", ["-d", modulePath]).output.compactMap { line -> String? in
            guard line.contains("(NEEDED)"), let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]")
            else { return nil }
            return String(line[line.index(after: open)..<close])
        }
        #expect(needed.sorted() == ["libc.so.6", "libpam.so.0"], "\(needed)")
        let strings = try run("/usr/bin/strings", ["-a", modulePath])
        #expect(!strings.text.contains("SWIFT_"), "no Swift runtime setting is looked up")
    }

    @Test("reads no environment variable: imports no environment function of libc, and calls none in a whole login")
    func noEnvironment() throws {
        // Statically: the only ways into the environment are libc's functions and variables.
        let undefined = try run("/usr/bin/nm", ["-D", "--undefined-only", modulePath])
        #expect(undefined.status == 0, "\(undefined.text)")
        let imported = Set(
            undefined.output.compactMap { line in
                line.split(separator: " ").last.map { String($0.split(separator: "@").first ?? $0) }
            })
        #expect(imported.contains("pam_get_item"), "the import list was read: \(imported.sorted())")
        #expect(imported.isDisjoint(with: Self.environmentSymbols), "\(imported.intersection(Self.environmentSymbols))")

        // At run time: a preloaded getenv/secure_getenv counter over a whole authentication, with Swift runtime
        // settings in the environment; it must see the harness's own control read, and nothing from the module.
        let fixture = try Self.passcodeService()
        defer { fixture.remove() }
        let log = fixture.directory + "/getenv.log"
        let result = try run(
            Self.plainHarness, ["--acct"] + answers("739155") + [fixture.services, "passcode", "alice"],
            environment: [
                "LD_PRELOAD": packageRoot + "/build/count-getenv.so", "COUNT_GETENV_LOG": log,
                "KEYWAY_HARNESS_CONTROL": "1", "SWIFT_DEBUG_ENABLE_COW_CHECKS": "1", "PATH": "/usr/bin:/bin",
            ])
        #expect(result.text.contains("result: PAM_SUCCESS"), "\(result.text)")
        let reads = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n") ?? []
        #expect(
            reads.contains { $0.hasPrefix("getenv KEYWAY_HARNESS_CONTROL ") }, "the counter saw the control: \(reads)")
        #expect(!reads.contains { $0.contains("pam_keyway") }, "\(reads)")
    }

    @Test("a policy without the biometric never loads libm: only the simulated sensor's statistics need it")
    func noLibm() throws {
        let fixture = try Self.passcodeService()
        defer { fixture.remove() }
        // The dynamic loader's own trace (LD_DEBUG is read by ld.so, not by the module) lists every file it maps.
        let result = try run(
            Self.plainHarness, answers("739155") + [fixture.services, "passcode", "alice"],
            environment: ["LD_DEBUG": "files", "PATH": "/usr/bin:/bin"])
        #expect(result.text.contains("result: PAM_SUCCESS"), "\(result.text)")
        #expect(result.text.contains("pam_keyway.so"), "the trace lists the module itself")
        #expect(!result.text.contains("libm.so"), "\(result.output.filter { $0.contains("file=") })")
    }
}
