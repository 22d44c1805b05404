public import KeywayCore

/// What keywayd last found usable of one account's factors that its store alone decides (a pattern, a passcode, a
/// TOTP code), kept as a root-only file the module reads before its first prompt instead of asking keywayd
/// (docs/ARCHITECTURE.md §10, "Notes").
///
/// A note only ever lists factors keywayd answered *available*: for a factor it lists, the module prompts without a
/// round trip; for any other, and without a note, it asks keywayd as before. So a note can make a prompt come
/// sooner, never a refusal keywayd would not give; and a note that is out of date can only let the person type an
/// answer that keywayd, which judges every attempt, then refuses with its reason.
public struct AvailabilityNote: Sendable, Equatable {
    /// The account the note is about (also what names its file).
    public var user: String
    /// The factors available to an authentication that conceals who has enrolled (docs/ARCHITECTURE.md §5).
    public var concealing: [FactorKind]
    /// The factors available to one that does not (the account's owner proving who they are).
    public var plain: [FactorKind]

    public init(user: String, concealing: [FactorKind], plain: [FactorKind]) {
        self.user = user
        self.concealing = concealing
        self.plain = plain
    }

    /// True when the note lists `factor` as available to a context that does, or does not, conceal.
    public func lists(_ factor: FactorKind, concealing: Bool) -> Bool {
        (concealing ? self.concealing : plain).contains(factor)
    }

    /// The largest note read; a note is a few dozen bytes.
    public static let maximumSize = 1024
    /// Factors a note lists, in each context, at most.
    static let maximumFactors = 16
    /// The longest account name, in bytes, that has a note: its file name is the name's bytes in hex.
    public static let maximumNameBytes = 100

    /// The format's name and revision, after the wire version and kind. Computed, as the module keeps no stored
    /// value that allocates (docs/ARCHITECTURE.md §8).
    static var magic: [UInt8] { Array("keyway availability note 1".utf8) }

    /// Where keywayd listening at `socket` keeps its notes: beside it, its name and `.notes`
    /// (/run/keyway/keywayd.sock.notes), so two keywayd with their sockets in one directory never share them.
    public static func directory(besideSocket socket: String) -> String { socket + ".notes" }

    /// The file of `user`'s note: the name's bytes in hex (any byte a name may hold, and never "." or ".."), or
    /// nil for a name too long to have one.
    public static func fileName(for user: String) -> String? {
        let bytes = Array(user.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumNameBytes else { return nil }
        let digits = Array("0123456789abcdef".utf8)
        var name: [UInt8] = []
        name.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            name.append(digits[Int(byte >> 4)])
            name.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: name, as: UTF8.self)
    }

    /// The note as its file holds it.
    public var encoded: [UInt8] {
        var out = WireWriter(kind: 0, capacity: 64)
        out.data(Self.magic)
        out.string(user)
        for list in [concealing, plain] {
            out.u32(list.count)
            for factor in list { out.string(factor.rawValue) }
        }
        return out.bytes
    }

    /// The note in `bytes`, if they are exactly one whole note; anything else is no note.
    public init(decoding bytes: [UInt8]) throws(WireError) {
        var reader = try WireReader(bytes)
        guard reader.kind == 0, Array(try reader.data("the magic", limit: 64)) == Self.magic else {
            throw WireError("not an availability note")
        }
        user = try reader.string("the user", limit: Self.maximumNameBytes)
        var lists: [[FactorKind]] = []
        for _ in 0..<2 {
            let count = try reader.count("factors", limit: Self.maximumFactors)
            var list: [FactorKind] = []
            for _ in 0..<count { list.append(try reader.factor()) }
            lists.append(list)
        }
        try reader.finish()
        concealing = lists[0]
        plain = lists[1]
    }
}
