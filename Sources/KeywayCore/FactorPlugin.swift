/// A factor plugin as data: its name, what it is, the settings it declares, and how to build its two halves — the
/// person's side (`Authenticator`, in the PAM module and the CLI) and the vault's side (`FactorKeeper`, in keywayd).
///
/// The set of factors is a list of these, kept in one place (`Factors.all`); the configuration parser, the CLI,
/// keywayd and keyway.conf(5) all read that list, so a new factor is one more entry (docs/ARCHITECTURE.md §11).
public struct FactorPlugin: Sendable {
    /// What the person's side is built from.
    public struct PersonSide: Sendable {
        /// Where the state is kept and secrets checked.
        public var vault: any Vault
        /// The factor's settings (global, overlaid with the policy's).
        public var settings: FactorSettings
        /// The simulated sensor's control directory, and the owner it must have.
        public var sensorDirectory: String
        public var sensorOwner: UInt32

        /// Creates the inputs.
        public init(vault: any Vault, settings: FactorSettings, sensorDirectory: String, sensorOwner: UInt32) {
            self.vault = vault
            self.settings = settings
            self.sensorDirectory = sensorDirectory
            self.sensorOwner = sensorOwner
        }
    }

    /// What the vault's side is built from.
    public struct VaultSide: Sendable {
        /// The store, the clock and the slow hash.
        public var store: any Store
        public var clock: any Clock
        public var hasher: any SecretHasher
        /// The factor's global settings.
        public var settings: FactorSettings
        /// Device backends the composition offers by name (keywayd's fprintd client as "fprintd"): a plugin whose
        /// settings choose a backend takes it from here. Empty in every process but keywayd.
        public var devices: [String: any DeviceBackend]

        /// Creates the inputs.
        public init(
            store: any Store, clock: any Clock, hasher: any SecretHasher, settings: FactorSettings,
            devices: [String: any DeviceBackend] = [:]
        ) {
            self.store = store
            self.clock = clock
            self.hasher = hasher
            self.settings = settings
            self.devices = devices
        }
    }

    /// The factor.
    public let kind: FactorKind
    /// How it is enrolled, which also says whether its owner may change it (a chosen secret only).
    public let enrollment: EnrollmentKind
    /// What its refusals are called (LocalAuthentication's codes for the biometric and the passcode).
    public let codes: FactorCodes
    /// What people call the device it is presented to ("sensor"), for a presented factor; nil for a typed one.
    public let device: String?
    /// What one of its named parts is called ("finger"), for a factor enrolled in parts (`--name`); nil for one
    /// secret.
    public let part: String?
    /// How `keyway enroll` enrolls it, one sentence for `keyway enroll --help`.
    public let enrollmentHelp: String
    /// Other names the command line accepts for it (`pattern` for the gesture).
    public let aliases: [String]
    /// One line: what it is.
    public let summary: String
    /// How the person gives the factor.
    public let input: Input
    /// The settings it declares (keys of its `[factor]` section).
    public let settings: [Setting]
    /// The per-user switches it has: `enabled`, then those it declares.
    public let userSettings: [UserSetting]
    /// What the conformance run enrolls and presents (Tests/KeywayWireTests/FactorConformanceTests.swift).
    public let specimen: Specimen
    /// How keywayd arms its device, for a presented factor; nil for a typed one.
    public let arming: Arming?
    /// Whether it can serve a remote session with these settings (a local sensor cannot).
    public let servesRemoteSessions: @Sendable (FactorSettings) -> Bool
    /// Builds the person's side.
    public let personSide: @Sendable (PersonSide) -> any Authenticator
    /// Builds the vault's side.
    public let vaultSide: @Sendable (VaultSide) -> any FactorKeeper
    /// How its record splits into the parts a use changes (uses left, a counter), for a factor whose records are
    /// spent; nil for one whose uses change nothing in its record.
    public let spendable: SpendableLayout?
    /// Its part of a fleet's database schema, for a factor checked inside the database (TOTP); nil for the rest.
    /// Made when asked (`keyway store migrate`), not with the plugin: the module builds its plugins on every call.
    public let database: (@Sendable () -> DatabaseSchema)?

    /// How a factor is enrolled.
    public enum EnrollmentKind: Sendable, Equatable {
        /// A secret the person chooses, asked twice; its owner may change it by giving the current one.
        case chosenSecret
        /// Made at the device, under a label: a finger from its touches, a security key's credential.
        case atDevice
        /// A secret keywayd generates and shows once (`Vault.offer`), confirmed with one code before it is saved.
        /// Its owner may enroll a new one after verifying a factor of the account (`VaultService.selfService`).
        case sharedSecret
    }

    /// True when a user may change their own enrollment (`keyway change`), giving the current secret first.
    public var changeable: Bool {
        switch enrollment {
        case .chosenSecret: true
        case .atDevice, .sharedSecret: false
        }
    }

    /// How the person gives the factor: typed at a prompt, or presented to a device that can wait in the
    /// background. `first of` waits for one typed factor at most, beside any number of presented ones.
    public enum Input: Sendable, Equatable {
        /// Typed at a prompt (the pattern, the passcode).
        case typed
        /// Presented to a device (a finger, a face), which can wait while a prompt does.
        case presented
    }

    /// Declares a plugin.
    public init(
        _ kind: FactorKind, aliases: [String] = [], summary: String, input: Input = .typed,
        enrollment: EnrollmentKind = .chosenSecret, part: String? = nil, enrollmentHelp: String,
        codes: FactorCodes = FactorCodes(), device: String? = nil,
        settings: [Setting], userSettings: [UserSetting] = [], specimen: Specimen, arming: Arming? = nil,
        servesRemoteSessions: @escaping @Sendable (FactorSettings) -> Bool = { _ in true },
        spendable: SpendableLayout? = nil, database: (@Sendable () -> DatabaseSchema)? = nil,
        personSide: @escaping @Sendable (PersonSide) -> any Authenticator,
        vaultSide: @escaping @Sendable (VaultSide) -> any FactorKeeper
    ) {
        self.spendable = spendable
        self.database = database
        self.kind = kind
        self.enrollment = enrollment
        self.part = part
        self.enrollmentHelp = enrollmentHelp
        self.codes = codes
        self.device = device
        self.aliases = aliases
        self.summary = summary
        self.input = input
        self.settings = settings
        self.userSettings = [UserSetting.enabled(kind)] + userSettings
        self.arming = arming
        self.specimen = specimen
        self.servesRemoteSessions = servesRemoteSessions
        self.personSide = personSide
        self.vaultSide = vaultSide
    }

    /// A factor's own examples, which one conformance run drives every entry of `Factors.all` with: a factor cannot
    /// be listed without them, so none goes unchecked (docs/ARCHITECTURE.md §11).
    public struct Specimen: Sendable {
        /// Evidence the enrolled user's presentation verifies with once, now, and evidence that never does.
        public struct Presentations: Sendable {
            public var right: Evidence
            public var wrong: Evidence

            /// Creates the pair.
            public init(right: Evidence, wrong: Evidence) {
                self.right = right
                self.wrong = wrong
            }
        }

        /// Enrolls `user` through the vault as an administrator would (for a shared secret, an offer and the code
        /// that confirms it, at the clock's time), and returns the presentations.
        public var enroll:
            @Sendable (_ vault: any Vault, _ user: String, _ clock: any Clock) throws(AuthenticationError)
                -> Presentations

        /// Declares the examples.
        public init(
            enroll:
                @escaping @Sendable (_ vault: any Vault, _ user: String, _ clock: any Clock) throws(AuthenticationError)
                -> Presentations
        ) {
            self.enroll = enroll
        }

        /// A typed secret: `right` is enrolled as it is typed.
        public static func typed(_ right: String, wrong: String, of factor: FactorKind) -> Specimen {
            Specimen { vault, user, _ throws(AuthenticationError) in
                let typed = Evidence.secret(Secret(copying: Array(right.utf8)))
                try vault.enroll(typed, of: factor, for: user, label: nil, by: "conformance")
                return Presentations(right: typed, wrong: .secret(Secret(copying: Array(wrong.utf8))))
            }
        }
    }

    /// The declared setting named `key`.
    public func setting(_ key: String) -> Setting? { settings.first { $0.key == key } }
}

extension Array where Element == FactorPlugin {
    /// The plugin for `kind`, if any.
    public func plugin(_ kind: FactorKind) -> FactorPlugin? { first { $0.kind == kind } }

    /// The codes `kind` declares; Keyway's own for a factor not in the list.
    public func codes(of kind: FactorKind) -> FactorCodes { plugin(kind)?.codes ?? FactorCodes() }

    /// The factors a user may change.
    public var changeable: [FactorKind] { filter { $0.changeable }.map { $0.kind } }

    /// Every per-user switch of every plugin.
    public var userSettings: [UserSetting] { flatMap { $0.userSettings } }

    /// The per-user switch `word` names: its full key (`gesture.show-trail`), or its name alone when only one
    /// factor has it (`show-trail`).
    public func userSetting(named word: String) -> UserSetting? {
        let all = userSettings
        if let exact = all.first(where: { $0.key == word }) { return exact }
        let named = all.filter { $0.name == word }
        return named.count == 1 ? named[0] : nil
    }

    /// The plugin a command-line word names (its factor name or an alias).
    public func plugin(named word: String) -> FactorPlugin? {
        first { $0.kind.rawValue == word || $0.aliases.contains(word) }
    }
}
