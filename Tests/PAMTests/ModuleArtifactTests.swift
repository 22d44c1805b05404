import Foundation
import Testing

@Suite("pam_keyway.so as built: exports, runtime, linking")
struct ModuleArtifactTests {
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

    @Test("no Swift runtime or Foundation among the shared libraries, no RUNPATH, NODELETE set, stripped")
    func linking() throws {
        let libraries = try run("/usr/bin/ldd", [modulePath])
        #expect(libraries.status == 0)
        #expect(!libraries.text.contains("libswift"), "\(libraries.text)")
        #expect(!libraries.text.contains("Foundation"), "\(libraries.text)")
        #expect(!libraries.text.contains("not found"), "\(libraries.text)")
        let dynamic = try run("/usr/bin/readelf", ["-d", modulePath])
        #expect(!dynamic.text.contains("RUNPATH") && !dynamic.text.contains("RPATH"), "\(dynamic.text)")
        #expect(dynamic.text.contains("NODELETE"))
        let kind = try run("/usr/bin/file", [modulePath])
        #expect(kind.text.contains("stripped") && !kind.text.contains("not stripped"), "\(kind.text)")
    }
}
