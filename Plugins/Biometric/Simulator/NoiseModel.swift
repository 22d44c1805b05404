// The simulated sensor's statistics: how much noise a finger gets so that the configured false-match and
// false-non-match rates are not just labels but properties a test can measure.
//
// Model (d even, k enrolment samples):
//   identity x ~ N(0, I_d)          — derived from (seed, user, finger), so a person always presents the same finger
//   sample   s = x + N(0, σ² I_d)   — noise from the caller's generator, i.e. the simulated sensor
//   template t = mean of k samples = x + N(0, σ²/k I_d)
//   genuine:  s − t ~ N(0, v I_d), v = σ²(1 + 1/k)       so ‖s − t‖²/v       ~ χ²_d
//   impostor: s − t ~ N(0, (2 + v) I_d)                  so ‖s − t‖²/(2 + v) ~ χ²_d
//   score = −log10 F_χ²_d(‖s − t‖²/(2 + v)), match iff score ≥ −log10(FMR)  ⇒  the FMR is exact by construction.
//   With q_a = F⁻¹(FMR) and q_b = F⁻¹(1 − FNMR), the FNMR is exact when (2 + v) q_a = v q_b, which fixes σ.

/// Why a noise model, template or enrolment was refused; the description names the value and the reason.
public struct NoiseModelError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Human-readable, meant for logs and configuration diagnostics.
    public var description: String

    init(_ description: String) {
        self.description = description
    }
}

/// The simulated biometric's statistics: noise derived from the configured error rates, and the matcher's score.
public struct NoiseModel: Sendable, Equatable {
    /// d, the feature-space dimension; even, because the χ² CDF has a closed form for even degrees of freedom.
    public let dimensions: Int
    /// k, how many samples an enrolment averages; more samples make a less noisy template.
    public let enrollmentSamples: Int
    /// The configured probability that an impostor's sample matches; met exactly by the threshold.
    public let targetFalseMatchRate: Double
    /// The configured probability that a genuine sample fails; met by the choice of `noiseSigma`.
    public let targetFalseNonMatchRate: Double
    /// σ, the per-component standard deviation of sensor noise, derived so that the FNMR comes out as configured.
    public let noiseSigma: Double
    /// −log10(targetFalseMatchRate): a score is "orders of magnitude of impostor improbability".
    public let threshold: Double
    /// σ², kept to avoid squaring on every comparison.
    private let noiseVariance: Double

    /// Scores are clamped here: beyond it the impostor tail underflows and "closer" no longer means anything.
    public static let maximumScore: Double = 99

    /// Feature spaces beyond this are refused as silly; it also bounds what a decoded template may claim.
    static let maximumDimensions = Template.maximumDimensions

    /// Derives σ from the target rates; throws, naming the value, when no σ can meet them or the input is silly.
    public init(
        dimensions: Int = 32, enrollmentSamples: Int = 5,
        falseMatchRate: Double = 1.0 / 50_000, falseNonMatchRate: Double = 0.02
    ) throws(NoiseModelError) {
        guard dimensions >= 2 else {
            throw NoiseModelError(
                "dimensions must be at least 2 (got \(dimensions)): a feature space needs "
                    + "at least one pair of coordinates")
        }
        guard dimensions % 2 == 0 else {
            throw NoiseModelError(
                "dimensions must be even (got \(dimensions)): scoring uses the closed-form χ² "
                    + "CDF, which exists for even degrees of freedom only")
        }
        guard dimensions <= Self.maximumDimensions else {
            throw NoiseModelError(
                "dimensions must be at most \(Self.maximumDimensions) (got \(dimensions)): "
                    + "larger feature spaces only cost time and storage")
        }
        guard enrollmentSamples >= 1 else {
            throw NoiseModelError(
                "enrollmentSamples must be at least 1 (got \(enrollmentSamples)): a template "
                    + "is the mean of its enrolment samples")
        }
        guard falseMatchRate > 0, falseMatchRate < 0.5 else {
            throw NoiseModelError(
                "falseMatchRate must be in (0, 0.5) (got \(falseMatchRate)): 0 cannot be "
                    + "met by any noise, and a matcher accepting half of all impostors is no authenticator")
        }
        guard falseNonMatchRate > 0, falseNonMatchRate < 0.5 else {
            throw NoiseModelError(
                "falseNonMatchRate must be in (0, 0.5) (got \(falseNonMatchRate)): 0 would "
                    + "need a noiseless sensor, and rejecting half of all genuine attempts is no authenticator")
        }
        let threshold = -Libm.log(falseMatchRate) / Libm.ln10
        guard threshold < Self.maximumScore else {
            throw NoiseModelError(
                "falseMatchRate \(falseMatchRate) is below 1e-\(Int(Self.maximumScore)): "
                    + "scores are clamped there, so nothing could ever match")
        }
        let impostorQuantile = ChiSquared.quantile(falseMatchRate, degreesOfFreedom: dimensions)
        let genuineQuantile = ChiSquared.quantile(1 - falseNonMatchRate, degreesOfFreedom: dimensions)
        guard impostorQuantile > 0, genuineQuantile > impostorQuantile, genuineQuantile.isFinite else {
            throw NoiseModelError(
                "falseMatchRate \(falseMatchRate) with falseNonMatchRate \(falseNonMatchRate) "
                    + "leaves no noise level: the χ²_\(dimensions) quantiles are q_a = \(impostorQuantile) and "
                    + "q_b = \(genuineQuantile), but q_b must exceed q_a > 0")
        }
        // (2 + v) q_a = v q_b  ⇔  v = 2 q_a / (q_b − q_a); v is the genuine difference variance σ²(1 + 1/k).
        let genuineVariance = 2 * impostorQuantile / (genuineQuantile - impostorQuantile)
        let variance = genuineVariance / (1 + 1 / Double(enrollmentSamples))
        guard variance.isFinite, variance > 0 else {
            throw NoiseModelError(
                "falseMatchRate \(falseMatchRate) with falseNonMatchRate \(falseNonMatchRate) "
                    + "gives a noise variance of \(variance), which no sensor can have")
        }
        self.dimensions = dimensions
        self.enrollmentSamples = enrollmentSamples
        self.targetFalseMatchRate = falseMatchRate
        self.targetFalseNonMatchRate = falseNonMatchRate
        self.noiseVariance = variance
        self.noiseSigma = Libm.sqrt(variance)
        self.threshold = threshold
    }

    /// Touch ID's published figures (FMR 1 in 50,000) with a 2% FNMR, 32 dimensions and 5 enrolment samples.
    public static let `default`: NoiseModel = {
        do throws(NoiseModelError) {
            return try NoiseModel()
        } catch {
            // The defaults are constants checked by the tests; reaching this is a programming error.
            fatalError("NoiseModel's default configuration is invalid: \(error.description)")
        }
    }()

    /// The finger or face of `user` named `finger`: the same inputs give the same vector on every run and machine.
    ///
    /// The inputs are hashed with FNV-1a 64, each string prefixed by its UTF-8 length so that ("ab", "c") and
    /// ("a", "bc") differ, and the hash seeds a private generator. Strings are compared as UTF-8 bytes, without
    /// Unicode normalisation, like Linux user names.
    public func identity(seed: UInt64, user: String, finger: String) -> FeatureVector {
        var hash = FNV1a64()
        hash.combine(seed)
        hash.combine(user)
        hash.combine(finger)
        var generator = SeededGenerator(seed: hash.value)
        return randomIdentity(using: &generator)
    }

    /// A fresh identity drawn from the population, i.e. an impostor for any enrolled template.
    public func randomIdentity(using g: inout SeededGenerator) -> FeatureVector {
        var components = [Double](repeating: 0, count: dimensions)
        components.withUnsafeMutableBufferPointer { buffer in
            var index = 0
            while index < buffer.count {  // `while`, not `for … in`: the iterator is slow in debug builds
                buffer[index] = g.nextGaussian()
                index += 1
            }
        }
        return FeatureVector(components: components)
    }

    /// One presentation of `identity` to the sensor: the identity plus N(0, σ²) noise in every component.
    public func sample(of identity: FeatureVector, using g: inout SeededGenerator) -> FeatureVector {
        var components = identity.components
        let sigma = noiseSigma
        components.withUnsafeMutableBufferPointer { buffer in
            var index = 0
            while index < buffer.count {
                buffer[index] += sigma * g.nextGaussian()
                index += 1
            }
        }
        return FeatureVector(components: components)
    }

    /// The template of `samples`: their mean, remembering how many were averaged.
    ///
    /// Throws rather than trapping, because enrolment input comes from outside: an empty list, a sample whose
    /// dimension is not `dimensions`, or a non-finite component is refused. Any count ≥ 1 is accepted; the
    /// score accounts for the actual count, so the FMR stays exact even when it differs from `enrollmentSamples`.
    public func enroll(_ samples: [FeatureVector]) throws(NoiseModelError) -> Template {
        guard !samples.isEmpty else {
            throw NoiseModelError("enrolment needs at least one sample (got none)")
        }
        var sum = [Double](repeating: 0, count: dimensions)
        for (position, sample) in samples.enumerated() {
            guard sample.components.count == dimensions else {
                throw NoiseModelError(
                    "enrolment sample \(position) has \(sample.components.count) dimensions, "
                        + "the model has \(dimensions)")
            }
            let allFinite = sum.withUnsafeMutableBufferPointer { total in
                sample.components.withUnsafeBufferPointer { values in
                    var finite = true
                    var index = 0
                    while index < total.count {
                        finite = finite && values[index].isFinite
                        total[index] += values[index]
                        index += 1
                    }
                    return finite
                }
            }
            guard allFinite else {
                throw NoiseModelError("enrolment sample \(position) has a non-finite component")
            }
        }
        let scale = 1 / Double(samples.count)
        sum.withUnsafeMutableBufferPointer { total in
            var index = 0
            while index < total.count {
                total[index] *= scale
                index += 1
            }
        }
        return Template(mean: FeatureVector(components: sum), sampleCount: samples.count)
    }

    /// −log10 of the chance that an impostor's sample comes at least this close: orders of magnitude, higher is
    /// better, in [0, `maximumScore`].
    ///
    /// Fails closed: a sample or template of the wrong dimension, a template with no samples, or non-finite
    /// values score 0 and never match. The template's own `sampleCount` sets its noise, keeping the FMR exact
    /// for templates enrolled with a different k.
    public func score(_ sample: FeatureVector, against template: Template) -> Double {
        let count = dimensions
        guard sample.components.count == count, template.mean.components.count == count,
            template.sampleCount >= 1
        else {
            return 0
        }
        var squaredDistance = 0.0
        sample.components.withUnsafeBufferPointer { probe in
            template.mean.components.withUnsafeBufferPointer { mean in
                var index = 0
                while index < count {
                    let difference = probe[index] - mean[index]
                    squaredDistance += difference * difference
                    index += 1
                }
            }
        }
        guard !squaredDistance.isNaN else { return 0 }
        let genuineVariance = noiseVariance * (1 + 1 / Double(template.sampleCount))
        let logProbability = ChiSquared.logCDF(squaredDistance / (2 + genuineVariance), degreesOfFreedom: count)
        let score = -logProbability / Libm.ln10
        if score.isNaN { return 0 }
        return min(max(score, 0), Self.maximumScore)
    }

    /// Whether the sample is accepted: its score reaches −log10(FMR), so impostors pass with probability FMR.
    public func matches(_ sample: FeatureVector, against template: Template) -> Bool {
        score(sample, against: template) >= threshold
    }

    /// The probability that an impostor's sample matches at `threshold` instead of `self.threshold`: 10^−threshold
    /// exactly, since the score is −log10 of the impostor's own CDF. Scores are clamped to [0, `maximumScore`], so
    /// it is 1 at or below 0 and 0 above `maximumScore`.
    public func falseMatchRate(atThreshold threshold: Double) -> Double {
        guard !threshold.isNaN else { return .nan }
        if threshold <= 0 { return 1 }
        if threshold > Self.maximumScore { return 0 }
        return Libm.exp(-threshold * Libm.ln10)
    }

    /// The probability that a genuine sample fails at `threshold`, against a template of `enrollmentSamples`
    /// samples; at `self.threshold` it is `targetFalseNonMatchRate`.
    ///
    /// Closed form, no sampling: with q = F⁻¹(10^−threshold), a squared distance D matches iff D/(2 + v) ≤ q, and a
    /// genuine D/v ~ χ²_d, so the FNMR is P(χ²_d > (2 + v) q / v), taken from the upper tail so it keeps its
    /// precision when tiny. 0 at or below a threshold of 0 and 1 above `maximumScore`, like the clamped score.
    public func falseNonMatchRate(atThreshold threshold: Double) -> Double {
        guard !threshold.isNaN else { return .nan }
        if threshold <= 0 { return 0 }
        if threshold > Self.maximumScore { return 1 }
        let genuineVariance = noiseVariance * (1 + 1 / Double(enrollmentSamples))
        let quantile = ChiSquared.quantile(falseMatchRate(atThreshold: threshold), degreesOfFreedom: dimensions)
        let bound = (2 + genuineVariance) * quantile / genuineVariance
        return Libm.exp(ChiSquared.logSurvival(bound, degreesOfFreedom: dimensions))
    }
}

/// FNV-1a 64: tiny, fixed forever, and good enough to spread (seed, user, finger) over generator seeds.
struct FNV1a64 {
    private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325

    mutating func combine(_ byte: UInt8) {
        value ^= UInt64(byte)
        value &*= 0x0000_0100_0000_01B3
    }

    /// Eight bytes, little-endian, so the hash does not depend on the host's byte order.
    mutating func combine(_ word: UInt64) {
        for shift in stride(from: UInt64(0), to: 64, by: 8) {
            combine(UInt8(truncatingIfNeeded: word >> shift))
        }
    }

    /// Length-prefixed, so concatenations of different splits hash differently.
    mutating func combine(_ string: String) {
        combine(UInt64(string.utf8.count))
        for byte in string.utf8 {
            combine(byte)
        }
    }
}
