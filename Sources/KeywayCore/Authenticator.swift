/// A factor plugin: the gesture, the biometric sensor, the passcode, or one of your own.
///
/// Implementation requirements:
/// - `availability` is cheap and never prompts: it is LocalAuthentication's `canEvaluatePolicy` for one factor.
/// - `authenticate` makes one attempt (one pattern, one touch) and returns `.success` only for a verified match.
///   "No" is a value (`Verdict.failure`); it throws only when the factor could not be evaluated
///   (not enrolled, locked out, cancelled, fallback chosen, store failure).
/// - Attempts are reserved in the `Store` before the secret or sample is verified (see `AttemptGate`),
///   so parallel guesses never verify more than the limit.
/// - Never put a secret in a `reason`, a message or a log.
public protocol Authenticator: AnyObject, Sendable {
    /// The factor this plugin provides (an instance property, so one plugin type can serve several factors).
    var factor: FactorKind { get }

    /// Whether the factor can be used for `user` now, without prompting.
    func availability(for user: UserContext) -> Availability

    /// Makes one attempt for `request.user`, talking to the person through `conversation`.
    func authenticate(_ request: AuthenticationRequest, conversation: any Conversation)
        throws(AuthenticationError) -> Verdict

    /// The domain state of `user`'s enrollments: an opaque value that changes with every enrollment change, as
    /// LocalAuthentication's `evaluatedPolicyDomainState`; empty when nothing is enrolled or the factor has none.
    func domainState(for user: String) throws(AuthenticationError) -> [UInt8]

    // How the factor takes part in `first of` (docs/ARCHITECTURE.md §14). Requirements with defaults rather than
    // protocols to cast to: the module's Embedded Swift has no dynamic casts to a protocol.

    /// For a factor typed at a prompt (the pattern, the passcode): its prompt, preamble and check; nil otherwise.
    var typedEntry: KnowledgeFactor? { get }
    /// What its refusals are called (its plugin's `codes`).
    var codes: FactorCodes { get }
    /// Enrolls the factor for `request.user` through `conversation` (the secret asked twice, the samples taken, the
    /// shared secret shown and confirmed), and returns the lines that tell the administrator what was done.
    func enroll(_ request: EnrollmentRequest, conversation: any Conversation) throws(AuthenticationError) -> [String]
    /// For a factor that can wait in the background (a sensor): the words inviting the person in a shared prompt,
    /// "Touch the sensor"; nil for a factor that cannot.
    var invitation: String? { get }
    /// Starts the factor waiting in the background for `request.user`, with at most `request.attemptsAllowed`
    /// counted failures, until the returned `ArmedFactor` is released. Throws when it cannot (busy, unavailable).
    func arm(_ request: AuthenticationRequest) throws(AuthenticationError) -> any ArmedFactor
}

extension Authenticator {
    /// Most factors have no domain state.
    public func domainState(for user: String) throws(AuthenticationError) -> [UInt8] { [] }
    /// Most factors are not typed at a prompt of their own making.
    public var typedEntry: KnowledgeFactor? { nil }
    public var codes: FactorCodes { FactorCodes() }
    public func enroll(_ request: EnrollmentRequest, conversation: any Conversation) throws(AuthenticationError)
        -> [String]
    {
        throw AuthenticationError(.invalidPolicy, "the \(factor) cannot be enrolled from here")
    }
    /// Most factors cannot wait in the background.
    public var invitation: String? { nil }
    public func arm(_ request: AuthenticationRequest) throws(AuthenticationError) -> any ArmedFactor {
        throw AuthenticationError(.factorNotAvailable, "the \(factor) cannot wait while another factor is asked")
    }
}

/// One factor waiting in the background during one evaluation (`first of`): a sensor armed before the prompt and
/// asked afterwards what happened. The waiting is done where the device is (keywayd listens at the sensor), so the
/// process that asks needs no thread of its own.
public protocol ArmedFactor: AnyObject {
    /// What was presented since arming, or since the last call, oldest first. Each counted failure was counted when
    /// it happened; a success is returned once (it is spent), and only within its lifetime.
    func collect() throws(AuthenticationError) -> [Verdict]
    /// Becomes readable when something was presented, for a conversation that waits on the person and the factor
    /// together (`Prompt.Wake`); nil when there is no such descriptor.
    var wakeDescriptor: Int32? { get }
    /// Stops the waiting and releases the device. Calling it again does nothing.
    func release()
    /// True when the other end of `wakeDescriptor` keeps a terminal's settings deposited with it and puts them back
    /// if this process goes without withdrawing them (keywayd, `TerminalCustody`).
    var keepsTerminalSettings: Bool { get }
    /// Waits up to `milliseconds` for the device's holder to say something was presented (`.ended` at once for a
    /// factor nothing can be waited on).
    func awaitPresentation(milliseconds: Int32) -> ArmedWait
}

/// What a wait on an armed factor saw.
public enum ArmedWait: Sendable, Equatable {
    /// Something was presented (or may have been): collect.
    case presented
    /// Nothing yet.
    case quiet
    /// The device's holder ended the lease.
    case ended
}

extension ArmedFactor {
    public var keepsTerminalSettings: Bool { false }
}

/// A presented factor's sequential wait where keywayd holds the device (`Vault.waitsAtDevices`): after the person
/// was told to present, until what `armed` saw gives a verdict or `timeout` passes; the context's cancel and the
/// person's Ctrl-C end it at once. `device` names the device in the reasons ("the sensor"), and `codes` are the
/// factor's (a wait keywayd ended without a verdict is its `notAvailable`). A function over the
/// existential, not a protocol extension with a defaulted requirement: that form ended every wait at once in the
/// module's Embedded Swift build, and trapped there with a security key (the sensor tests and sudo showed both).
public enum ArmedWaiting {
    public static func verdict(
        of armed: any ArmedFactor, within timeout: Duration, device: String, codes: FactorCodes,
        request: AuthenticationRequest, conversation: any Conversation
    ) throws(AuthenticationError) -> Verdict {
        let limit = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        var waited: Int64 = 0
        while true {
            if request.cancellation.isCancelled { throw AuthenticationError(.appCancel) }
            if conversation.personHasStopped {
                throw AuthenticationError(.userCancel, "the person stopped the wait at \(device) (Ctrl-C)")
            }
            if let verdict = try armed.collect().first { return verdict }
            guard waited < limit else {
                throw AuthenticationError(
                    .timeout, "nothing was presented to \(device) within \(timeout.spokenDescription)")
            }
            let slice = Int32(min(100, limit - waited))
            switch armed.awaitPresentation(milliseconds: slice) {
            case .quiet: waited += Int64(slice)
            case .presented: continue
            case .ended:
                // keywayd closed the lease: what it recorded is claimable once more, or it ended it with a reason.
                if let verdict = try armed.collect().first { return verdict }
                throw AuthenticationError(codes.notAvailable, "keywayd ended the wait at \(device)")
            }
        }
    }
}

/// Who is authenticating, and from where.
public struct UserContext: Sendable, Equatable {
    /// The account name.
    public var name: String
    /// The PAM service (or "keyway" for the CLI), for logs.
    public var service: String
    /// True for a remote session (PAM_RHOST set, or not on a local seat): the local sensor cannot be used.
    public var isRemote: Bool
    /// Hide whether a secret factor is enrolled: a user without one is asked like anyone else, costs the same slow
    /// hash, and is told "not recognized" (docs/ARCHITECTURE.md §5: no user enumeration). For logins, where anyone may type
    /// any user name; LocalAuthentication-style callers leave it off and get `.factorNotEnrolled` at once.
    public var concealsEnrollment: Bool
    /// The real user id of the process that started this authentication (`su bob` typed by alice: alice's), or nil
    /// when unknown. keywayd takes it from a root client (the module inside su, sudo or login reads `getuid()`) and
    /// puts a non-root client's own uid in its place; the sensor and the owner's share of the hash workers follow
    /// it (docs/ARCHITECTURE.md §10).
    public var startedBy: UInt32?

    /// Creates a user context.
    public init(
        name: String, service: String = "keyway", isRemote: Bool = false, concealsEnrollment: Bool = false,
        startedBy: UInt32? = nil
    ) {
        self.name = name
        self.service = service
        self.isRemote = isRemote
        self.concealsEnrollment = concealsEnrollment
        self.startedBy = startedBy
    }
}

/// One enrollment, as `keyway enroll` asks for it.
public struct EnrollmentRequest: Sendable {
    /// Whose factor.
    public var user: String
    /// Who enrolls it, for the audit trail ("root via keyway enroll").
    public var actor: String
    /// The named part enrolled (a finger), for a factor that has them; nil for its default.
    public var label: String?
    /// Samples come from a script instead of the device (tests and the demo; `--simulate-touches`).
    public var scripted: Bool

    /// Creates a request.
    public init(user: String, actor: String, label: String? = nil, scripted: Bool = false) {
        self.user = user
        self.actor = actor
        self.label = label
        self.scripted = scripted
    }
}

/// One request to a factor: a struct, so a new field never breaks a plugin.
public struct AuthenticationRequest: Sendable {
    /// Who is authenticating.
    public var user: UserContext
    /// Why, shown to the person ("sudo wants to run a command as root").
    public var reason: String
    /// This try's number within the evaluation for this factor, from 1 (malformed entries count as tries here).
    public var attempt: Int
    /// How many counted failures this evaluation allows for the factor.
    public var attemptsAllowed: Int
    /// The fallback to offer, or nil when the policy has none.
    public var fallbackLabel: String?
    /// Set when the context is invalidated; factors that wait (for a sensor) poll it.
    public var cancellation: CancellationFlag

    /// Creates a request.
    public init(
        user: UserContext, reason: String = "", attempt: Int = 1, attemptsAllowed: Int = 1,
        fallbackLabel: String? = nil, cancellation: CancellationFlag = CancellationFlag()
    ) {
        self.user = user
        self.reason = reason
        self.attempt = attempt
        self.attemptsAllowed = attemptsAllowed
        self.fallbackLabel = fallbackLabel
        self.cancellation = cancellation
    }
}

/// Whether a factor can be used now: the answer of `canEvaluatePolicy` for one factor.
public enum Availability: Sendable, Equatable {
    /// Ready; for a biometric, which kind.
    case available(BiometryType)
    /// Nothing enrolled for the user.
    case notEnrolled
    /// The factor cannot be used here (no sensor, unplugged, remote session), and why.
    case notAvailable(String)
    /// Locked: until a time (throttled), or until cleared (`nil`: by another factor or an administrator).
    case lockedOut(until: Timestamp?, reason: String)
    /// The factor's state could not be read (the store failed): evaluation must stop, not try another factor.
    case failed(AuthenticationError)

    /// Ready, with no biometry.
    public static let available: Availability = .available(.none)

    /// True when the factor can be used.
    public var isAvailable: Bool { if case .available = self { true } else { false } }
}

/// The answer of one attempt.
public enum Verdict: Sendable, Equatable {
    /// Verified.
    case success
    /// Not verified, and why.
    case failure(Failure)

    /// Why an attempt did not verify.
    public enum Failure: Sendable, Equatable {
        /// A wrong secret or a non-matching sample: counts as a failed attempt.
        case mismatch
        /// The same wrong secret as a recent failure: not counted again.
        case repeatedMismatch
        /// The entry was not a well-formed secret (letters in a pattern): not counted, and why.
        case malformed(String)
        /// The sensor could not read a usable sample (moved too fast, dirty, timeout): not counted, and why.
        case noSample(String)
        /// Nothing is enrolled and the user context conceals it: answered like a mismatch (never stored).
        case notEnrolled

        /// True when the failure counts against the per-evaluation attempts.
        public var countsAsAttempt: Bool {
            switch self {
            case .mismatch, .repeatedMismatch, .notEnrolled: true
            case .malformed, .noSample: false
            }
        }
    }
}
