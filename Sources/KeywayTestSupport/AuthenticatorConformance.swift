public import KeywayCore

/// Checks every factor plugin must pass; each plugin's tests run it with the plugin's own enrollment.
///
/// Returns the problems found, so a test reads `#expect(AuthenticatorConformance.check(...).isEmpty)`.
public enum AuthenticatorConformance {
    /// How to drive the plugin under test.
    public struct Subject<Plugin: Authenticator> {
        /// The plugin, over `store`.
        public var plugin: Plugin
        /// The store the plugin uses.
        public var store: any Store
        /// Enrolls `user` (directly, as an administrator would).
        public var enroll: (String) throws -> Void
        /// Sets up one attempt of the given kind (answers to type, a sensor to arm) and returns the conversation.
        public var arrange: (Scenario) -> ScriptedConversation

        /// Creates a subject.
        public init(
            plugin: Plugin, store: any Store, enroll: @escaping (String) throws -> Void,
            arrange: @escaping (Scenario) -> ScriptedConversation
        ) {
            self.plugin = plugin
            self.store = store
            self.enroll = enroll
            self.arrange = arrange
        }
    }

    /// The kinds of attempt a subject must be able to stage.
    public enum Scenario: Sendable {
        /// The enrolled secret or a genuine sample.
        case correct
        /// A wrong secret or an impostor sample.
        case wrong
        /// The person cancels.
        case cancel
    }

    /// Runs the checks; the user names `conformance-*` must be unused in the store.
    public static func check<Plugin: Authenticator>(_ subject: Subject<Plugin>) -> [String] {
        var problems: [String] = []
        let plugin = subject.plugin
        let stranger = UserContext(name: "conformance-stranger")
        let user = UserContext(name: "conformance-user")

        if plugin.availability(for: stranger) != .notEnrolled {
            problems.append("an unenrolled user must be .notEnrolled, got \(plugin.availability(for: stranger))")
        }
        switch Result(catching: { () throws(AuthenticationError) in
            try plugin.authenticate(AuthenticationRequest(user: stranger), conversation: subject.arrange(.wrong))
        }) {
        case .success(let verdict): problems.append("an unenrolled user must throw, got verdict \(verdict)")
        case .failure(let error):
            let expected: Set<AuthenticationError.Code> = [.biometryNotEnrolled, .passcodeNotSet, .factorNotEnrolled]
            if !expected.contains(error.code) { problems.append("an unenrolled user threw \(error.code)") }
        }
        do { try subject.enroll(user.name) } catch {
            problems.append("enrollment failed: \(error)")
            return problems
        }
        if !plugin.availability(for: user).isAvailable {
            problems.append("an enrolled user must be available, got \(plugin.availability(for: user))")
        }
        let right = Result { () throws(AuthenticationError) in
            try plugin.authenticate(AuthenticationRequest(user: user), conversation: subject.arrange(.correct))
        }
        if right != .success(.success) { problems.append("the correct answer must succeed, got \(right)") }
        let wrong = Result { () throws(AuthenticationError) in
            try plugin.authenticate(AuthenticationRequest(user: user), conversation: subject.arrange(.wrong))
        }
        if case .success(.failure(.mismatch)) = wrong {
        } else {
            problems.append("a wrong answer must be a counted mismatch, got \(wrong)")
        }
        if (try? subject.store.attempts(user: user.name)[plugin.factor].consecutiveFailures) != 1 {
            problems.append("a wrong answer must be counted in the store exactly once")
        }
        let cancelled = Result { () throws(AuthenticationError) in
            try plugin.authenticate(AuthenticationRequest(user: user), conversation: subject.arrange(.cancel))
        }
        if cancelled != .failure(AuthenticationError(.userCancel)) {
            problems.append("a cancel must throw .userCancel, got \(cancelled)")
        }
        return problems
    }
}
