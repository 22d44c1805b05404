// The simulator's ROC curve drawn for a person: a DET-style SVG (both error rates on log scales) and a terminal table.
import KeywayBiometricSimulator

/// Drawings of a `RocCurve`, for `keyway sensor roc`.
public enum RocPlot {
    /// A standalone SVG 1.1 document: the FMR (log scale) across, the FNMR (log scale) upwards, gridlines and tick
    /// labels ("1/10,000", "0.1%") at each decade, the curve as `<polyline id="curve">`, the configured threshold as `<circle id="operating-point">`
    /// with its rates spelled out, and the equal error rate under the title. `title` is escaped.
    public static func svg(_ curve: RocCurve, title: String) -> String {
        let axes = RocAxes(curve)
        var svg = SVGText()
        svg.open(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"\(Int(RocAxes.width))\" "
                + "height=\"\(Int(RocAxes.height))\" viewBox=\"0 0 \(Int(RocAxes.width)) \(Int(RocAxes.height))\" "
                + "font-family=\"sans-serif\" font-size=\"12\">")
        svg.line("<title>\(RocFormat.xmlEscaped(title))</title>")
        svg.line(
            "<defs><clipPath id=\"plot-area\">"
                + rect(x: axes.left, y: axes.top, width: axes.right - axes.left, height: axes.bottom - axes.top)
                + "</clipPath></defs>")
        svg.line("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>")
        svg.line(
            text(RocAxes.width / 2, 30, RocFormat.xmlEscaped(title), anchor: "middle", extra: "font-size=\"18\""))
        svg.line(text(RocAxes.width / 2, 52, summary(curve), anchor: "middle", extra: "fill=\"#555555\""))
        grid(axes, into: &svg)
        labels(axes, into: &svg)
        var coordinates: [String] = []
        for point in curve.points {
            let x = axes.x(falseMatchRate: point.falseMatchRate)
            let y = axes.y(falseNonMatchRate: point.falseNonMatchRate)
            coordinates.append(RocFormat.fixed(x, 2) + "," + RocFormat.fixed(y, 2))
        }
        svg.line(
            "<polyline id=\"curve\" clip-path=\"url(#plot-area)\" fill=\"none\" stroke=\"#1f6fb2\" "
                + "stroke-width=\"2\" points=\"\(coordinates.joined(separator: " "))\"/>")
        markers(curve, axes, into: &svg)
        svg.close("</svg>")
        return svg.text
    }

    /// "equal error rate 0.031% (threshold 3.52) · 32 dimensions, 5 enrolment samples".
    static func summary(_ curve: RocCurve) -> String {
        let equal = curve.equalErrorPoint
        return "equal error rate \(RocFormat.percent(equal.falseMatchRate)) (threshold "
            + "\(RocFormat.fixed(equal.threshold, 2))) · \(curve.model.dimensions) dimensions, "
            + "\(curve.model.enrollmentSamples) enrolment samples"
    }

    /// "configured: FMR 1/50,000, FNMR 2.0%".
    static func operatingLabel(_ curve: RocCurve) -> String {
        let point = curve.operatingPoint
        return "configured: FMR \(RocFormat.oneIn(point.falseMatchRate)), "
            + "FNMR \(RocFormat.percent(point.falseNonMatchRate))"
    }

    private static func grid(_ axes: RocAxes, into svg: inout SVGText) {
        svg.open("<g id=\"grid\" stroke-width=\"1\">")
        // Lines at 2…9 times each decade too, where every decade has its own line: they show the scale is a log.
        let minorAcross = axes.falseMatchTicks.count == axes.falseMatchDecades.count
        for decade in axes.falseMatchTicks {
            for multiple in 1...9 where multiple == 1 || (minorAcross && decade < axes.falseMatchDecades.upperBound) {
                let x = axes.x(falseMatchRate: Double(multiple) * power(decade))
                svg.line(segment(x, axes.top, x, axes.bottom, multiple == 1 ? "#c8c8c8" : "#efefef"))
            }
        }
        let minorUpwards = axes.falseNonMatchTicks.count == axes.falseNonMatchDecades.count
        for decade in axes.falseNonMatchTicks {
            for multiple in 1...9
            where multiple == 1 || (minorUpwards && decade < axes.falseNonMatchDecades.upperBound) {
                let y = axes.y(falseNonMatchRate: Double(multiple) * power(decade))
                svg.line(segment(axes.left, y, axes.right, y, multiple == 1 ? "#c8c8c8" : "#efefef"))
            }
        }
        svg.line(
            rect(
                x: axes.left, y: axes.top, width: axes.right - axes.left, height: axes.bottom - axes.top,
                extra: "fill=\"none\" stroke=\"#333333\""))
        svg.close("</g>")
    }

    private static func labels(_ axes: RocAxes, into svg: inout SVGText) {
        svg.open("<g id=\"tick-labels\" fill=\"#333333\" font-size=\"11\">")
        for decade in axes.falseMatchTicks {
            let x = axes.x(falseMatchRate: power(decade))
            svg.line(text(x, axes.bottom + 18, RocFormat.decadeOneIn(decade), anchor: "middle"))
        }
        for decade in axes.falseNonMatchTicks {
            let y = axes.y(falseNonMatchRate: power(decade))
            svg.line(text(axes.left - 8, y + 4, RocFormat.decadePercent(decade), anchor: "end"))
        }
        svg.close("</g>")
        let middleX = (axes.left + axes.right) / 2
        let middleY = (axes.top + axes.bottom) / 2
        svg.line(
            text(
                middleX, axes.bottom + 46, "false-match rate (a stranger accepted)", anchor: "middle",
                extra: "font-size=\"14\""))
        svg.line(
            text(
                28, middleY, "false-non-match rate (the owner refused)", anchor: "middle",
                extra: "font-size=\"14\" transform=\"rotate(-90 28 \(RocFormat.fixed(middleY, 2)))\""))
    }

    private static func markers(_ curve: RocCurve, _ axes: RocAxes, into svg: inout SVGText) {
        let equal = curve.equalErrorPoint
        let ex = axes.x(falseMatchRate: equal.falseMatchRate)
        let ey = axes.y(falseNonMatchRate: equal.falseNonMatchRate)
        svg.line(
            rect(x: ex - 4, y: ey - 4, width: 8, height: 8, extra: "id=\"equal-error-point\" fill=\"#7f7f7f\""))
        svg.line(
            text(
                ex - 10, ey + 4, "equal error \(RocFormat.percent(equal.falseMatchRate))", anchor: "end",
                extra: "fill=\"#555555\" font-size=\"11\""))
        let point = curve.operatingPoint
        let cx = axes.x(falseMatchRate: point.falseMatchRate)
        let cy = axes.y(falseNonMatchRate: point.falseNonMatchRate)
        svg.line(
            "<circle id=\"operating-point\" cx=\"\(RocFormat.fixed(cx, 2))\" cy=\"\(RocFormat.fixed(cy, 2))\" "
                + "r=\"5\" fill=\"#c0392b\" stroke=\"white\" stroke-width=\"1.5\"/>")
        // The curve falls from left to right: above-right of the point and below-left of it are clear of it.
        let leftward = cx > axes.right - 260
        let labelY = leftward || cy - 12 < axes.top + 12 ? cy + 20 : cy - 12
        svg.line(
            text(
                leftward ? cx - 10 : cx + 10, labelY, operatingLabel(curve), anchor: leftward ? "end" : "start",
                extra: "id=\"operating-point-label\" fill=\"#c0392b\" font-weight=\"bold\""))
    }

    /// 10^decade, exact for the decades the axes use.
    private static func power(_ decade: Int) -> Double {
        var value = 1.0
        for _ in 0..<abs(decade) { value *= 10 }
        return decade < 0 ? 1 / value : value
    }

    private static func segment(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, _ color: String) -> String {
        "<line x1=\"\(RocFormat.fixed(x1, 2))\" y1=\"\(RocFormat.fixed(y1, 2))\" x2=\"\(RocFormat.fixed(x2, 2))\" "
            + "y2=\"\(RocFormat.fixed(y2, 2))\" stroke=\"\(color)\"/>"
    }

    private static func rect(x: Double, y: Double, width: Double, height: Double, extra: String = "") -> String {
        "<rect x=\"\(RocFormat.fixed(x, 2))\" y=\"\(RocFormat.fixed(y, 2))\" width=\"\(RocFormat.fixed(width, 2))\" "
            + "height=\"\(RocFormat.fixed(height, 2))\"" + (extra.isEmpty ? "" : " " + extra) + "/>"
    }

    /// `content` must already be escaped.
    private static func text(_ x: Double, _ y: Double, _ content: String, anchor: String, extra: String = "")
        -> String
    {
        "<text x=\"\(RocFormat.fixed(x, 2))\" y=\"\(RocFormat.fixed(y, 2))\" text-anchor=\"\(anchor)\""
            + (extra.isEmpty ? "" : " " + extra) + ">\(content)</text>"
    }
}

/// An SVG document being written, indented by nesting.
struct SVGText {
    private(set) var text = ""
    private var depth = 0

    mutating func open(_ tag: String) {
        line(tag)
        depth += 1
    }

    mutating func close(_ tag: String) {
        depth -= 1
        line(tag)
    }

    mutating func line(_ content: String) {
        text += String(repeating: "  ", count: depth) + content + "\n"
    }
}
