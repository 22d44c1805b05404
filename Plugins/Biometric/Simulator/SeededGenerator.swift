// Reproducible randomness for the simulated sensor: the same seed must give the same fingers and the same noise on
// every machine and every run, or measured error rates and recorded test failures could not be replayed.

/// xoshiro256** seeded through SplitMix64; deterministic, Sendable value type.
///
/// Not cryptographic: it simulates sensor noise and synthetic people, never secrets. Copying the value forks the
/// stream, which is how a caller replays a sequence.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var s0: UInt64
    private var s1: UInt64
    private var s2: UInt64
    private var s3: UInt64
    /// Marsaglia's polar method yields deviates in pairs; the second waits here.
    private var spareGaussian: Double?

    /// Expands any 64-bit seed (0 included) into a full xoshiro state via SplitMix64, as its authors recommend.
    public init(seed: UInt64) {
        var state = seed
        s0 = Self.splitMix64(&state)
        s1 = Self.splitMix64(&state)
        s2 = Self.splitMix64(&state)
        s3 = Self.splitMix64(&state)
        spareGaussian = nil
    }

    /// The next 64 uniformly distributed bits of the xoshiro256** stream.
    public mutating func next() -> UInt64 {
        let result = Self.rotateLeft(s1 &* 5, by: 7) &* 9
        let shifted = s1 &<< 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= shifted
        s3 = Self.rotateLeft(s3, by: 45)
        return result
    }

    /// A standard normal deviate (Box–Muller or Marsaglia polar; cache the spare).
    ///
    /// The polar method avoids trigonometry; it needs only a logarithm and a square root per pair.
    public mutating func nextGaussian() -> Double {
        if let spare = spareGaussian {
            spareGaussian = nil
            return spare
        }
        while true {
            // 52 random bits as the mantissa of a double in [2, 4), shifted onto [-1, 1); bit operations rather
            // than an integer-to-double conversion because this is the simulator's hot loop, even in debug builds.
            let u = Double(bitPattern: 0x4000_0000_0000_0000 | (next() &>> 12)) - 3
            let v = Double(bitPattern: 0x4000_0000_0000_0000 | (next() &>> 12)) - 3
            let s = u * u + v * v
            if s > 0 && s < 1 {
                let factor = Libm.sqrt(-2 * Libm.log(s) / s)
                spareGaussian = v * factor
                return u * factor
            }
        }
    }

    private static func splitMix64(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z &>> 31)
    }

    @inline(__always)
    private static func rotateLeft(_ x: UInt64, by k: UInt64) -> UInt64 {
        (x &<< k) | (x &>> (64 &- k))
    }
}
