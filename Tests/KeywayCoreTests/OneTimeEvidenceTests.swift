import KeywayCore
import KeywayTestSupport
import Testing

/// Evidence that may be used once (a one-time code): the store marks the step that matched in the check itself, so
/// of two checks of one code exactly one matches (`Store.checkOneTimeCode`; every store runs the rest of this in
/// `StoreConformance.checkOneTimeCodes`).
@Suite("one-time codes, used once")
struct OneTimeEvidenceTests {
    let store = InMemoryStore()
    let totp = FactorKind(rawValue: "otp")
    let generator = OneTimeCode(secret: Array(1...20))
    let now = Timestamp(milliseconds: 1_800_000_045_000)

    init() throws {
        try store.save(
            Enrollment(
                user: "carol", factor: totp, payload: generator.record,
                changedAt: Timestamp(milliseconds: 1_700_000_000_000), changedBy: "root"))
    }

    @Test("a step matches once; a later step's code still matches once after it, an earlier one never")
    func once() throws {
        let step = generator.step(at: now)
        func check(_ step: Int64) throws -> Int64? {
            try store.checkOneTimeCode(
                user: "carol", factor: totp, code: generator.code(step: step), window: 1, remote: false, at: now)?.step
        }
        #expect(try check(step) == step)
        #expect(try check(step) == nil)
        #expect(try check(step + 1) == step + 1, "a phone a little ahead: the next code, once")
        #expect(try check(step + 1) == nil)
        #expect(try check(step) == nil, "an earlier step's code after a later one")
    }

    @Test("of many parallel checks of one code, exactly one matches")
    func parallel() async throws {
        let (store, totp, now) = (self.store, self.totp, self.now)
        let code = generator.code(step: generator.step(at: now))
        let wins = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<32 {
                group.addTask {
                    let check = try? store.checkOneTimeCode(
                        user: "carol", factor: totp, code: code, window: 1, remote: false, at: now)
                    return check?.step != nil
                }
            }
            var count = 0
            for await won in group where won { count += 1 }
            return count
        }
        #expect(wins == 1)
    }
}
