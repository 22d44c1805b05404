/// A slow password hash (Argon2id in production), injected so the core knows no C.
///
/// Implementation requirements:
/// - `hash` returns a self-describing string (algorithm, parameters, salt, hash) that `verify` accepts later,
///   even after the default parameters change.
/// - `verify` runs in time that does not depend on how close the secret is, and returns a fingerprint of a wrong
///   secret derived from the slow hash's output, so fingerprints are as costly to invert as the enrollment.
/// - `burnWork` costs what one `verify` costs, for users with nothing enrolled (no enumeration by timing), and
///   returns a fingerprint of the secret in the same way, so a repeated wrong secret is recognised for them too.
public protocol SecretHasher: AnyObject, Sendable {
    /// Hashes a new secret for enrollment.
    func hash(_ secret: Secret) throws(AuthenticationError) -> String
    /// Checks a secret against an enrolled hash string.
    func verify(_ secret: Secret, against encoded: String) throws(AuthenticationError) -> SecretCheck
    /// Spends the work of one verification without an enrollment; returns the secret's fingerprint.
    @discardableResult
    func burnWork(_ secret: Secret) -> [UInt8]
}

/// The result of checking a secret against a hash.
public enum SecretCheck: Sendable, Equatable {
    /// The secret is the enrolled one.
    case match
    /// The secret is wrong; the fingerprint identifies this wrong secret for this enrollment.
    case mismatch(fingerprint: [UInt8])
}
