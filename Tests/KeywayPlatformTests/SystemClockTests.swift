import KeywayCore
import KeywayPlatform
import Testing

@Suite("SystemClock")
struct SystemClockTests {
    @Test("reads a plausible wall-clock time that does not go backwards between reads")
    func plausible() {
        let first = SystemClock().now()
        let second = SystemClock().now()
        #expect(first > Timestamp(seconds: 1_767_225_600 - 86_400 * 365))  // after 2025
        #expect(second >= first)
    }

    @Test("a time said to a person is local: the time of day when it is today, with the day otherwise")
    func local() {
        let now = SystemClock().now()
        let soon = SystemClock.local(now, now: now)
        #expect(soon.count == 8 && soon.filter { $0 == ":" }.count == 2, "\(soon)")
        let later = SystemClock.local(now.adding(.seconds(3 * 86_400)), now: now)
        #expect(later.split(separator: " ").count == 4 && later.last?.isNumber == true, "\(later)")
    }
}
