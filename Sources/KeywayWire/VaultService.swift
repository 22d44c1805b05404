public import KeywayCore

/// keywayd's answers: who may ask what (the table in keywayd(8)), then the vault. Pure, so the tests and the fuzzer
/// drive exactly what the daemon runs; the daemon adds only sockets, threads and the work pool.
///
/// | request      | root | any other user                                    |
/// |--------------|------|---------------------------------------------------|
/// | availability | yes  | own account only                                  |
/// | verify       | yes  | own account only (as `unix_chkpwd`)               |
/// | change       | yes  | own pattern or passcode, with the current one     |
/// | status       | yes  | own account only                                  |
/// | enroll       | yes  | no                                                |
/// | remove       | yes  | no                                                |
/// | reset        | yes  | no                                                |
/// | audit        | yes  | no                                                |
///
/// A refused request never reaches the vault, so it costs the named user no attempt.
public struct VaultService: Sendable {
    /// Who asked, as the kernel vouches for it.
    public struct Caller: Sendable, Equatable {
        /// The effective user id at connection time.
        public var uid: UInt32
        /// That user's account name, or nil when the id has none.
        public var name: String?

        /// Creates a caller.
        public init(uid: UInt32, name: String?) {
            self.uid = uid
            self.name = name
        }

        /// Root may do everything.
        public var isRoot: Bool { uid == 0 }
        /// True when `user` is this caller's own account name, byte for byte (Swift's `==` would also equate
        /// canonically equivalent spellings, which are different accounts).
        public func owns(_ user: String?) -> Bool {
            guard let user, let name else { return false }
            return Array(user.utf8) == Array(name.utf8)
        }

        /// How the caller is named in the audit trail and logs.
        public var label: String { name.map { "\($0.escapingControlCharacters)" } ?? "uid \(uid)" }
    }

    /// The state.
    public let vault: any Vault

    /// Creates the service.
    public init(vault: any Vault) { self.vault = vault }

    /// Why `caller` may not make `request`, or nil when it may.
    public static func refusal(of request: Request, by caller: Caller) -> String? {
        if caller.isRoot { return nil }
        let own = caller.owns(request.user)
        switch request {
        case .availability, .verify, .status(.some):
            return own ? nil : "\(caller.label) may only ask about their own account"
        case .change(let factor, _, _, _, _):
            guard own else { return "\(caller.label) may only change their own factors" }
            return factor == .gesture || factor == .passcode ? nil : "only a pattern or passcode can be changed"
        case .status(nil):
            return "only root may list every user"
        case .enroll, .remove, .reset, .audit:
            return "only root may \(request.name)"
        }
    }

    /// True for requests that run the slow hash, which keywayd runs on its bounded pool.
    public static func isSlow(_ request: Request) -> Bool {
        switch request {
        case .verify, .enroll, .change: true
        default: false
        }
    }

    /// What a client calls itself, as the audit trail may record it: printable ASCII only, at most 64 bytes, so no
    /// client can store a record that other answers cannot carry, or hide text behind control or bidi characters.
    public static func toolName(_ via: String) -> String {
        let kept = via.unicodeScalars.filter { (0x20...0x7E).contains($0.value) }.prefix(64)
        return kept.isEmpty ? "an unnamed tool" : String(String.UnicodeScalarView(kept))
    }

    /// Answers one request from `caller`.
    public func answer(_ request: Request, from caller: Caller) -> Response {
        if let refusal = Self.refusal(of: request, by: caller) {
            return .failure(AuthenticationError(.notPermitted, refusal))
        }
        if let user = request.user, let problem = UserContext.nameProblem(user) {
            return .failure(AuthenticationError(.invalidUserName, problem))
        }
        func actor(_ via: String) -> String { "\(caller.label) via \(Self.toolName(via))" }
        do {
            switch request {
            case .availability(let factor, let user):
                return .availability(vault.availability(of: factor, for: user))
            case .verify(let factor, let user, let evidence):
                return .verdict(try vault.verify(evidence, of: factor, for: user))
            case .enroll(let factor, let user, let label, let evidence, let via):
                try vault.enroll(evidence, of: factor, for: user, label: label, by: actor(via))
                return .done
            case .change(let factor, let user, let current, let new, let via):
                try vault.change(current, to: new, of: factor, for: user, by: actor(via))
                return .done
            case .remove(let factor, let user, let label, let via):
                return .removed(try vault.remove(factor, of: user, label: label, by: actor(via)))
            case .status(let user):
                return .status(try vault.status(of: user))
            case .reset(let factor, let user, let via):
                try vault.reset(factor, of: user, by: actor(via))
                return .done
            case .audit(let user):
                return .audit(try vault.audit(of: user))
            }
        } catch {
            return .failure(error)
        }
    }
}
