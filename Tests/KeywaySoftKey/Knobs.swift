/// How the soft key behaves, from `DIR/knobs` (`key = value` lines, `#` comments), read anew for every request. A
/// missing file, an unknown key or an unknown value leaves the default.
///
///     presence = auto | wait | never    auto: touched at once; wait: until DIR/touch exists; never: nobody touches
///     presence-timeout = 30             seconds a request waits for a touch before CTAP2_ERR_USER_ACTION_TIMEOUT
///     counter = count | repeat | back   count: +1 per assertion; repeat: the stored value (a clone); back: one less
///     uv = none | builtin               builtin: the key verifies the user itself (a fingerprint key)
///     unplugged = yes                   every request is answered by closing the connection
///     signature = good | bad            bad: an assertion's signature has one bit flipped (a forgery's)
///     algorithms = es256,eddsa          what makeCredential offers, of what the client asks for (in its order)
///     attestation = x5c | self         x5c: signed by the key's attestation certificate; self: by the credential
///     pin = TEXT                        the key's PIN is set to TEXT (absent: no PIN)
///     pin-retries = 8                   PIN tries before the key blocks it (kept in DIR/pin-retries once used)
struct Knobs: Equatable, Sendable {
    static let fileName = "knobs"

    /// Who touches the key.
    enum Presence: String, Sendable {
        case auto, wait, never
    }

    /// What an assertion's signature counter says.
    enum Counter: String, Sendable {
        case count
        case repeated = "repeat"
        case back
    }

    /// Whether the key verifies the user itself.
    enum Verification: String, Sendable {
        case absent = "none"
        case builtin
    }

    var presence = Presence.auto
    var presenceTimeoutSeconds = 30
    var counter = Counter.count
    var verification = Verification.absent
    var unplugged = false
    var badSignature = false
    var algorithms = [SoftKey.es256, SoftKey.eddsa]
    var pin: String? = nil
    var selfAttestation = false
    var pinRetries = 8

    /// The knobs `DIR/knobs` sets now.
    static func load(from directory: KeyDirectory) -> Knobs {
        guard let bytes = directory.read(fileName, limit: 64 * 1024) else { return Knobs() }
        return parse(String(decoding: bytes, as: UTF8.self))
    }

    /// The knobs `text` sets.
    static func parse(_ text: String) -> Knobs {
        var knobs = Knobs()
        for rawLine in text.split(separator: "\n") {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
            let parts = line.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let key = parts[0].trimmingSpaces
            let value = parts[1].trimmingSpaces
            switch key {
            case "presence": knobs.presence = Presence(rawValue: value) ?? knobs.presence
            case "presence-timeout":
                if let seconds = Int(value), seconds >= 0, seconds <= 3600 { knobs.presenceTimeoutSeconds = seconds }
            case "counter": knobs.counter = Counter(rawValue: value) ?? knobs.counter
            case "uv": knobs.verification = Verification(rawValue: value) ?? knobs.verification
            case "unplugged": knobs.unplugged = ["yes", "true", "1"].contains(value)
            case "signature": knobs.badSignature = value == "bad"
            case "algorithms":
                let names = value.split(separator: ",").map { String($0).trimmingSpaces }
                let numbers = names.compactMap { ["es256": SoftKey.es256, "eddsa": SoftKey.eddsa][$0] }
                if numbers.count == names.count && !numbers.isEmpty { knobs.algorithms = numbers }
            case "attestation": knobs.selfAttestation = value == "self"
            case "pin": knobs.pin = value.isEmpty ? nil : value
            case "pin-retries":
                if let tries = Int(value), tries >= 1, tries <= 8 { knobs.pinRetries = tries }
            default: continue
            }
        }
        return knobs
    }
}

extension StringProtocol {
    /// Without the spaces and tabs at either end.
    fileprivate var trimmingSpaces: String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let first = firstIndex(where: { !blank($0) }), let last = lastIndex(where: { !blank($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
