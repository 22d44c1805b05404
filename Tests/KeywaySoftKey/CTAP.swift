/// The CTAP2 status codes the soft key answers with (CTAP 2.0 §6.3).
enum CTAPStatus: UInt8, Error, Sendable {
    case ok = 0x00
    case invalidCommand = 0x01
    case invalidParameter = 0x02
    case invalidLength = 0x03
    case cborUnexpectedType = 0x11
    case invalidCBOR = 0x12
    case missingParameter = 0x14
    case credentialExcluded = 0x19
    case unsupportedAlgorithm = 0x26
    case unsupportedOption = 0x2B
    case keepaliveCancel = 0x2D
    case noCredentials = 0x2E
    case userActionTimeout = 0x2F
    case pinInvalid = 0x31
    case pinBlocked = 0x32
    case pinAuthInvalid = 0x33
    case pinAuthBlocked = 0x34
    case pinNotSet = 0x35
    case pinRequired = 0x36
    case other = 0x7F

    /// The word the log uses for it.
    var word: String {
        switch self {
        case .ok: "ok"
        case .invalidCommand: "invalid-command"
        case .invalidParameter: "invalid-parameter"
        case .invalidLength: "invalid-length"
        case .cborUnexpectedType: "unexpected-type"
        case .invalidCBOR: "invalid-cbor"
        case .missingParameter: "missing-parameter"
        case .credentialExcluded: "excluded"
        case .unsupportedAlgorithm: "unsupported-algorithm"
        case .unsupportedOption: "unsupported-option"
        case .keepaliveCancel: "cancelled"
        case .noCredentials: "no-credentials"
        case .userActionTimeout: "timeout"
        case .pinInvalid: "pin-invalid"
        case .pinBlocked: "pin-blocked"
        case .pinAuthInvalid: "pin-auth-invalid"
        case .pinAuthBlocked: "pin-auth-blocked"
        case .pinNotSet: "pin-not-set"
        case .pinRequired: "pin-required"
        case .other: "state-not-written"
        }
    }

    /// The status for how a wait for the user's touch ended; nil when it was given, or when the client went away
    /// (`.disconnected` is answered by closing, see `SoftKey.Abandoned`).
    init?(_ outcome: PresenceOutcome) {
        switch outcome {
        case .given, .disconnected: return nil
        case .cancelled: self = .keepaliveCancel
        case .timedOut: self = .userActionTimeout
        }
    }
}

/// The CTAP2 commands the soft key knows (CTAP 2.0 §5).
enum CTAPCommand: UInt8, Sendable {
    case makeCredential = 0x01
    case getAssertion = 0x02
    case getInfo = 0x04
    case clientPIN = 0x06

    var name: String {
        switch self {
        case .makeCredential: "makeCredential"
        case .getAssertion: "getAssertion"
        case .getInfo: "getInfo"
        case .clientPIN: "clientPIN"
        }
    }
}

/// The answer to one CTAP2 request: the status byte and CBOR body the client reads, and the line for `DIR/log`.
struct Reply: Sendable {
    var status: CTAPStatus
    var body: CBOR?
    /// What follows the command's name and status word in the log ("counter=5").
    var detail = ""

    /// `status | CBOR`, as sent.
    var bytes: [UInt8] { [status.rawValue] + (body?.encoded() ?? []) }
}

/// The authenticator: a CTAP2 request (the command byte, then its CBOR parameters) in, a `Reply` out.
struct SoftKey: Sendable {
    /// The key's directory: its state, knobs and touch.
    let directory: KeyDirectory

    /// The key's model, as its getInfo and attestations say ("keyway-softkey-1").
    static let aaguid: [UInt8] = Array("keyway-softkey-1".utf8)
    /// The largest message it takes, as getInfo says.
    static let maxMessageSize = 1200

    /// The client went away while the key waited for a touch: nothing is answered.
    struct Abandoned: Error {}

    /// The reply to `message` (nil for an empty one), and the log line's first word.
    func handle(_ message: [UInt8], knobs: Knobs, presence: PresenceWait) -> (name: String, reply: Reply?) {
        guard let first = message.first else { return ("empty", Reply(status: .invalidLength)) }
        guard let command = CTAPCommand(rawValue: first) else {
            return ("command 0x" + [first].hex, Reply(status: .invalidCommand))
        }
        let parameters: CBOR
        if message.count == 1 {
            parameters = .map([])
        } else {
            do {
                parameters = try CBOR.decode(message.dropFirst())
            } catch {
                return (command.name, Reply(status: .invalidCBOR))
            }
        }
        do {
            switch command {
            case .getInfo: return (command.name, info(knobs))
            case .makeCredential:
                return (command.name, try makeCredential(parameters, knobs: knobs, presence: presence))
            case .getAssertion:
                return (command.name, try getAssertion(parameters, knobs: knobs, presence: presence))
            case .clientPIN: return (command.name, try clientPIN(parameters, knobs: knobs))
            }
        } catch let status as CTAPStatus {
            return (command.name, Reply(status: status))
        } catch {
            return (command.name, nil)
        }
    }

    /// authenticatorGetInfo: CTAP 2.0 alone, no resident keys, user presence, a client PIN (set when the knobs
    /// give one; PIN protocol one), and user verification with `uv = builtin`.
    func info(_ knobs: Knobs) -> Reply {
        var options: [CBOR.Entry] = [
            .init(key: .text("rk"), value: .bool(false)), .init(key: .text("up"), value: .bool(true)),
            .init(key: .text("plat"), value: .bool(false)),
            .init(key: .text("clientPin"), value: .bool(knobs.pin != nil)),
        ]
        if knobs.verification == .builtin { options.append(.init(key: .text("uv"), value: .bool(true))) }
        let body = CBOR.map([
            .int(1): .array([.text("FIDO_2_0")]), .int(3): .bytes(Self.aaguid), .int(4): .map(options),
            .int(5): .int(Self.maxMessageSize), .int(6): .array([.int(1)]),
        ])
        return Reply(status: .ok, body: body)
    }

    /// Waits for the user as the knobs say: throws the status for a cancel or a timeout, `Abandoned` when the client
    /// left.
    func requirePresence(_ knobs: Knobs, _ presence: PresenceWait) throws {
        let outcome = presence.wait(knobs)
        if outcome == .disconnected { throw Abandoned() }
        if let status = CTAPStatus(outcome) { throw status }
    }
}

/// Reading a request's parameters: each a CTAP2 status when missing or of the wrong type.
extension CBOR {
    /// The value under integer key `key`, required.
    func required(_ key: Int) throws(CTAPStatus) -> CBOR {
        guard mapEntries != nil else { throw .cborUnexpectedType }
        guard let value = self[int: key] else { throw .missingParameter }
        return value
    }

    func requiredBytes(_ key: Int) throws(CTAPStatus) -> [UInt8] {
        guard let bytes = try required(key).byteString else { throw .cborUnexpectedType }
        return bytes
    }

    /// The boolean option `name` of an options map (nil when absent).
    func option(_ name: String) throws(CTAPStatus) -> Bool? {
        guard let value = self[text: name] else { return nil }
        guard let flag = value.boolean else { throw .cborUnexpectedType }
        return flag
    }

    /// The credential ids of a list of PublicKeyCredentialDescriptors ({"id": bytes, "type": "public-key"}); an
    /// entry of another type is skipped.
    func credentialIDs() throws(CTAPStatus) -> [[UInt8]] {
        guard let items = arrayItems else { throw .cborUnexpectedType }
        var ids: [[UInt8]] = []
        for item in items {
            guard item.mapEntries != nil, let id = item[text: "id"]?.byteString,
                let type = item[text: "type"]?.textString
            else { throw .cborUnexpectedType }
            if type == "public-key" { ids.append(id) }
        }
        return ids
    }
}
