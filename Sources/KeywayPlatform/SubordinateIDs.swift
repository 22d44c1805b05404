import CKeywayLibc
import KeywayCore
import Synchronization

/// Whose subordinate uids are whose: /etc/subuid (`NAME-or-UID:FIRST:COUNT` a line, as useradd and usermod write it
/// for every user) lets a person run processes under a range of uids, through newuidmap in a user namespace. Such a
/// process is that person for keywayd's per-person bounds (docs/ARCHITECTURE.md §10, "Connections"), so a range of
/// 65,536 uids does not give one person 65,536 shares of the connection places. A range of root's (rootful
/// containers) is a person of its own, never root: its processes are not root. The file is read at start, and again
/// when it changes (its inode, size or modification time, looked at no more than once a second) on a thread of its
/// own: the names in it are looked up through NSS, which may wait (a directory server away), and `person` is asked
/// on keywayd's accept loop, so it answers from the ranges it has meanwhile.
public final class SubordinateIDs: Sendable {
    /// One line of the file: `count` uids from `first` are `person`'s.
    struct Range: Equatable {
        var first: UInt32
        var count: UInt32
        var person: UInt32
    }

    private struct State {
        var ranges: [Range] = []
        var stamp: [Int64]? = nil
        var checked: Int64? = nil
        /// A reading of the file runs on its own thread now.
        var reading = false
    }

    /// The file read.
    public let path: String
    private let state = Mutex(State())
    /// How the file's owners are named: the account name's uid (NSS), or nil.
    private let uidOf: @Sendable (String) -> UInt32?

    /// The ranges of `path` (/etc/subuid unless a test gives another), names looked up with `uidOf`.
    public init(
        path: String = "/etc/subuid",
        uidOf: @escaping @Sendable (String) -> UInt32? = { name in
            if case .success(let uid?) = Accounts.uid(of: name) { return uid }
            return nil
        }
    ) {
        self.path = path
        self.uidOf = uidOf
        if let stamp = Self.stamp(of: path) { load(stamp) }
    }

    /// The person `uid` runs for: the owner of the range that holds it (a range of root's: the range's first uid,
    /// a person of its own), or `uid` itself.
    public func person(of uid: UInt32) -> UInt32 {
        let ranges = current()
        guard uid != 0, let range = ranges.first(where: { uid >= $0.first && uid - $0.first < $0.count }) else {
            return uid
        }
        return range.person == 0 ? range.first : range.person
    }

    /// The ranges as last read; when the file has changed (checked at most once a second), a new reading is started
    /// on a thread of its own and the ranges it finds are used from then on.
    private func current() -> [Range] {
        let now = MonotonicClock.milliseconds()
        let due = state.withLock { state -> Bool in
            if state.reading { return false }
            if let checked = state.checked, now - checked < 1000 { return false }
            state.checked = now
            return true
        }
        guard due else { return state.withLock { $0.ranges } }
        let stamp = Self.stamp(of: path)
        let start = state.withLock { state -> Bool in
            guard state.stamp != stamp, !state.reading else { return false }
            state.reading = true
            return true
        }
        if start && !spawn({ [self] in load(stamp) }) {
            state.withLock { $0.reading = false }  // no thread: the next look tries again
        }
        return state.withLock { $0.ranges }
    }

    /// Reads the file whose stamp is `stamp` (nil: there is none) and keeps its ranges.
    private func load(_ stamp: [Int64]?) {
        let ranges = stamp == nil ? [] : Self.parse(read(), uidOf: uidOf)
        state.withLock { state in
            state.stamp = stamp
            state.ranges = ranges
            state.reading = false
        }
    }

    /// What tells a change of the file: its inode, size and modification time; nil when it is not there.
    private static func stamp(of path: String) -> [Int64]? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return [Int64(info.st_ino), Int64(info.st_size), Int64(info.st_mtim.tv_sec), Int64(info.st_mtim.tv_nsec)]
    }

    /// The ranges of the file's text; lines that are not `OWNER:FIRST:COUNT` are skipped.
    static func parse(_ bytes: [UInt8], uidOf: (String) -> UInt32?) -> [Range] {
        var ranges: [Range] = []
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            guard fields.count == 3, !fields[0].isEmpty,
                let first = UInt32(String(decoding: fields[1], as: UTF8.self)),
                let count = UInt32(String(decoding: fields[2], as: UTF8.self)), count > 0
            else { continue }
            let owner = String(decoding: fields[0], as: UTF8.self)
            guard let person = UInt32(owner) ?? uidOf(owner) else { continue }
            ranges.append(Range(first: first, count: count, person: person))
        }
        return ranges
    }

    /// The file's bytes (at most 4 MiB), or none.
    private func read() -> [UInt8] {
        let fd = keyway_open(path, O_RDONLY | O_CLOEXEC, 0)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while bytes.count < 4 << 20 {
            let got = chunk.withUnsafeMutableBytes { CKeywayLibc.read(fd, $0.baseAddress!, $0.count) }
            if got <= 0 { break }
            bytes += chunk[0..<got]
        }
        return bytes
    }
}
