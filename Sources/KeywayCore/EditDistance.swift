/// How far apart two words are, for "did you mean" suggestions: the configuration's unknown keys and values
/// (KeywayConfig) and the command line's unknown commands and options (`keyway`) rank near misses the same way.
public enum EditDistance {
    /// Edits (insert, delete, replace, and a swap of two neighbours, so "lcoal" is one from "local") between the
    /// UTF-8 bytes of `a` and `b`; inputs longer than 64 bytes are as far as the longer one is long.
    public static func between(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        if a.count > 64 || b.count > 64 { return max(a.count, b.count) }
        var before = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], before[j - 2] + 1)
                }
            }
            (before, previous, current) = (previous, current, before)
        }
        return previous[b.count]
    }

    /// The same between two strings.
    public static func between(_ a: String, _ b: String) -> Int { between(Array(a.utf8), Array(b.utf8)) }
}
