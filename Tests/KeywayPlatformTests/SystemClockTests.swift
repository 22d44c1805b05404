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
}
