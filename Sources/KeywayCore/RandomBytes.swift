/// `count` bytes from the system's generator (`SystemRandomNumberGenerator`: getrandom(2) on Linux), for secrets,
/// nonces and challenges. Keepers take a generator of this shape so tests can pass their own; this is the default
/// every one of them uses.
public func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
}
