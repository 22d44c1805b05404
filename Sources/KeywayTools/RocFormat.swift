// Numbers as a person reads them, without Foundation: rates as "1/50,000" and "2.0%", coordinates as "123.45".
import Glibc

/// The few number formats the ROC plot and table need.
enum RocFormat {
    /// `value` rounded to `decimals` places, e.g. fixed(2.005, 1) = "2.0"; "nan" or "inf" for what is not finite.
    static func fixed(_ value: Double, _ decimals: Int) -> String {
        guard value.isFinite else { return value.isNaN ? "nan" : (value < 0 ? "-inf" : "inf") }
        var scale = 1.0
        for _ in 0..<max(decimals, 0) { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        guard scaled < 1e17 else { return (value < 0 ? "-" : "") + scientific(abs(value)) }
        let units = UInt64(scaled)
        let divisor = UInt64(scale)
        var text = String(units / divisor)
        if decimals > 0 {
            let fraction = String(units % divisor)
            text += "." + String(repeating: "0", count: decimals - fraction.count) + fraction
        }
        return (value < 0 && units != 0 ? "-" : "") + text
    }

    /// A whole number with thousands separators: 50000 → "50,000".
    static func grouped(_ value: UInt64) -> String {
        grouped(String(value))
    }

    /// A probability as "1 in N": 2e-5 → "1/50,000"; "0" for 0, "1/1" from 1 up, "1/1.0e20" beyond 1e15.
    static func oneIn(_ rate: Double) -> String {
        guard !rate.isNaN else { return "nan" }
        if rate <= 0 { return "0" }
        if rate >= 1 { return "1/1" }
        let reciprocal = (1 / rate).rounded()
        guard reciprocal < 1e15 else { return "1/" + scientific(1 / rate) }
        return "1/" + grouped(UInt64(reciprocal))
    }

    /// A probability as a percentage with two significant digits below 1% ("0.15%"), one decimal below 10%
    /// ("2.0%"), none above ("41%"), and an exponent below 0.0001% ("6.1e-11%").
    static func percent(_ rate: Double) -> String {
        guard rate.isFinite else { return fixed(rate, 0) }
        let percent = rate * 100
        if percent <= 0 { return "0%" }
        if percent >= 9.95 { return fixed(percent, 0) + "%" }
        if percent >= 0.995 { return fixed(percent, 1) + "%" }
        if percent < 1e-4 { return scientific(percent) + "%" }
        let leadingZeros = Int((-log10(percent)).rounded(.up))
        return fixed(percent, leadingZeros + 1) + "%"
    }

    /// Two significant digits and a power of ten: 6.05e-11 → "6.1e-11".
    static func scientific(_ value: Double) -> String {
        guard value.isFinite, value > 0 else { return fixed(value, 0) }
        var exponent = Int(log10(value).rounded(.down))
        var mantissa = value / pow(10, Double(exponent))
        if (mantissa * 10).rounded() >= 100 {
            exponent += 1
            mantissa /= 10
        }
        return fixed(mantissa, 1) + "e" + String(exponent)
    }

    /// 10^exponent as "1 in N" exactly: −4 → "1/10,000"; 0 and up → "1/1".
    static func decadeOneIn(_ exponent: Int) -> String {
        guard exponent < 0 else { return "1/1" }
        return "1/" + grouped("1" + String(repeating: "0", count: -exponent))
    }

    /// 10^exponent as a percentage exactly: 0 → "100%", −6 → "0.0001%".
    static func decadePercent(_ exponent: Int) -> String {
        let places = exponent + 2
        if places >= 0 { return "1" + String(repeating: "0", count: places) + "%" }
        return "0." + String(repeating: "0", count: -places - 1) + "1%"
    }

    private static func grouped(_ digits: String) -> String {
        let characters = Array(digits)
        var text = ""
        for (index, digit) in characters.enumerated() {
            if index > 0 && (characters.count - index) % 3 == 0 { text += "," }
            text.append(digit)
        }
        return text
    }

    /// Text safe inside an XML element or a quoted attribute; control characters, which XML 1.0 forbids, become
    /// U+FFFD.
    static func xmlEscaped(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            case "\t", "\n", "\r": escaped.unicodeScalars.append(scalar)
            default: escaped.unicodeScalars.append(scalar.value < 0x20 ? "\u{FFFD}" : scalar)
            }
        }
        return escaped
    }
}
