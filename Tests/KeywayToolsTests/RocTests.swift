import KeywayBiometricSimulator
import Testing

@testable import KeywayTools

/// |a − b| ≤ relative · |b|.
private func isClose(_ a: Double, _ b: Double, relative: Double) -> Bool {
    abs(a - b) <= relative * abs(b)
}

/// The value of `name="…"` in the first tag that carries `id="id"`.
private func attribute(_ name: String, ofElementWithID id: String, in svg: String) -> String? {
    guard let idRange = svg.firstRange(of: "id=\"\(id)\"") else { return nil }
    let tagStart = svg[..<idRange.lowerBound].lastIndex(of: "<") ?? svg.startIndex
    guard let tagEnd = svg[idRange.upperBound...].firstIndex(of: ">") else { return nil }
    let tag = svg[tagStart..<tagEnd]
    guard let start = tag.firstRange(of: " \(name)=\"") else { return nil }
    guard let end = tag[start.upperBound...].firstIndex(of: "\"") else { return nil }
    return String(tag[start.upperBound..<end])
}

/// The (x, y) pairs of a polyline's `points`, nil when any number does not parse.
private func coordinatePairs(_ points: String) -> [(Double, Double)]? {
    var pairs: [(Double, Double)] = []
    for pair in points.split(separator: " ") {
        let numbers = pair.split(separator: ",")
        guard numbers.count == 2, let x = Double(numbers[0]), let y = Double(numbers[1]) else { return nil }
        pairs.append((x, y))
    }
    return pairs
}

@Suite("ROC curve of the simulated sensor")
struct RocCurveTests {
    @Test("the FMR falls strictly and the FNMR never falls as the threshold rises, over 1e-8 … 1e-1")
    func monotone() throws {
        let curve = RocCurve(model: NoiseModel.default)
        #expect(curve.points.count == 57)
        #expect(curve.thresholdRange == 1...8)
        #expect(isClose(curve.points.first?.falseMatchRate ?? 0, 1e-1, relative: 1e-12))
        #expect(isClose(curve.points.last?.falseMatchRate ?? 0, 1e-8, relative: 1e-12))
        for (earlier, later) in zip(curve.points, curve.points.dropFirst()) {
            #expect(later.threshold > earlier.threshold)
            #expect(later.falseMatchRate < earlier.falseMatchRate)
            #expect(later.falseNonMatchRate >= earlier.falseNonMatchRate)
        }
        // Strictly rising somewhere real: from about 6e-13 at threshold 1 to about 67% at threshold 8.
        #expect((curve.points.first?.falseNonMatchRate ?? 1) < 1e-12)
        #expect((curve.points.last?.falseNonMatchRate ?? 0) > 0.6)
    }

    @Test("the operating point is the configured FMR 1/50,000 with the model's FNMR 2%")
    func operatingPoint() throws {
        let model = try NoiseModel(falseMatchRate: 1.0 / 50_000)
        let curve = RocCurve(model: model)
        #expect(curve.operatingPoint.threshold == model.threshold)
        #expect(isClose(curve.operatingPoint.falseMatchRate, 1.0 / 50_000, relative: 1e-6))
        #expect(isClose(curve.operatingPoint.falseNonMatchRate, model.targetFalseNonMatchRate, relative: 1e-6))
    }

    /// Reference values from mpmath at 40 digits (regularized incomplete gamma, quantiles by bisection).
    @Test("the FNMR across thresholds matches an independent computation")
    func referenceValues() throws {
        let curve = RocCurve(model: NoiseModel.default)
        let expected: [(Double, Double)] = [
            (1, 6.05084397611085e-13), (2, 1.06698117203576e-7), (3, 6.63084192898353e-5),
            (4.5, 0.0126418038132804), (5, 0.037077964676314), (6, 0.167712480466515), (8, 0.672114707300787),
        ]
        for (threshold, rate) in expected {
            let point = curve.point(atThreshold: threshold)
            #expect(isClose(point.falseNonMatchRate, rate, relative: 1e-6), "threshold \(threshold)")
        }
        #expect(isClose(curve.equalErrorPoint.threshold, 3.40178744761, relative: 1e-6))
        #expect(isClose(curve.equalErrorPoint.falseMatchRate, 0.00039647202811, relative: 1e-5))
        #expect(isClose(curve.equalErrorPoint.falseNonMatchRate, 0.00039647202811, relative: 1e-5))
    }

    @Test("configuring FMR 1/1,000 moves the operating point and the curve")
    func otherConfiguration() throws {
        let strict = RocCurve(model: NoiseModel.default)
        let lax = RocCurve(model: try NoiseModel(falseMatchRate: 1.0 / 1_000))
        #expect(isClose(lax.operatingPoint.threshold, 3, relative: 1e-12))
        #expect(isClose(lax.operatingPoint.falseMatchRate, 1e-3, relative: 1e-6))
        #expect(isClose(lax.operatingPoint.falseNonMatchRate, 0.02, relative: 1e-6))
        #expect(abs(lax.operatingPoint.threshold - strict.operatingPoint.threshold) > 1.5)
        // A noisier sensor: at the same threshold the owner is refused more often (mpmath: 39.76% at 5).
        #expect(isClose(lax.point(atThreshold: 5).falseNonMatchRate, 0.397576405699534, relative: 1e-6))
        #expect(isClose(lax.equalErrorPoint.threshold, 2.44080916531, relative: 1e-6))
    }

    @Test("an operating point beyond 1e-8 widens the range to whole decades")
    func widenedRange() throws {
        let curve = RocCurve(model: try NoiseModel(falseMatchRate: 3e-10), points: 10)
        #expect(curve.thresholdRange == 1...10)
        #expect(curve.points.count == 10)
        #expect(curve.points.last?.threshold == 10)
        // 9 decades do not leave room for 10 labels of up to 16 characters: every second one is labelled.
        let axes = RocAxes(curve)
        #expect(axes.falseMatchDecades == -10...(-1))
        #expect(axes.falseMatchTicks == [-9, -7, -5, -3, -1])
        let svg = RocPlot.svg(curve, title: "t")
        #expect(svg.contains(">1/1,000,000,000<") && !svg.contains(">1/100,000,000<"))
    }
}

@Suite("ROC plot")
struct RocPlotTests {
    let curve = RocCurve(model: NoiseModel.default)

    @Test("a standalone SVG with the curve's points, all finite and inside the drawing")
    func svgCurve() throws {
        let svg = RocPlot.svg(curve, title: "Simulated fingerprint <default> & co")
        #expect(svg.hasPrefix("<svg "))
        #expect(svg.hasSuffix("</svg>\n"))
        #expect(svg.contains("xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(svg.contains("<title>Simulated fingerprint &lt;default&gt; &amp; co</title>"))
        #expect(!svg.contains("<default>"))
        #expect(svg.contains("false-match rate (a stranger accepted)"))
        #expect(svg.contains("false-non-match rate (the owner refused)"))
        #expect(svg.contains(">1/10,000<") && svg.contains(">1/100,000,000<") && svg.contains(">0.0001%<"))
        let points = try #require(attribute("points", ofElementWithID: "curve", in: svg))
        let pairs = try #require(coordinatePairs(points))
        #expect(pairs.count == curve.points.count && pairs.count >= 40)
        for (x, y) in pairs {
            #expect(x.isFinite && y.isFinite)
            #expect(x >= 0 && x <= RocAxes.width && y >= 0 && y <= RocAxes.height)
        }
        // Along `points` the threshold rises: the FMR falls (leftwards) and the FNMR rises (upwards, y falls).
        for (earlier, later) in zip(pairs, pairs.dropFirst()) {
            #expect(later.0 < earlier.0)
            #expect(later.1 <= earlier.1)
        }
    }

    @Test("the operating point's circle sits at its FMR and FNMR, labelled with both")
    func svgOperatingPoint() throws {
        let svg = RocPlot.svg(curve, title: "t")
        let axes = RocAxes(curve)
        let cx = try #require(attribute("cx", ofElementWithID: "operating-point", in: svg).flatMap { Double($0) })
        let cy = try #require(attribute("cy", ofElementWithID: "operating-point", in: svg).flatMap { Double($0) })
        let point = curve.operatingPoint
        #expect(abs(cx - axes.x(falseMatchRate: point.falseMatchRate)) < 1)
        #expect(abs(cy - axes.y(falseNonMatchRate: point.falseNonMatchRate)) < 1)
        // Back through the inverse: within a pixel of 1/50,000 and 2%.
        #expect(abs(axes.x(falseMatchRate: axes.falseMatchRate(atX: cx)) - axes.x(falseMatchRate: 2e-5)) < 1)
        #expect(abs(axes.y(falseNonMatchRate: axes.falseNonMatchRate(atY: cy)) - axes.y(falseNonMatchRate: 0.02)) < 1)
        #expect(isClose(axes.falseMatchRate(atX: cx), 2e-5, relative: 0.02))
        #expect(isClose(axes.falseNonMatchRate(atY: cy), 0.02, relative: 0.02))
        #expect(svg.contains(">configured: FMR 1/50,000, FNMR 2.0%</text>"))
        #expect(svg.contains("equal error rate 0.040% (threshold 3.40)"))
    }

    @Test("the axes are logarithmic and clamp what a log scale cannot show")
    func axes() {
        let axes = RocAxes(curve)
        #expect(axes.falseMatchTicks == Array(-8...(-1)) && axes.falseNonMatchTicks == Array(-6...0))
        #expect(axes.x(falseMatchRate: 1e-8) == axes.left && axes.x(falseMatchRate: 1e-1) == axes.right)
        #expect(axes.y(falseNonMatchRate: 1) == axes.top && axes.y(falseNonMatchRate: 1e-6) == axes.bottom)
        let decade = (axes.right - axes.left) / 7
        #expect(abs(axes.x(falseMatchRate: 1e-4) - (axes.left + 4 * decade)) < 1e-9)
        for rate in [0.0, -1, Double.nan, 1e-300, Double.leastNonzeroMagnitude] {
            #expect(axes.y(falseNonMatchRate: rate).isFinite && axes.y(falseNonMatchRate: rate) > axes.bottom)
            #expect(axes.x(falseMatchRate: rate).isFinite && axes.x(falseMatchRate: rate) < axes.left)
        }
    }

    @Test("the configured FMR 1/1,000 is drawn and labelled where it is")
    func svgOtherConfiguration() throws {
        let lax = RocCurve(model: try NoiseModel(falseMatchRate: 1.0 / 1_000))
        let svg = RocPlot.svg(lax, title: "t")
        let cx = try #require(attribute("cx", ofElementWithID: "operating-point", in: svg).flatMap { Double($0) })
        #expect(abs(cx - RocAxes(lax).x(falseMatchRate: 1e-3)) < 1)
        #expect(svg.contains(">configured: FMR 1/1,000, FNMR 2.0%</text>"))
    }

    @Test("the table has a row every half decade and marks the configured threshold")
    func table() {
        let table = RocPlot.table(curve)
        let lines = table.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 1 + 15 + 1 + 1 + 1)  // header, 1…8 by ½, the operating point, EER, final newline
        #expect(lines.first?.hasPrefix("threshold") == true)
        let marked = lines.filter { $0.hasSuffix("← configured") }
        #expect(marked.count == 1)
        #expect(marked.first?.contains("4.70") == true)
        #expect(marked.first?.contains("1/50,000") == true)
        #expect(marked.first?.contains("2.0%") == true)
        #expect(lines.contains { $0.contains("1/1,000") && $0.contains("0.0066%") })  // threshold 3: 6.63e-5
        #expect(table.contains("equal error rate 0.040% at threshold 3.40"))
    }
}

@Suite("ROC number formats")
struct RocFormatTests {
    @Test("rates as 1/N and percentages, coordinates as fixed decimals")
    func formats() {
        #expect(RocFormat.oneIn(2e-5) == "1/50,000")
        #expect(RocFormat.oneIn(1e-8) == "1/100,000,000")
        #expect(RocFormat.oneIn(0) == "0")
        #expect(RocFormat.percent(0.02) == "2.0%")
        #expect(RocFormat.percent(0.67211) == "67%")
        #expect(RocFormat.percent(0.0039647) == "0.40%")
        #expect(RocFormat.percent(6.05e-13) == "6.1e-11%")
        #expect(RocFormat.percent(0) == "0%")
        #expect(RocFormat.fixed(-0.004, 2) == "0.00")
        #expect(RocFormat.fixed(123.456, 2) == "123.46")
        #expect(RocFormat.fixed(7, 0) == "7")
        #expect(RocFormat.scientific(9.96e-5) == "1.0e-4")
        #expect(RocFormat.decadeOneIn(-4) == "1/10,000")
        #expect(RocFormat.decadePercent(-6) == "0.0001%")
        #expect(RocFormat.decadePercent(0) == "100%")
        #expect(RocFormat.xmlEscaped("a\u{1}<\"'&") == "a\u{FFFD}&lt;&quot;&apos;&amp;")
    }
}
