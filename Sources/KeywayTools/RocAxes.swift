// Where a rate lands on the ROC plot: both axes logarithmic, in SVG user units (y grows downwards).
import Glibc

/// The plot's frame and its two log scales: the FMR across (a decade per whole threshold of the curve), the FNMR
/// upwards from 0.0001% (lower when the operating point is lower) to 100%.
struct RocAxes: Sendable, Equatable {
    /// The whole drawing.
    static let width = 880.0
    static let height = 560.0
    /// The frame the data is drawn in.
    let left = 100.0
    let right = 850.0
    let top = 78.0
    let bottom = 470.0
    /// log10 of the FMR at the left and right edges.
    let falseMatchDecades: ClosedRange<Int>
    /// log10 of the FNMR at the bottom and top edges.
    let falseNonMatchDecades: ClosedRange<Int>

    init(_ curve: RocCurve) {
        falseMatchDecades = -Int(curve.thresholdRange.upperBound)...(-Int(curve.thresholdRange.lowerBound))
        var lowest = -6
        let operating = curve.operatingPoint.falseNonMatchRate
        if operating > 0 && operating.isFinite {
            lowest = min(lowest, Int(log10(operating).rounded(.down)) - 1)
        }
        falseNonMatchDecades = lowest...0
    }

    /// The decades across that get a gridline and a label: each one, or every second, third… from 1/10 leftwards
    /// when their labels would not fit (a model far stricter than any configuration allows).
    var falseMatchTicks: [Int] { Self.ticks(falseMatchDecades, length: right - left, spacing: 90) }
    /// The decades upwards that get a gridline and a label, likewise from 100% down.
    var falseNonMatchTicks: [Int] { Self.ticks(falseNonMatchDecades, length: bottom - top, spacing: 24) }

    private static func ticks(_ decades: ClosedRange<Int>, length: Double, spacing: Double) -> [Int] {
        let perDecade = length / Double(decades.upperBound - decades.lowerBound)
        let step = max(1, Int((spacing / perDecade).rounded(.up)))
        return stride(from: decades.upperBound, through: decades.lowerBound, by: -step).reversed()
    }

    /// The x of a false-match rate; rates beyond the axis (0 included) stop half a decade past its edge.
    func x(falseMatchRate rate: Double) -> Double {
        let decade = Self.clampedLog(rate, falseMatchDecades)
        let span = Double(falseMatchDecades.upperBound - falseMatchDecades.lowerBound)
        return left + (right - left) * (decade - Double(falseMatchDecades.lowerBound)) / span
    }

    /// The y of a false-non-match rate; rates below the axis (0 included) stop half a decade under its bottom.
    func y(falseNonMatchRate rate: Double) -> Double {
        let decade = Self.clampedLog(rate, falseNonMatchDecades)
        let span = Double(falseNonMatchDecades.upperBound - falseNonMatchDecades.lowerBound)
        return bottom - (bottom - top) * (decade - Double(falseNonMatchDecades.lowerBound)) / span
    }

    /// The false-match rate at `x`: the inverse of `x(falseMatchRate:)` inside the frame.
    func falseMatchRate(atX x: Double) -> Double {
        let span = Double(falseMatchDecades.upperBound - falseMatchDecades.lowerBound)
        return pow(10, Double(falseMatchDecades.lowerBound) + span * (x - left) / (right - left))
    }

    /// The false-non-match rate at `y`: the inverse of `y(falseNonMatchRate:)` inside the frame.
    func falseNonMatchRate(atY y: Double) -> Double {
        let span = Double(falseNonMatchDecades.upperBound - falseNonMatchDecades.lowerBound)
        return pow(10, Double(falseNonMatchDecades.lowerBound) + span * (bottom - y) / (bottom - top))
    }

    /// log10(rate) kept within half a decade of the axis, so 0, NaN and underflow still give a finite coordinate.
    private static func clampedLog(_ rate: Double, _ decades: ClosedRange<Int>) -> Double {
        let low = Double(decades.lowerBound) - 0.5
        let high = Double(decades.upperBound) + 0.5
        guard rate > 0 else { return low }  // 0 and NaN
        let decade = log10(rate)
        if decade < low { return low }
        if decade > high { return high }
        return decade
    }
}
