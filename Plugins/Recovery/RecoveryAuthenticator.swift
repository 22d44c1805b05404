public import KeywayCore

/// The person's side of recovery codes: a code typed at a prompt where a policy names `recovery`
/// (`require = totp or recovery`), and the enrollment that shows a new set of ten once and saves it only when one of
/// them is typed back, so a set nobody wrote down never replaces the one they have.
public final class RecoveryAuthenticator: TypedAuthenticator {
    /// The prompt and the vault's check.
    public let knowledge: KnowledgeFactor
    /// Where the codes are made and kept.
    public let vault: any Vault

    /// Creates the factor over a vault (keywayd's, or a local one).
    public init(vault: any Vault) {
        self.vault = vault
        knowledge = KnowledgeFactor(
            factor: .recovery, promptText: "Recovery code: ", normalize: RecoveryCode.normalize, vault: vault)
    }

    /// One code, asked by its number: "Recovery code 3: ", the lowest the account has not used (NIST SP 800-63B-4's
    /// look-up secrets; the vault checks that code alone). Where enrollment is concealed the number would tell that
    /// the name has codes, and how many were used, so the prompt asks for the next one on the person's list without
    /// a number; a set made before numbering takes any of its codes.
    public func authenticate(_ request: AuthenticationRequest, conversation: any Conversation)
        throws(AuthenticationError) -> Verdict
    {
        try knowledge.authenticate(request, conversation: conversation, prompt: prompt(for: request.user))
    }

    /// The prompt for `user`: the next code's number when it may be told.
    func prompt(for user: UserContext) -> String {
        guard !user.concealsEnrollment else { return Self.nextPrompt }
        guard let next = (try? vault.status(of: user.name))?.first?[.recovery]?.nextUse else {
            return "Recovery code: "
        }
        return "Recovery code \(next): "
    }

    /// The prompt where the number is not told.
    static var nextPrompt: String { "Recovery code (the next unused on your list): " }

    /// `keyway enroll recovery`: ten new codes from the vault, shown once, then up to three tries at typing one back.
    /// Nothing is saved, and the old set keeps working, until one is.
    public func enroll(_ request: EnrollmentRequest, conversation: any Conversation) throws(AuthenticationError)
        -> [String]
    {
        guard request.label == nil else {
            throw AuthenticationError(.enrollmentRefused, "recovery codes have no named parts")
        }
        guard conversation.showsSecrets else {
            throw AuthenticationError(
                .notInteractive,
                "new recovery codes are shown only on a terminal, and standard error is not one here "
                    + "(a file or a log would keep them); run this on a terminal")
        }
        var codes = try vault.offer(.recovery, for: request.user, by: request.actor)
        defer { codes.withUnsafeMutableBytes { secureZero($0) } }
        let lines = codes.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) }
        conversation.tell(
            .info(
                "Recovery codes for \(request.user): each lets you in once where a policy accepts recovery, asked "
                    + "for by its number, in order.\n"
                    + "Keep them somewhere safe (printed, or in a password manager): they are shown only now."))
        var numbered: [String] = []
        for (index, line) in lines.enumerated() {
            numbered.append("\(index < 9 ? " " : "")\(index + 1). \(line)")
        }
        conversation.tell(.secret(numbered.joined(separator: "\n")))
        var problem: AuthenticationError? = nil
        for _ in 0..<3 {
            switch try conversation.ask(Prompt("Type one of them to show you kept them: ", echo: true)) {
            case .fallback, .cancel: throw AuthenticationError(.userCancel)
            case .secret(let code):
                do throws(AuthenticationError) {
                    try vault.enroll(.secret(code), of: .recovery, for: request.user, label: nil, by: request.actor)
                    return [
                        "\(lines.count) recovery codes of \(request.user) are set (the one typed still works);\n"
                            + "any earlier codes no longer do."
                    ]
                } catch {
                    guard error.code == .enrollmentRefused else { throw error }
                    conversation.tell(.error(error.reason))
                    problem = error
                }
            }
        }
        throw problem
            ?? AuthenticationError(.enrollmentRefused, "no code was typed back; the earlier codes still work")
    }
}
