import CKeywayLibc
import Glibc
public import KeywayCore
import KeywayPlatform
import KeywayWire
import Synchronization

/// The availability notes keywayd leaves for the module in a directory only root can enter (docs/ARCHITECTURE.md
/// §10, "Notes"): after each request that names an account, the account's note is written again from the store, so
/// the module can prompt for a factor the note lists without a round trip first.
///
/// Bounded: at most `limit` notes, the least recently refreshed removed first (root's module asks about any name
/// typed at su or login, so the names are anyone's choice). Emptied when keywayd starts: a note comes from a keywayd
/// that is serving, or from the last one that did.
public final class AvailabilityNotes: Sendable {
    /// Where the notes are: beside keywayd's socket (/run/keyway/keywayd.sock.notes).
    public let directory: String
    /// Notes kept at once.
    public let limit: Int
    /// The factors `user` could use now, from the store; throws when the store cannot say.
    private let judge: @Sendable (String) throws(AuthenticationError) -> (concealing: [FactorKind], plain: [FactorKind])
    private let state: Mutex<State>
    /// Refreshes asked for after an answer (`refreshSoon`), drained by one thread at a time.
    private let soon = Mutex(Soon())

    private struct Soon {
        /// Names waiting, in the order asked, each once.
        var names: [String] = []
        var waiting: Set<String> = []
        /// Whether a thread is draining `names`.
        var draining = false
    }

    private struct State {
        /// The open directory; -1 once the notes are removed.
        var dir: Int32
        /// When each noted name was last refreshed (a counter), and the note last written for it.
        var noted: [String: (tick: UInt64, bytes: [UInt8])] = [:]
        var tick: UInt64 = 0
    }

    /// Opens (making it, mode 0700) and empties the directory; throws why it cannot be used: it is not a directory
    /// owned by this process's user (root), or cannot be made, closed to others, or emptied. One of this user's
    /// that others may enter (made by hand, or by an older keywayd) is closed to them and emptied like any other.
    public init(
        directory: String, limit: Int = 1024,
        judge:
            @escaping @Sendable (String) throws(AuthenticationError) -> (concealing: [FactorKind], plain: [FactorKind])
    ) throws(AuthenticationError) {
        func refuse(_ why: String) -> AuthenticationError {
            AuthenticationError(.storeFailure, "availability notes at \(directory): \(why)")
        }
        if mkdir(directory, 0o700) != 0 && keyway_errno() != EEXIST {
            throw refuse("cannot be made: \(String(cString: strerror(keyway_errno())))")
        }
        let dir = keyway_open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
        guard dir >= 0 else { throw refuse("cannot be opened: \(String(cString: strerror(keyway_errno())))") }
        let info: stat
        switch Self.ours.check(descriptor: dir) {
        case .success(let found): info = found
        case .failure(let problem):
            close(dir)
            throw refuse("it must be a directory of uid \(geteuid()): \(Self.ours.words(problem))")
        }
        if info.st_mode & 0o077 != 0 && fchmod(dir, 0o700) != 0 {
            close(dir)
            throw refuse("cannot be made mode 0700: \(String(cString: strerror(keyway_errno())))")
        }
        guard Self.empty(dir) else {
            close(dir)
            throw refuse("cannot be emptied: \(String(cString: strerror(keyway_errno())))")
        }
        self.directory = directory
        self.limit = max(1, limit)
        self.judge = judge
        state = Mutex(State(dir: dir))
    }

    /// Removes the notes a keywayd that keeps none finds in `directory`, and the directory (notes turned off, or
    /// a shared database): no module may go on reading what an earlier keywayd wrote. Only a directory of this
    /// process's user is touched.
    public static func discard(directory: String) {
        let dir = keyway_open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
        guard dir >= 0 else { return }
        if case .success = ours.check(descriptor: dir) { remove(dir, at: directory) } else { close(dir) }
    }

    /// A notes directory is keywayd's user's (its mode is made 0700 when it is not).
    private static var ours: TrustedFile { TrustedFile(.directory, ownedBy: [geteuid()], forbidden: 0) }

    deinit { state.withLock { if $0.dir >= 0 { _ = close($0.dir) } } }

    /// Removes every note and the directory, and writes none after: keywayd is stopping. Waits for a refresh in
    /// progress, so none can leave a note behind.
    public func removeAll() {
        state.withLock { state in
            guard state.dir >= 0 else { return }
            Self.remove(state.dir, at: directory)
            state.dir = -1
            state.noted = [:]
        }
    }

    /// Empties the open directory `dir`, closes it and removes it from `directory`.
    private static func remove(_ dir: Int32, at directory: String) {
        _ = empty(dir)
        close(dir)
        rmdir(directory)
    }

    /// Removes every entry of the open directory; false when it cannot be listed.
    private static func empty(_ dir: Int32) -> Bool {
        let copy = dup(dir)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            return false
        }
        defer { closedir(stream) }
        rewinddir(stream)  // the copy shares the directory's offset, which an earlier listing left at the end
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = String(cString: keyway_dirent_name(entry))
            if name != "." && name != ".." { names.append(name) }
        }
        for name in names { unlinkat(dir, name, 0) }
        return true
    }

    /// Writes `user`'s note again from the store: the factors it lists now, or none when the store cannot say or
    /// nothing is available (then the note is removed). Refreshes run one at a time, each reading the store after the
    /// change that asked for it, so the last note written is never older than the last change.
    public func refresh(_ user: String) {
        // No note for a name no account can have (keywayd refuses to answer about it; a concealing list would
        // otherwise note it like any other).
        guard UserContext.nameProblem(user) == nil, let name = AvailabilityNote.fileName(for: user) else { return }
        state.withLock { state in
            guard state.dir >= 0 else { return }  // removed: keywayd is stopping
            var bytes: [UInt8] = []
            if let lists = try? judge(user), !(lists.concealing.isEmpty && lists.plain.isEmpty) {
                bytes = AvailabilityNote(user: user, concealing: lists.concealing, plain: lists.plain).encoded
            }
            // The directory was emptied at start and only this writes to it: a file exists for each name noted.
            if bytes.isEmpty {
                if state.noted.removeValue(forKey: user) != nil { unlinkat(state.dir, name, 0) }
                return
            }
            state.tick += 1
            let unchanged = state.noted[user]?.bytes == bytes
            state.noted[user] = (state.tick, bytes)
            if !unchanged && !KeptFiles.replace(name, in: state.dir, with: bytes, mode: 0o600) {
                // Not written: no note is better than the old one.
                unlinkat(state.dir, name, 0)
                state.noted[user] = nil
            }
            guard state.noted.count > limit,
                let oldest = state.noted.min(by: { $0.value.tick < $1.value.tick })?.key
            else { return }
            state.noted[oldest] = nil
            if let file = AvailabilityNote.fileName(for: oldest) { unlinkat(state.dir, file, 0) }
        }
    }

    /// Refreshes `user`'s note once more, off any client's time: after a request that only read, whose note the last
    /// change already wrote (the refresh catches what time changed: a lockout that ended, a pass that expired).
    /// Coalesced: a name already waiting is not added again, and while one thread drains the names every other
    /// returns at once, so a client's questions in a row never leave threads queued behind one slow store read
    /// (docs/ARCHITECTURE.md §10, "Notes"). At most `limit` names wait, the latest, as the notes kept are: the
    /// oldest waiting is dropped for one more, which leaves its note as the last refresh wrote it.
    public func refreshSoon(_ user: String) {
        let drain = soon.withLock { soon -> Bool in
            if soon.waiting.insert(user).inserted {
                if soon.names.count >= limit { soon.waiting.remove(soon.names.removeFirst()) }
                soon.names.append(user)
            }
            if soon.draining { return false }
            soon.draining = true
            return true
        }
        guard drain else { return }
        while let next = soon.withLock({ soon -> String? in
            guard !soon.names.isEmpty else {
                soon.draining = false
                return nil
            }
            let name = soon.names.removeFirst()
            soon.waiting.remove(name)
            return name
        }) {
            refresh(next)
        }
    }
}
