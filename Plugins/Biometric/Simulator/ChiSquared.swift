// The χ² distribution with an even number of degrees of freedom, the law behind every score.
//
// Swift's standard library has no log/exp: this file reaches libm for the whole target, through `Libm` below, so
// the dependency stays in one place (the sensor's sockets import CKeywayLibc for themselves).
import CKeywayLibc

/// χ² with even degrees of freedom, accurate in the far lower tail where biometric scores live.
///
/// With d = 2m degrees of freedom and λ = x/2 the CDF is a Poisson tail, F(x) = P(N ≥ m) for N ~ Poisson(λ), so
/// no incomplete gamma function is needed. Scores are −log10 of lower-tail probabilities down to 1e-99, so the
/// lower tail is summed directly in log space rather than formed as 1 − (upper tail), which cancels to zero.
/// Odd or non-positive degrees of freedom, and NaN arguments, give NaN.
public enum ChiSquared {
    /// P(χ²_d ≤ x); 0 for x ≤ 0, 1 for x = +∞.
    public static func cdf(_ x: Double, degreesOfFreedom: Int) -> Double {
        guard let m = halfDegrees(degreesOfFreedom), !x.isNaN else { return .nan }
        if x <= 0 { return 0 }
        if x == .infinity { return 1 }
        let lambda = x / 2
        if lambda < Double(m) {
            return Libm.exp(logLowerTail(lambda: lambda, m: m))
        }
        return 1 - upperTail(lambda: lambda, m: m)
    }

    /// ln P(χ²_d ≤ x), keeping full relative accuracy where the probability itself would underflow.
    public static func logCDF(_ x: Double, degreesOfFreedom: Int) -> Double {
        guard let m = halfDegrees(degreesOfFreedom), !x.isNaN else { return .nan }
        if x <= 0 { return -.infinity }
        if x == .infinity { return 0 }
        let lambda = x / 2
        if lambda < Double(m) {
            return logLowerTail(lambda: lambda, m: m)
        }
        return Libm.log1p(-upperTail(lambda: lambda, m: m))
    }

    /// The x with P(χ²_d ≤ x) = p, to a relative accuracy of about 1e-13; 0 for p ≤ 0, +∞ for p ≥ 1.
    ///
    /// Bisection rather than Newton because it cannot diverge and the CDF is cheap; the tail that carries the
    /// information (lower for p ≤ ½, upper otherwise) is compared in log space so tiny p keep their precision.
    public static func quantile(_ p: Double, degreesOfFreedom: Int) -> Double {
        guard let m = halfDegrees(degreesOfFreedom), !p.isNaN else { return .nan }
        if p <= 0 { return 0 }
        if p >= 1 { return .infinity }
        let useLower = p <= 0.5
        let target = useLower ? Libm.log(p) : Libm.log1p(-p)
        // True when quantile > x, i.e. F(x) < p.
        func isBelowQuantile(_ x: Double) -> Bool {
            if useLower { return logCDF(x, degreesOfFreedom: degreesOfFreedom) < target }
            return logSurvival(x, m: m) > target
        }
        var lo = Double(degreesOfFreedom)
        var hi = lo
        if isBelowQuantile(hi) {
            repeat {
                lo = hi
                hi *= 2
            } while isBelowQuantile(hi) && hi < .greatestFiniteMagnitude / 4
        } else {
            repeat {
                hi = lo
                lo /= 2
            } while !isBelowQuantile(lo) && lo > 0
        }
        var steps = 0
        while hi - lo > 1e-14 * hi && steps < 2_000 {
            let mid = lo + (hi - lo) / 2
            if mid <= lo || mid >= hi { break }
            if isBelowQuantile(mid) { lo = mid } else { hi = mid }
            steps += 1
        }
        return lo + (hi - lo) / 2
    }

    /// ln P(χ²_d > x), the upper-tail twin of `logCDF`, kept internal for the quantile search and tests.
    static func logSurvival(_ x: Double, degreesOfFreedom: Int) -> Double {
        guard let m = halfDegrees(degreesOfFreedom), !x.isNaN else { return .nan }
        return logSurvival(x, m: m)
    }

    private static func logSurvival(_ x: Double, m: Int) -> Double {
        if x <= 0 { return 0 }
        if x == .infinity { return -.infinity }
        let lambda = x / 2
        if lambda < Double(m) {
            return Libm.log1p(-Libm.exp(logLowerTail(lambda: lambda, m: m)))
        }
        return logUpperTail(lambda: lambda, m: m)
    }

    /// m = d/2 for a supported d, nil otherwise.
    private static func halfDegrees(_ degreesOfFreedom: Int) -> Int? {
        guard degreesOfFreedom >= 2, degreesOfFreedom % 2 == 0 else { return nil }
        return degreesOfFreedom / 2
    }

    /// ln Σ_{j≥m} e^{−λ} λ^j / j!, for λ < m where the terms shrink geometrically after the first.
    ///
    /// Factoring out the first term: −λ + m ln λ − ln m! + ln Σ_{i≥0} λ^i m!/(m+i)!, each summand being the
    /// previous one times λ/(m+i); all positive, so there is no cancellation at any λ.
    private static func logLowerTail(lambda: Double, m: Int) -> Double {
        var term = 1.0
        var sum = 1.0
        var i = m
        while i < m + 1_000_000 {
            i += 1
            term *= lambda / Double(i)
            sum += term
            if term <= sum * 0x1p-60 { break }
        }
        return -lambda + Double(m) * Libm.log(lambda) - logFactorial(m) + Libm.log(sum)
    }

    /// Σ_{j<m} e^{−λ} λ^j / j! = P(χ² > 2λ), summed from its largest term (j = m−1 when λ ≥ m−1) downwards.
    private static func upperTail(lambda: Double, m: Int) -> Double {
        Libm.exp(logUpperTail(lambda: lambda, m: m))
    }

    private static func logUpperTail(lambda: Double, m: Int) -> Double {
        var term = 1.0
        var sum = 1.0
        var j = m - 1
        while j > 0 {
            term *= Double(j) / lambda
            sum += term
            j -= 1
        }
        let top = m - 1
        return -lambda + Double(top) * Libm.log(lambda) - logFactorial(top) + Libm.log(sum)
    }

    /// ln n!, exact to rounding for n ≤ 170 (n! is a finite Double there), summed beyond that.
    static func logFactorial(_ n: Int) -> Double {
        if n < 2 { return 0 }
        if n <= 170 {
            var product = 1.0
            for k in 2...n { product *= Double(k) }
            return Libm.log(product)
        }
        var total = logFactorial(170)
        for k in 171...n { total += Libm.log(Double(k)) }
        return total
    }
}

/// libm for the rest of the module, so that only this file imports CKeywayLibc. The functions are looked up in libm
/// on first use rather than linked (see `keyway_libm_function`): the PAM module then loads libm only when a policy
/// uses the simulated sensor. Should libm be missing, every result is NaN, which matches nothing: a NaN score is
/// never at or above the threshold.
enum Libm {
    private typealias Function = @convention(c) (Double) -> Double

    private static func function(_ name: StaticString) -> Function? {
        keyway_libm_function(UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)).map {
            unsafeBitCast($0, to: Function.self)
        }
    }

    private static let logFunction = function("log")
    private static let log1pFunction = function("log1p")
    private static let expFunction = function("exp")
    private static let expm1Function = function("expm1")
    private static let sqrtFunction = function("sqrt")

    /// Natural logarithm.
    static func log(_ x: Double) -> Double { logFunction?(x) ?? .nan }
    /// ln(1 + x), accurate for small x.
    static func log1p(_ x: Double) -> Double { log1pFunction?(x) ?? .nan }
    /// e^x.
    static func exp(_ x: Double) -> Double { expFunction?(x) ?? .nan }
    /// e^x − 1, accurate for small x.
    static func expm1(_ x: Double) -> Double { expm1Function?(x) ?? .nan }
    /// The square root (`Double.squareRoot()` calls libm's `sqrt` in Embedded Swift).
    static func sqrt(_ x: Double) -> Double { sqrtFunction?(x) ?? .nan }
    /// ln 10, to turn natural-log probabilities into orders of magnitude.
    static let ln10: Double = log(10.0)
}
