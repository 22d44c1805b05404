public import KeywayCore

/// A user's enrolled fingers (or faces) and the domain state, as stored in the enrollment payload.
///
/// Layout (version 1): "KWB1", 16 bytes of domain state, a count byte, then per finger a name length byte,
/// the UTF-8 name, a little-endian UInt32 template length and the template as the matcher encoded it
/// (`TemplateMatcher`; the keeper has it checked when it loads one).
public struct BiometricEnrollment: Sendable, Equatable {
    /// The templates by finger name ("right-index", "face").
    public var templates: [(finger: String, template: [UInt8])]
    /// Changes on every enrollment change, so callers can detect that someone added a finger.
    public var domainState: [UInt8]

    /// The most fingers one user may enroll (as fprintd).
    public static let maximumFingers = 10

    /// Creates an enrollment.
    public init(templates: [(finger: String, template: [UInt8])], domainState: [UInt8]) {
        self.templates = templates
        self.domainState = domainState
    }

    public static func == (lhs: BiometricEnrollment, rhs: BiometricEnrollment) -> Bool {
        lhs.domainState == rhs.domainState && lhs.templates.map { $0.finger } == rhs.templates.map { $0.finger }
            && lhs.templates.map { $0.template } == rhs.templates.map { $0.template }
    }

    static let magic = Array("KWB1".utf8)
    static let domainStateLength = 16

    /// The payload bytes.
    public func encoded() -> [UInt8] {
        var bytes = Self.magic + domainState
        bytes.append(UInt8(templates.count))
        for (finger, template) in templates {
            let name = Array(finger.utf8.prefix(255))
            let body = template
            bytes.append(UInt8(name.count))
            bytes += name
            withUnsafeBytes(of: UInt32(body.count).littleEndian) { bytes += $0 }
            bytes += body
        }
        return bytes
    }

    /// Decodes a payload, refusing anything malformed with a store failure that says what is wrong.
    public init(decoding bytes: [UInt8]) throws(AuthenticationError) {
        func bad(_ why: String) -> AuthenticationError {
            AuthenticationError(.storeFailure, "the stored biometric enrollment is damaged: \(why)")
        }
        var cursor = bytes[...]
        func take(_ count: Int) throws(AuthenticationError) -> ArraySlice<UInt8> {
            guard cursor.count >= count else { throw bad("it ends early") }
            defer { cursor = cursor.dropFirst(count) }
            return cursor.prefix(count)
        }
        guard try Array(take(4)) == Self.magic else { throw bad("unknown format") }
        let state = Array(try take(Self.domainStateLength))
        let count = Int(try take(1).first ?? 0)
        guard count <= Self.maximumFingers else { throw bad("\(count) templates is more than allowed") }
        var templates: [(finger: String, template: [UInt8])] = []
        for _ in 0..<count {
            let nameLength = Int(try take(1).first ?? 0)
            guard let name = String(validating: try take(nameLength), as: UTF8.self) else {
                throw bad("a name is not UTF-8")
            }
            let lengthBytes = Array(try take(4))
            let length = Int(
                UInt32(lengthBytes[0]) | UInt32(lengthBytes[1]) << 8 | UInt32(lengthBytes[2]) << 16
                    | UInt32(lengthBytes[3]) << 24)
            templates.append((name, Array(try take(length))))
        }
        guard cursor.isEmpty else { throw bad("trailing bytes") }
        self.init(templates: templates, domainState: state)
    }
}
