import Glibc
import KeywayTestSupport
import Synchronization
import Testing

@testable import KeywayPlatform

/// /etc/subuid read as keywayd reads it: a person's subordinate uids are that person, root's ranges a person of their
/// own, lines that are not `OWNER:FIRST:COUNT` skipped, and the file read again when it changes, off the caller's
/// thread.
@Suite("subordinate uids")
struct SubordinateIDsTests {
    @Test("a uid in a range is its owner's; root's range is its own person; other uids are themselves")
    func ranges() throws {
        var template = Array("/tmp/keyway-subuid.XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        try #require(fd >= 0)
        let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { unlink(path) }
        let text = "alice:100000:65536\n1001:200000:10\nroot:300000:65536\nbroken line\nbob:x:1\ncarol:400000:0\n"
        _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
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
        // Changed: read again (after the once-a-second look), on a thread of its own.
        Self.write("alice:500000:10\n", to: path)
        usleep(1_100_000)
        #expect(eventually { ids.person(of: 500_001) == 1000 })
        #expect(ids.person(of: 100_000) == 100_000, "the old range is gone")
    }

    static func write(_ text: String, to path: String) {
        let fd = open(path, O_WRONLY | O_TRUNC | O_CREAT, 0o644)
        _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
        close(fd)
    }

    @Test("a name lookup that waits (NSS's server away) never holds up the caller: the old ranges answer meanwhile")
    func slowLookup() throws {
        var template = Array("/tmp/keyway-subuid.XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        try #require(fd >= 0)
        close(fd)
        let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { unlink(path) }
        Self.write("alice:100000:10\n", to: path)
        let slow = Mutex(false)
        let ids = SubordinateIDs(
            path: path,
            uidOf: { name in
                if slow.withLock({ $0 }) { usleep(2_000_000) }
                return name == "alice" ? 1000 : name == "bob" ? 1001 : nil
            })
        #expect(ids.person(of: 100_001) == 1000, "read at start")
        slow.withLock { $0 = true }
        Self.write("bob:100000:10\n", to: path)
        usleep(1_100_000)
        let start = MonotonicClock.milliseconds()
        #expect(ids.person(of: 100_001) == 1000, "the ranges it has, while the new ones are read")
        #expect(MonotonicClock.milliseconds() - start < 500, "the caller waited for the lookup")
        #expect(eventually { ids.person(of: 100_001) == 1001 }, "the new ranges, once read")
    }
}
