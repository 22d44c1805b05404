import Synchronization

/// One credential the soft key made: the line `hex(id) hex(seed) hex(sha256(rp id)) counter algorithm` of
/// `DIR/state` (a line without the algorithm is Ed25519's).
struct StoredCredential: Equatable, Sendable {
    /// The credential id the relying party keeps (32 random bytes).
    var id: [UInt8]
    /// The private key: an Ed25519 seed, or a P-256 scalar (32 bytes either way).
    var seed: [UInt8]
    /// SHA-256 of the relying party's id.
    var rpIDHash: [UInt8]
    /// The signature counter, per credential.
    var counter: UInt32
    /// COSE's number for its algorithm: `SoftKey.eddsa` or `SoftKey.es256`.
    var algorithm = SoftKey.eddsa
}

/// The credentials in `DIR/state`, read anew for every request (a test makes a clone by copying the file) and
/// written whole, by a rename. Changes go through `update`, under one lock for the process.
struct KeyState: Sendable {
    static let fileName = "state"

    var credentials: [StoredCredential] = []

    /// What the state file says now (nothing when it is missing; a line that does not parse is skipped).
    static func load(from directory: KeyDirectory) -> KeyState {
        guard let bytes = directory.read(fileName) else { return KeyState() }
        var state = KeyState()
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 4 || fields.count == 5, let id = [UInt8](hex: fields[0]), !id.isEmpty,
                let seed = [UInt8](hex: fields[1]), seed.count == 32,
                let rpIDHash = [UInt8](hex: fields[2]), rpIDHash.count == 32,
                let counter = UInt32(fields[3]),
                let algorithm = fields.count == 5 ? Int(fields[4]) : SoftKey.eddsa,
                algorithm == SoftKey.eddsa || algorithm == SoftKey.es256
            else { continue }
            state.credentials.append(
                StoredCredential(id: id, seed: seed, rpIDHash: rpIDHash, counter: counter, algorithm: algorithm))
        }
        return state
    }

    /// The file's text.
    var text: String {
        credentials.map { "\($0.id.hex) \($0.seed.hex) \($0.rpIDHash.hex) \($0.counter) \($0.algorithm)\n" }.joined()
    }

    /// The credential with `id` for the relying party whose id hashes to `rpIDHash`.
    func credential(id: [UInt8], rpIDHash: [UInt8]) -> StoredCredential? {
        credentials.first { $0.id == id && $0.rpIDHash == rpIDHash }
    }

    /// Runs `body` on the state as the file has it now, under the process's lock; writes it back when `body`
    /// changed it. Returns what `body` returned, or nil when the change could not be written.
    static func update<R>(in directory: KeyDirectory, _ body: (inout KeyState) -> R) -> R? {
        lock.withLock { _ in
            var state = load(from: directory)
            let before = state.credentials
            let result = body(&state)
            if state.credentials != before && !directory.replace(fileName, with: Array(state.text.utf8)) { return nil }
            return result
        }
    }

    /// Serializes read-modify-write of the state file among this process's connections.
    private static let lock = Mutex(())
}
