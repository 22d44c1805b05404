public import KeywayCore

/// The store's record of fingers a reader keeps itself (`[biometric] backend = fprintd`): their names as the reader
/// last listed them, and the domain state, which changes whenever that list does. The prints stay with the reader.
///
/// Layout (version 1): "KWR1", 16 bytes of domain state, a count byte, then per finger a name length byte and the
/// UTF-8 name.
public struct ReaderEnrollment: Sendable, Equatable {
    /// The fingers, as the reader names them ("right-index-finger").
    public var fingers: [String]
    /// Changes whenever `fingers` does.
    public var domainState: [UInt8]

    /// Creates a record.
    public init(fingers: [String], domainState: [UInt8]) {
        self.fingers = fingers
        self.domainState = domainState
    }

    static let magic = Array("KWR1".utf8)

    /// True when the payload is a reader's record rather than the simulator's templates.
    public static func isReaderRecord(_ bytes: [UInt8]) -> Bool { bytes.starts(with: magic) }

    /// The payload bytes.
    public func encoded() -> [UInt8] {
        var bytes = Self.magic + domainState
        bytes.append(UInt8(min(fingers.count, BiometricEnrollment.maximumFingers)))
        for finger in fingers.prefix(BiometricEnrollment.maximumFingers) {
            let name = Array(finger.utf8.prefix(255))
            bytes.append(UInt8(name.count))
            bytes += name
        }
        return bytes
    }

    /// Decodes a payload, refusing anything malformed with a store failure that says what is wrong.
    public init(decoding bytes: [UInt8]) throws(AuthenticationError) {
        func bad(_ why: String) -> AuthenticationError {
            AuthenticationError(.storeFailure, "the stored record of the reader's fingers is damaged: \(why)")
        }
        guard bytes.starts(with: Self.magic), bytes.count >= 4 + BiometricEnrollment.domainStateLength + 1 else {
            throw bad("unknown format")
        }
        var cursor = bytes.dropFirst(4)
        let state = Array(cursor.prefix(BiometricEnrollment.domainStateLength))
        cursor = cursor.dropFirst(BiometricEnrollment.domainStateLength)
        let count = Int(cursor.removeFirst())
        guard count <= BiometricEnrollment.maximumFingers else { throw bad("\(count) fingers is more than allowed") }
        var fingers: [String] = []
        for _ in 0..<count {
            guard let length = cursor.first.map(Int.init), cursor.count > length else { throw bad("it ends early") }
            guard let name = String(validating: cursor.dropFirst().prefix(length), as: UTF8.self) else {
                throw bad("a name is not UTF-8")
            }
            fingers.append(name)
            cursor = cursor.dropFirst(1 + length)
        }
        guard cursor.isEmpty else { throw bad("trailing bytes") }
        self.init(fingers: fingers, domainState: state)
    }
}
