import Synchronization

/// keywayd's counters, gauges and histograms, rendered in Prometheus's text format (version 0.0.4) for
/// node_exporter's textfile collector and `keyway metrics` (docs/ARCHITECTURE.md §20). No port is opened. Label
/// values come from fixed sets or are bounded by the caller (`Telemetry.bounded`); never an account name. Counters and
/// histograms survive keywayd's idle exits by being read back from the file keywayd wrote last (`restore`).
public final class Metrics: Sendable {
    /// A metric's kind, as the `# TYPE` line names it.
    public enum Kind: String, Sendable {
        case counter
        case gauge
        case histogram
    }

    /// One metric: its name, what it counts, its kind, its label names, and a histogram's bucket bounds (seconds).
    public struct Family: Sendable, Hashable {
        public let name: String
        public let help: String
        public let kind: Kind
        public let labels: [String]
        public let buckets: [Double]

        public init(_ name: String, _ kind: Kind, _ help: String, labels: [String] = [], buckets: [Double] = []) {
            self.name = name
            self.kind = kind
            self.help = help
            self.labels = labels
            self.buckets = buckets
        }
    }

    /// A histogram's samples: the count in each bucket (not cumulative), then the sum and the count.
    struct Histogram: Equatable {
        var perBucket: [Double]
        var sum: Double = 0
        var count: Double = 0
    }

    struct State {
        var values: [String: [[String]: Double]] = [:]
        var histograms: [String: [[String]: Histogram]] = [:]
    }

    /// Series one family may hold; beyond them samples are counted under labels all `other`, so no client can grow
    /// keywayd's memory or the file without bound.
    static let seriesLimit = 256

    /// The families this registry renders, in order.
    public let families: [Family]
    private let state = Mutex(State())

    public init(_ families: [Family]) { self.families = families }

    /// Adds `amount` to a counter.
    public func add(_ family: Family, _ labels: [String] = [], _ amount: Double = 1) {
        state.withLock { state in
            var series = state.values[family.name, default: [:]]
            let key = Self.key(labels, in: series.keys.contains(labels) || series.count < Self.seriesLimit)
            series[key, default: 0] += amount
            state.values[family.name] = series
        }
    }

    /// Records one observation of a histogram.
    public func observe(_ family: Family, _ labels: [String] = [], _ value: Double) {
        state.withLock { state in
            var series = state.histograms[family.name, default: [:]]
            let key = Self.key(labels, in: series.keys.contains(labels) || series.count < Self.seriesLimit)
            var histogram = series[key] ?? Histogram(perBucket: Array(repeating: 0, count: family.buckets.count))
            if let index = family.buckets.firstIndex(where: { value <= $0 }) { histogram.perBucket[index] += 1 }
            histogram.sum += value
            histogram.count += 1
            series[key] = histogram
            state.histograms[family.name] = series
        }
    }

    private static func key(_ labels: [String], in room: Bool) -> [String] {
        room ? labels : labels.map { _ in "other" }
    }

    /// Forgets the counter series of `family` whose label values `doomed` picks.
    public func forget(_ family: Family, where doomed: ([String]) -> Bool) {
        state.withLock { state in state.values[family.name] = state.values[family.name]?.filter { !doomed($0.key) } }
    }

    /// The value of one counter series, or nil when it was never counted.
    public func value(_ family: Family, _ labels: [String] = []) -> Double? {
        state.withLock { $0.values[family.name]?[labels] }
    }

    /// The exposition: every family with its help and type, counters and histograms as counted, and the gauges
    /// given (measured by the caller as it renders).
    public func render(gauges: [(Family, [String], Double)] = []) -> String {
        let snapshot = state.withLock { $0 }
        var out = ""
        for family in families {
            out += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(family.kind.rawValue)\n"
            switch family.kind {
            case .counter:
                for (labels, value) in (snapshot.values[family.name] ?? [:]).sorted(by: {
                    $0.key.lexicographicallyPrecedes($1.key)
                }) {
                    out += "\(family.name)\(Self.labels(family.labels, labels)) \(Self.number(value))\n"
                }
            case .gauge:
                for (gauge, labels, value) in gauges where gauge == family {
                    out += "\(family.name)\(Self.labels(family.labels, labels)) \(Self.number(value))\n"
                }
            case .histogram:
                let series = (snapshot.histograms[family.name] ?? [:]).sorted {
                    $0.key.lexicographicallyPrecedes($1.key)
                }
                for (labels, histogram) in series {
                    var cumulative = 0.0
                    for (bound, count) in zip(family.buckets, histogram.perBucket) {
                        cumulative += count
                        out +=
                            "\(family.name)_bucket\(Self.labels(family.labels + ["le"], labels + [Self.number(bound)])) "
                            + "\(Self.number(cumulative))\n"
                    }
                    out +=
                        "\(family.name)_bucket\(Self.labels(family.labels + ["le"], labels + ["+Inf"])) "
                        + "\(Self.number(histogram.count))\n"
                    out += "\(family.name)_sum\(Self.labels(family.labels, labels)) \(Self.number(histogram.sum))\n"
                    out += "\(family.name)_count\(Self.labels(family.labels, labels)) \(Self.number(histogram.count))\n"
                }
            }
        }
        return out
    }

    /// `{name="value",…}`, values escaped as the format asks (`\\`, `\"`, `\n`); nothing without labels.
    static func labels(_ names: [String], _ values: [String]) -> String {
        guard !names.isEmpty else { return "" }
        let pairs = zip(names, values).map { name, value in
            var escaped = ""
            for character in value {
                switch character {
                case "\\": escaped += "\\\\"
                case "\"": escaped += "\\\""
                case "\n": escaped += "\\n"
                default: escaped.append(character)
                }
            }
            return "\(name)=\"\(escaped)\""
        }
        return "{" + pairs.joined(separator: ",") + "}"
    }

    /// A whole number without a fraction, anything else as Swift prints a Double (both are the format's floats).
    static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(describing: value)
    }

    /// Takes back the counters and histograms of an exposition this registry rendered (the file keywayd wrote
    /// before an idle exit), so they keep counting up; gauges and anything unknown or malformed are left out.
    /// Returns the samples taken.
    @discardableResult
    public func restore(_ text: String) -> Int {
        var restored = State()
        var taken = 0
        let byName = Dictionary(families.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let (name, labels, value) = Self.sample(line) else { continue }
            if let family = byName[name], family.kind == .counter, labels.map({ $0.0 }) == family.labels {
                restored.values[name, default: [:]][labels.map { $0.1 }] = value
                taken += 1
                continue
            }
            for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
                let base = String(name.dropLast(suffix.count))
                guard let family = byName[base], family.kind == .histogram else { continue }
                var names = labels.map { $0.0 }
                var values = labels.map { $0.1 }
                var bound: String? = nil
                if suffix == "_bucket" {
                    guard names.last == "le" else { continue }
                    names.removeLast()
                    bound = values.removeLast()
                }
                guard names == family.labels else { continue }
                var histogram =
                    restored.histograms[base]?[values]
                    ?? Histogram(perBucket: Array(repeating: 0, count: family.buckets.count))
                switch suffix {
                case "_sum": histogram.sum = value
                case "_count": histogram.count = value
                default:
                    // Cumulative in the file; per bucket here (the differences are taken once all are read).
                    if let bound, let index = family.buckets.firstIndex(where: { Self.number($0) == bound }) {
                        histogram.perBucket[index] = value
                    }
                }
                restored.histograms[base, default: [:]][values] = histogram
                taken += 1
            }
        }
        for (name, series) in restored.histograms {
            for (labels, var histogram) in series {
                for index in stride(from: histogram.perBucket.count - 1, to: 0, by: -1) {
                    histogram.perBucket[index] = max(0, histogram.perBucket[index] - histogram.perBucket[index - 1])
                }
                restored.histograms[name]?[labels] = histogram
            }
        }
        state.withLock { $0 = restored }
        return taken
    }

    /// One sample line: the name, the labels in order, the value; nil when malformed.
    static func sample(_ line: Substring) -> (String, [(String, String)], Double)? {
        var rest = line[...]
        let nameEnd = rest.firstIndex { $0 == "{" || $0 == " " } ?? rest.endIndex
        let name = String(rest[..<nameEnd])
        rest = rest[nameEnd...]
        var labels: [(String, String)] = []
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                guard let equals = rest.firstIndex(of: "="), rest[rest.index(after: equals)...].first == "\"" else {
                    return nil
                }
                let key = String(rest[..<equals])
                rest = rest[rest.index(equals, offsetBy: 2)...]
                var value = ""
                var closed = false
                while let character = rest.popFirst() {
                    if character == "\"" {
                        closed = true
                        break
                    }
                    if character == "\\" {
                        switch rest.popFirst() {
                        case "n": value.append("\n")
                        case let escaped?: value.append(escaped)
                        case nil: return nil
                        }
                    } else {
                        value.append(character)
                    }
                }
                guard closed else { return nil }
                labels.append((key, value))
                if rest.first == "," { rest = rest.dropFirst() }
                guard !rest.isEmpty else { return nil }
            }
            rest = rest.dropFirst()
        }
        guard rest.first == " ", let value = Double(rest.dropFirst()) else { return nil }
        return (name, labels, value)
    }
}
