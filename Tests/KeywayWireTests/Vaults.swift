import KeywayCore
import KeywayCrypto
import KeywayGesture
import KeywayPasscode
import KeywayTestSupport

/// A vault over `store` keeping the pattern and the passcode, hashed at the cheapest Argon2id cost.
func patternAndPasscodeVault(_ store: InMemoryStore, clock: ManualClock = ManualClock()) throws -> LocalVault {
    let hasher = try Argon2idHasher(cost: .minimum)
    return LocalVault(
        store: store, clock: clock,
        keepers: [
            GestureAuthenticator.keeper(store: store, clock: clock, hasher: hasher),
            PasscodeAuthenticator.keeper(store: store, clock: clock, hasher: hasher),
        ])
}
