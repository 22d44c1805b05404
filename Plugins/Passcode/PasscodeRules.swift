public import KeywayCore

/// What makes a passcode acceptable at enrollment: a minimum length and no commonly used passcode.
public struct PasscodeRules: Sendable, Equatable {
    /// The fewest characters accepted (6 by default, as iOS; may be raised).
    public var minimumLength: Int
    /// Whether the built-in list of common passcodes (and every run or repetition) is refused.
    public var refuseCommon: Bool

    /// Creates rules; a minimum below 6 is raised to 6 (as iOS, a shorter passcode is too guessable).
    public init(minimumLength: Int = 6, refuseCommon: Bool = true) {
        self.minimumLength = max(minimumLength, 6)
        self.refuseCommon = refuseCommon
    }

    /// The defaults.
    public static let `default` = PasscodeRules()

    /// Why `passcode` may not be enrolled, or nil when it may. Messages never contain the passcode.
    public func violation(of passcode: Secret) -> KnowledgeFactor.NormalizationError? {
        passcode.withUnsafeBytes { bytes in
            let characters = bytes.count { $0 & 0xC0 != 0x80 }  // UTF-8 scalars: count lead bytes
            if characters < minimumLength {
                return KnowledgeFactor.NormalizationError("Use at least \(minimumLength) characters.")
            }
            if refuseCommon && Self.isCommon(bytes) {
                return KnowledgeFactor.NormalizationError("That passcode is too easy to guess; choose another.")
            }
            return nil
        }
    }

    /// A run (123456, 987654, abcdef), a repetition (000000, 121212, 123123) or a listed common passcode.
    static func isCommon(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var lowered = bytes.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        defer { lowered.withUnsafeMutableBytes { secureZero($0) } }
        if lowered.count < 2 { return true }
        let steps = zip(lowered.dropFirst(), lowered).map { Int($0) - Int($1) }
        if steps.allSatisfy({ $0 == steps[0] }) && abs(steps[0]) <= 1 { return true }
        for period in 1...max(1, lowered.count / 2) where lowered.count % period == 0 {
            if lowered.indices.allSatisfy({ lowered[$0] == lowered[$0 % period] }) { return true }
        }
        return commonPasscodes.contains { $0.elementsEqual(lowered) }
    }

    /// Frequently chosen passcodes from published analyses of leaked PIN and password sets
    /// (DataGenetics 2012; Wang et al. 2017, "Understanding Human-Chosen PINs"), beyond runs and repetitions.
    static let commonPasscodes: [[UInt8]] = [
        "123321", "112233", "111222", "121314", "159753", "147258", "258456", "696969", "102030", "010203",
        "123654", "147852", "789456", "456789", "654123", "520520", "520131", "131420", "110110", "199001",
        "198712", "123000", "100200", "246810", "135790", "142536", "007007", "753951", "951753", "159357",
        "357159", "147369", "369258", "112358", "314159", "271828", "12344321", "11223344", "12341234",
        "password", "passw0rd", "qwerty", "qwertz", "azerty", "qwertyuiop", "asdfgh", "zxcvbn", "abc123",
        "iloveyou", "letmein", "monkey", "dragon", "111111a", "a123456", "123456a", "1q2w3e", "1q2w3e4r",
        "q1w2e3r4", "1qaz2wsx", "trustno1", "sunshine", "princess", "football", "baseball", "welcome",
    ].map { Array($0.utf8) }
}
