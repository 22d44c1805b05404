public import KeywayCore

/// What a recovery code is: 12 characters of `ReadableCode`'s alphabet (59 bits), written in three groups of four
/// (`k7m2-x9pq-4rtw`).
public enum RecoveryCode {
    /// The characters a code is made of.
    public static var alphabet: [UInt8] { ReadableCode.alphabet }
    /// Characters in a code.
    public static let length = 12
    /// Codes in a set.
    public static let setSize = 10
    /// The form.
    static let form = ReadableCode(length: length)

    /// `count` distinct codes.
    public static func generate(_ count: Int, random: (Int) -> [UInt8]) -> [[UInt8]] {
        form.generate(count, random: random)
    }

    /// The code as it is written: three groups of four, joined by hyphens.
    public static func written(_ code: [UInt8]) -> String { form.written(code) }

    /// The canonical code in what was typed, or why it is not one.
    public static let normalize: KnowledgeFactor.Normalizer = { entered in
        guard let canonical = form.canonical(entered) else {
            return .failure(.init("A recovery code is 12 letters and digits, as written: xxxx-xxxx-xxxx."))
        }
        return .success(canonical)
    }
}
