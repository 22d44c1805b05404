import Foundation
import Testing

@testable import KeywayProcessFixture

/// The real `pamtester` client under pam_wrapper: no /etc/pam.d change.
@Suite("pamtester under pam_wrapper", .serialized)
struct PamtesterTests {
    let fixture = PAMFixture()

    init() throws {
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.service("keyway-pamtester", "policy=pattern")
    }

    func pamtester(_ input: String, _ operations: [String] = ["authenticate"]) throws -> Run {
        try run(
            "/usr/bin/pamtester", ["-v", "keyway-pamtester", "alice"] + operations,
            environment: [
                "LD_PRELOAD": "libpam_wrapper.so", "PAM_WRAPPER": "1",
                "PAM_WRAPPER_SERVICE_DIR": fixture.services,
            ],
            input: input)
    }

    @Test("the right pattern → exit 0; a wrong one → nonzero; the lockout after 5 failures holds the right one")
    func rightWrongLockout() throws {
        defer { fixture.remove() }
        let right = try pamtester("2-4-9-3\n", ["authenticate", "acct_mgmt"])
        #expect(right.status == 0, "\(right.text)")
        #expect(right.text.contains("successfully authenticated"))
        let wrong = try pamtester("3-4-9-2\n6-1-8-3\n4-3-8-1-6\n")
        #expect(wrong.status != 0, "\(wrong.text)")
        #expect(wrong.text.contains("Not recognized. 2 attempts left."))
        let more = try pamtester("7-5-3-6\n9-5-1-4\n")
        #expect(more.status != 0)
        let locked = try pamtester("2-4-9-3\n")
        #expect(locked.status != 0, "\(locked.text)")
        #expect(locked.text.contains("Too many failed attempts; try again after"), "\(locked.text)")
        #expect(
            locked.text.contains("Maximum number of tries exceeded") || locked.text.contains("tries"),
            "\(locked.text)")
    }
}
