import Glibc
import Testing

@testable import KeywayPlatform

/// /etc/subuid read as keywayd reads it: a person's subordinate uids are that person, root's ranges a person of their
/// own, lines that are not `OWNER:FIRST:COUNT` skipped, and the file read again when it changes.
@Suite("subordinate uids")
struct SubordinateIDsTests {
    @Test("a uid in a range is its owner's; root's range is its own person; other uids are themselves")
    func ranges() throws {
        var template = Array("/tmp/keyway-subuid.XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        try #require(fd >= 0)
        let path = String(cString: template)
        defer { unlink(path) }
        let text = "alice:100000:65536\n1001:200000:10\nroot:300000:65536\nbroken line\nbob:x:1\ncarol:400000:0\n"
        _ = text.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        let ids = SubordinateIDs(path: path, uidOf: { $0 == "alice" ? 1000 : $0 == "root" ? 0 : nil })
        #expect(ids.person(of: 100_000) == 1000)
        #expect(ids.person(of: 165_535) == 1000)
        #expect(ids.person(of: 165_536) == 165_536, "past the range")
        #expect(ids.person(of: 200_009) == 1001, "a numeric owner")
        #expect(ids.person(of: 300_123) == 300_000, "root's subordinate uids are not root")
        #expect(ids.person(of: 400_000) == 400_000, "an empty range holds nothing")
        #expect(ids.person(of: 0) == 0)
        #expect(ids.person(of: 1000) == 1000)
        // Changed: read again (after the once-a-second look).
        let changed = "alice:500000:10\n"
        let again = open(path, O_WRONLY | O_TRUNC)
        _ = changed.withCString { write(again, $0, strlen($0)) }
        close(again)
        usleep(1_100_000)
        #expect(ids.person(of: 500_001) == 1000)
        #expect(ids.person(of: 100_000) == 100_000, "the old range is gone")
    }
}
