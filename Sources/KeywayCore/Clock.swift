/// A wall-clock instant, in milliseconds since the Unix epoch; lockouts persist across reboots, so they need wall time.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var milliseconds: Int64

    /// Creates an instant from milliseconds since the epoch.
    public init(milliseconds: Int64) { self.milliseconds = milliseconds }

    /// Creates an instant from whole seconds since the epoch.
    public init(seconds: Int64) { self.milliseconds = seconds * 1000 }

    /// The instant `duration` later.
    public func adding(_ duration: Duration) -> Timestamp {
        let (seconds, attoseconds) = duration.components
        return Timestamp(milliseconds: milliseconds &+ seconds &* 1000 &+ attoseconds / 1_000_000_000_000_000)
    }

    /// The time from `self` to `later` (negative when `later` is earlier).
    public func duration(to later: Timestamp) -> Duration { .milliseconds(later.milliseconds - milliseconds) }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.milliseconds < rhs.milliseconds }

    /// ISO 8601 in UTC with seconds, e.g. `2026-11-29T18:54:00Z`, for messages and logs.
    public var description: String {
        let totalSeconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let days = totalSeconds >= 0 ? totalSeconds / 86_400 : (totalSeconds - 86_399) / 86_400
        let secondsOfDay = totalSeconds - days * 86_400
        // Civil-from-days (Howard Hinnant's algorithm), so the core needs no calendar library.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(year)-\(two(month))-\(two(day))T\(two(secondsOfDay / 3600)):\(two(secondsOfDay % 3600 / 60))"
            + ":\(two(secondsOfDay % 60))Z"
    }
}

/// The source of the current time, injected so tests never sleep.
public protocol Clock: AnyObject, Sendable {
    /// The current wall-clock time.
    func now() -> Timestamp
}

extension Duration {
    /// A short human form: "30 seconds", "5 minutes", "1 hour".
    public var spokenDescription: String {
        let seconds = components.seconds + (components.attoseconds > 0 ? 1 : 0)
        func unit(_ value: Int64, _ name: String) -> String { "\(value) \(name)\(value == 1 ? "" : "s")" }
        if seconds < 60 { return unit(max(seconds, 1), "second") }
        if seconds < 3600 { return unit((seconds + 59) / 60, "minute") }
        return unit((seconds + 3599) / 3600, "hour")
    }
}
