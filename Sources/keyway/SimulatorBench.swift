// `keyway bench`'s figures for the simulated sensor: how many matches a second it scores, and the false-match and
// false-non-match rates it actually has at the default threshold (NoiseModel.default), measured over independent
// trials as Tests/BiometricSimulatorTests/NoiseModelTests.swift runs them: each trial a fresh person, a fresh
// template from k samples, one genuine probe and one probe from a fresh impostor.
//
// Prints one line per figure, `simulator_NAME key=value …`, for scripts (Benchmarks/run) and people alike.
import Glibc
import KeywayBiometricSimulator
import KeywayPlatform

/// The simulator's speed and error rates at the default threshold.
enum SimulatorBench {
    /// `rounds` rounds, each timing `matchesPerRound` matches and running `trialsPerRound` error-rate trials.
    static func run(rounds: Int, trialsPerRound: Int = 100_000, matchesPerRound: Int = 100_000) {
        let model = NoiseModel.default
        let rounds = max(rounds, 1)
        // A fresh seed per run (printed, so a run can be replayed): repeated runs are independent samples.
        var clock = timespec()
        clock_gettime(CLOCK_REALTIME, &clock)
        let seed =
            UInt64(truncatingIfNeeded: clock.tv_sec) &* 1_000_000_007 &+ UInt64(truncatingIfNeeded: clock.tv_nsec)
        var generator = SeededGenerator(seed: seed)

        // Matches per second: one template, a pool of genuine and impostor probes scored in turn, timed per round.
        let person = model.randomIdentity(using: &generator)
        let template = enroll(model, person, using: &generator)
        let pool = (0..<512).map { index in
            model.sample(of: index % 2 == 0 ? person : model.randomIdentity(using: &generator), using: &generator)
        }
        var rates: [Double] = []
        var accepted = 0  // used below, so the matches cannot be optimised away
        for _ in 0..<rounds {
            let start = seconds()
            for index in 0..<matchesPerRound where model.matches(pool[index & 511], against: template) {
                accepted += 1
            }
            rates.append(Double(matchesPerRound) / (seconds() - start))
        }
        rates.sort()
        print(
            "simulator_matches_per_second median=\(Int(rates[rates.count / 2])) min=\(Int(rates[0]))"
                + " max=\(Int(rates[rates.count - 1])) rounds=\(rounds) matches_per_round=\(matchesPerRound)"
                + " accepted=\(accepted)")

        // Error rates: independent trials, counted per round (for the spread) and pooled (for the figure).
        var falseMatches: [Int] = []
        var falseNonMatches: [Int] = []
        for _ in 0..<rounds {
            var fm = 0
            var fnm = 0
            for _ in 0..<trialsPerRound {
                let genuine = model.randomIdentity(using: &generator)
                let template = enroll(model, genuine, using: &generator)
                if !model.matches(model.sample(of: genuine, using: &generator), against: template) { fnm += 1 }
                let impostor = model.randomIdentity(using: &generator)
                if model.matches(model.sample(of: impostor, using: &generator), against: template) { fm += 1 }
            }
            falseMatches.append(fm)
            falseNonMatches.append(fnm)
        }
        let trials = rounds * trialsPerRound
        report("fmr", falseMatches, trials: trials, perRound: trialsPerRound, target: model.targetFalseMatchRate)
        report("fnmr", falseNonMatches, trials: trials, perRound: trialsPerRound, target: model.targetFalseNonMatchRate)
        print(
            "simulator_model dimensions=\(model.dimensions) enrollment_samples=\(model.enrollmentSamples)"
                + " threshold=\(fixed(model.threshold, 4)) sigma=\(fixed(model.noiseSigma, 4)) seed=\(seed)")
    }

    /// A template from `enrollmentSamples` fresh samples of `identity`.
    private static func enroll(
        _ model: NoiseModel, _ identity: FeatureVector, using generator: inout SeededGenerator
    ) -> Template {
        let samples = (0..<model.enrollmentSamples).map { _ in model.sample(of: identity, using: &generator) }
        do { return try model.enroll(samples) } catch {
            fatalError("the default model refused its own samples: \(error)")
        }
    }

    /// One rate: pooled count over all trials, a Wilson 95% interval, and the per-round minimum and maximum.
    private static func report(_ name: String, _ counts: [Int], trials: Int, perRound: Int, target: Double) {
        let total = counts.reduce(0, +)
        let n = Double(trials)
        let p = Double(total) / n
        let z = 1.959_964
        let centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        let spread = z * (p * (1 - p) / n + z * z / (4 * n * n)).squareRoot() / (1 + z * z / n)
        print(
            "simulator_\(name) measured=\(scientific(p)) count=\(total) trials=\(trials)"
                + " ci95_low=\(scientific(max(centre - spread, 0))) ci95_high=\(scientific(centre + spread))"
                + " round_min=\(scientific(Double(counts.min() ?? 0) / Double(perRound)))"
                + " round_max=\(scientific(Double(counts.max() ?? 0) / Double(perRound))) target=\(scientific(target))")
    }

    private static func seconds() -> Double { Double(MonotonicClock.nanoseconds()) / 1e9 }

    /// `value` with `digits` decimals (no Foundation, so no String(format:)).
    private static func fixed(_ value: Double, _ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        let whole = Int(scaled / scale)
        var fraction = String(Int(scaled - Double(whole) * scale))
        while fraction.count < digits { fraction = "0" + fraction }
        return (value < 0 ? "-" : "") + "\(whole)" + (digits > 0 ? "." + fraction : "")
    }

    /// `value` as m.mmme±x, three significant digits.
    private static func scientific(_ value: Double) -> String {
        guard value > 0, value.isFinite else { return "0" }
        var exponent = 0
        var mantissa = value
        while mantissa >= 10 { mantissa /= 10; exponent += 1 }
        while mantissa < 1 { mantissa *= 10; exponent -= 1 }
        if (mantissa * 100).rounded() >= 1000 { mantissa /= 10; exponent += 1 }
        return fixed(mantissa, 2) + "e" + (exponent < 0 ? "-" : "+") + "\(abs(exponent))"
    }
}
