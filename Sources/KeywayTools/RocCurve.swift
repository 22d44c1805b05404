// The simulated sensor's error rates across thresholds, in closed form from its noise model (no sampling), for
// `keyway sensor roc`: what an administrator trades when choosing `[biometric] false-match-rate`.
public import KeywayBiometricSimulator

/// One threshold of the simulated matcher and the two error rates it gives.
public struct RocPoint: Sendable, Equatable {
    /// The score a sample must reach to match: −log10 of the false-match rate.
    public var threshold: Double
    /// The chance that a stranger's sample matches (FMR).
    public var falseMatchRate: Double
    /// The chance that the owner's own sample fails (FNMR).
    public var falseNonMatchRate: Double

    /// A point as given; `RocCurve` computes them from a model.
    public init(threshold: Double, falseMatchRate: Double, falseNonMatchRate: Double) {
        self.threshold = threshold
        self.falseMatchRate = falseMatchRate
        self.falseNonMatchRate = falseNonMatchRate
    }
}

/// The false-match and false-non-match rates of a `NoiseModel` over thresholds, with its configured operating point.
///
/// The thresholds are evenly spaced, so the false-match rates are log-spaced: by default from 1/10 (threshold 1)
/// to 1/100,000,000 (threshold 8), widened to whole decades around the operating point when it lies outside.
public struct RocCurve: Sendable, Equatable {
    /// The model the rates come from.
    public let model: NoiseModel
    /// The points in order of rising threshold: the FMR falls strictly, the FNMR never falls.
    public let points: [RocPoint]
    /// The model's own threshold, where the FMR is the configured `targetFalseMatchRate`.
    public let operatingPoint: RocPoint
    /// The threshold where the FMR and the FNMR are equal (to within 1e-9 of a threshold), one figure to compare
    /// models by.
    public let equalErrorPoint: RocPoint
    /// The lowest and highest threshold of `points`: whole numbers, so the FMR spans whole decades.
    public let thresholdRange: ClosedRange<Double>

    /// Computes `points` evenly spaced thresholds (at least 2; the default puts one every eighth of a decade over
    /// 1e-8 … 1e-1) across the range, the operating point and the equal-error point.
    public init(model: NoiseModel, points count: Int = 57) {
        self.model = model
        let lowest = min(1, model.threshold.rounded(.down))
        let highest = max(8, model.threshold.rounded(.up))
        thresholdRange = lowest...highest
        let count = max(count, 2)
        var points: [RocPoint] = []
        points.reserveCapacity(count)
        for index in 0..<count {
            let fraction = Double(index) / Double(count - 1)
            points.append(Self.point(of: model, atThreshold: lowest + (highest - lowest) * fraction))
        }
        self.points = points
        operatingPoint = Self.point(of: model, atThreshold: model.threshold)
        equalErrorPoint = Self.equalErrorPoint(of: model)
    }

    /// The rates at any threshold, not only those of `points`.
    public func point(atThreshold threshold: Double) -> RocPoint {
        Self.point(of: model, atThreshold: threshold)
    }

    private static func point(of model: NoiseModel, atThreshold threshold: Double) -> RocPoint {
        RocPoint(
            threshold: threshold, falseMatchRate: model.falseMatchRate(atThreshold: threshold),
            falseNonMatchRate: model.falseNonMatchRate(atThreshold: threshold))
    }

    /// Bisection on FMR − FNMR, which falls from 1 (threshold 0) to −1 (beyond the highest score).
    private static func equalErrorPoint(of model: NoiseModel) -> RocPoint {
        var low = 0.0
        var high = NoiseModel.maximumScore
        while high - low > 1e-9 {
            let middle = low + (high - low) / 2
            let point = Self.point(of: model, atThreshold: middle)
            if point.falseMatchRate > point.falseNonMatchRate { low = middle } else { high = middle }
        }
        return point(of: model, atThreshold: low + (high - low) / 2)
    }
}
