// The ROC curve as text for a terminal: a row every half decade of FMR, the configured threshold marked.

extension RocPlot {
    /// A plain-text table: threshold, FMR as "1/N", FNMR as a percentage, one row every half decade of FMR across
    /// the curve's range (every decade if that would exceed 16 rows), the operating point's row marked
    /// "← configured", and the equal error rate on the last line. Lines end in "\n".
    public static func table(_ curve: RocCurve) -> String {
        let header = ["threshold", "FMR (stranger accepted)", "FNMR (owner refused)"]
        var rows: [[String]] = []
        var marked = -1
        for point in tableRows(curve) {
            if abs(point.threshold - curve.operatingPoint.threshold) < 1e-9 { marked = rows.count }
            rows.append([
                RocFormat.fixed(point.threshold, 2), RocFormat.oneIn(point.falseMatchRate),
                RocFormat.percent(point.falseNonMatchRate),
            ])
        }
        var widths = header.map { $0.count }
        for row in rows {
            for column in row.indices { widths[column] = max(widths[column], row[column].count) }
        }
        var text = aligned(header, widths) + "\n"
        for (index, row) in rows.enumerated() {
            text += aligned(row, widths) + (index == marked ? "  ← configured" : "") + "\n"
        }
        let equal = curve.equalErrorPoint
        text += "equal error rate \(RocFormat.percent(equal.falseMatchRate)) at threshold "
        text += RocFormat.fixed(equal.threshold, 2) + " (FMR = FNMR)\n"
        return text
    }

    /// Half-decade thresholds over the curve's range, with the operating point in its place.
    private static func tableRows(_ curve: RocCurve) -> [RocPoint] {
        let range = curve.thresholdRange
        let step = range.upperBound - range.lowerBound > 8 ? 1.0 : 0.5
        var points: [RocPoint] = []
        var operatingPlaced = false
        var threshold = range.lowerBound
        while threshold <= range.upperBound + 1e-9 {
            let operating = curve.operatingPoint
            if !operatingPlaced && operating.threshold < threshold + 1e-9 {
                points.append(operating)
                operatingPlaced = true
                if abs(operating.threshold - threshold) < 1e-9 {
                    threshold += step
                    continue
                }
            }
            points.append(curve.point(atThreshold: threshold))
            threshold += step
        }
        if !operatingPlaced { points.append(curve.operatingPoint) }
        return points
    }

    /// Each cell right-aligned to its column's width, columns two spaces apart.
    private static func aligned(_ cells: [String], _ widths: [Int]) -> String {
        var line = ""
        for (column, cell) in cells.enumerated() {
            if column > 0 { line += "  " }
            line += String(repeating: " ", count: max(widths[column] - cell.count, 0)) + cell
        }
        return line
    }
}
