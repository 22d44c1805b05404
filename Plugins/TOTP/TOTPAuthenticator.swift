import CKeywayLibc
public import KeywayCore

/// The person's side of TOTP: a code typed at a prompt (in a `first of` too, as every typed factor), checked by the
/// vault; and the enrollment that shows a new secret once, as an `otpauth://` URI and its QR code, and saves it only
/// when the person types a code their app made from it.
public final class TOTPAuthenticator: TypedAuthenticator {
    /// The prompt and the vault's check.
    public let knowledge: KnowledgeFactor
    /// Where the secret is made and kept.
    public let vault: any Vault
    /// Who issues the codes, as the app lists them.
    public let issuer = "Keyway"
    /// Digits per code (`[totp] digits`).
    public let digits: Int

    /// Creates the factor over a vault (keywayd's, or a local one).
    public init(vault: any Vault, digits: Int = 6) {
        self.vault = vault
        self.digits = digits
        knowledge = KnowledgeFactor(
            factor: .totp, promptText: "Verification code: ", normalize: { .success($0) }, vault: vault)
    }

    /// `keyway enroll totp`: a new secret from the vault, shown once as a URI and a QR code and in base32 to type, then
    /// up to three codes until one confirms it. Nothing is saved, and the old enrollment stays, until one does.
    public func enroll(_ request: EnrollmentRequest, conversation: any Conversation) throws(AuthenticationError)
        -> [String]
    {
        guard request.label == nil else { throw AuthenticationError(.enrollmentRefused, "a totp has no named parts") }
        guard conversation.showsSecrets else {
            throw AuthenticationError(
                .notInteractive,
                "the new totp secret is shown only on a terminal, and standard error is not one here "
                    + "(a file or a log would keep it); run this on a terminal")
        }
        var secret = try vault.offer(.totp, for: request.user, by: request.actor)
        defer { secret.withUnsafeMutableBytes { secureZero($0) } }
        let key = Base32.encode(secret)
        conversation.tell(.info("Scan this code with an authenticator app, or add the key by hand:"))
        let account = request.user + (Self.hostName.map { "@\($0)" } ?? "")
        conversation.tell(.scannable(Self.uri(secret: key, user: account, issuer: issuer, digits: digits)))
        conversation.tell(.secret("Key: \(Self.grouped(key)) (time-based, \(digits) digits, every 30 seconds)"))
        for _ in 0..<3 {
            switch try conversation.ask(Prompt("Code from the app: ", echo: true)) {
            case .fallback, .cancel: throw AuthenticationError(.userCancel)
            case .secret(let code):
                do throws(AuthenticationError) {
                    try vault.enroll(.secret(code), of: .totp, for: request.user, label: nil, by: request.actor)
                    return ["The totp of \(request.user) is set: the app lists it as \(issuer) (\(account))."]
                } catch {
                    guard error.code == .enrollmentRefused else { throw error }
                    conversation.tell(.error(error.reason))
                }
            }
        }
        // The app already holds the secret under this name: say which entry will never work, so it is deleted.
        throw AuthenticationError(
            .enrollmentRefused,
            "no code confirmed the new secret, so nothing was saved (any earlier totp still works); delete the entry "
                + "\(issuer) (\(account)) the app made just now: its codes will never be accepted")
    }

    /// The key URI authenticator apps read (Google Authenticator's "Key Uri Format"): the label is the issuer and the
    /// account, and the secret base32 without padding. SHA-1, 6 digits and 30 seconds are the format's defaults, and
    /// the issuer is the label's prefix, which apps read when the `issuer` parameter is absent: all are left out, so
    /// the QR code is small enough for a 24-line terminal even for a long account and host name; 8 digits are said.
    public static func uri(secret: String, user: String, issuer: String, digits: Int) -> String {
        let label = percentEncoded(issuer) + ":" + percentEncoded(user)
        return "otpauth://totp/\(label)?secret=\(secret)" + (digits == 6 ? "" : "&digits=\(digits)")
    }

    /// `text` with everything but unreserved characters (RFC 3986) percent-encoded.
    static func percentEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// This machine's name, so that an app holding codes of several machines tells them apart.
    static var hostName: String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }

    /// The key in groups of four, as apps ask for it.
    static func grouped(_ key: String) -> String {
        var out = ""
        for (index, character) in key.enumerated() {
            if index > 0 && index % 4 == 0 { out += " " }
            out.append(character)
        }
        return out
    }
}
