/// A slow password hash (Argon2id in production), injected so the core knows no C.
///
/// Implementation requirements:
/// - `hash` returns a self-describing string (algorithm, parameters, salt, hash) that `verify` accepts later,
///   even after the default parameters change.
/// - `verify` runs in time that does not depend on how close the secret is, and returns a fingerprint of a wrong
///   secret derived from the slow hash's output, so fingerprints are as costly to invert as the enrollment.
/// - `burnWork` costs what one `verify` costs, for users with nothing enrolled (no enumeration by timing), and
///   returns a fingerprint of the secret in the same way, so a repeated wrong secret is recognised for them too.
/// - `quickFingerprint`, when it returns one, is a fast keyed hash of the secret and `binding` whose key never
///   leaves this process (it is made at random when the hasher is): keywayd remembers recent wrong secrets by it
///   in memory only, so a repeat is answered without the slow hash, and nothing on disk can be checked fast.
public protocol SecretHasher: AnyObject, Sendable {
    /// A fast fingerprint of `secret` bound to `binding` (the enrolled hash), under a key only this process holds;
    /// nil when the hasher offers none (then every attempt pays the slow hash).
    func quickFingerprint(_ secret: Secret, boundTo binding: [UInt8]) -> [UInt8]?
    /// A hash of a random secret made with `encoded`'s parameters, or nil when there is none to make: verifying a
    /// wrong secret against it costs exactly what verifying against `encoded` does, which is how a name without an
    /// enrollment is made to cost what an enrolled one does after a change of the cost.
    func decoy(like encoded: String) -> String?
    /// Hashes a new secret for enrollment.
    func hash(_ secret: Secret) throws(AuthenticationError) -> String
    /// Checks a secret against an enrolled hash string.
    func verify(_ secret: Secret, against encoded: String) throws(AuthenticationError) -> SecretCheck
    /// Hashes each of `secrets` (a set of recovery codes) so that `verify(_:againstSet:)` checks a secret against all
    /// of them at the cost of one verification: one salt and cost for the set.
    func hashSet(_ secrets: [Secret]) throws(AuthenticationError) -> [String]
    /// Checks a secret against hashes `hashSet` made together: which one it is, or the wrong secret's fingerprint,
    /// in time that does not depend on which (or whether) one matches.
    func verify(_ secret: Secret, againstSet encoded: [String]) throws(AuthenticationError) -> SetCheck
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

/// The result of checking a secret against a set of hashes (`SecretHasher.verify(_:againstSet:)`).
public enum SetCheck: Sendable, Equatable {
    /// The secret is the set's member at this index.
    case match(Int)
    /// The secret is none of them; the fingerprint identifies this wrong secret for this set.
    case mismatch(fingerprint: [UInt8])
}

extension SecretHasher {
    /// Each hashed alone: a check then costs one verification per member.
    public func hashSet(_ secrets: [Secret]) throws(AuthenticationError) -> [String] {
        var hashes: [String] = []
        for secret in secrets { hashes.append(try hash(secret)) }
        return hashes
    }

    /// Each verified in turn (every one, whatever matched first).
    public func verify(_ secret: Secret, againstSet encoded: [String]) throws(AuthenticationError) -> SetCheck {
        var matched: Int? = nil
        var first: [UInt8]? = nil
        for (index, hash) in encoded.enumerated() {
            switch try verify(secret, against: hash) {
            case .match: if matched == nil { matched = index }
            case .mismatch(let fingerprint): if first == nil { first = fingerprint }
            }
        }
        if let matched { return .match(matched) }
        return .mismatch(fingerprint: first ?? burnWork(secret))
    }

    /// No fast fingerprint: every attempt pays the slow hash.
    public func quickFingerprint(_ secret: Secret, boundTo binding: [UInt8]) -> [UInt8]? { nil }

    /// None: names without an enrollment pay `burnWork`.
    public func decoy(like encoded: String) -> String? { nil }
}
