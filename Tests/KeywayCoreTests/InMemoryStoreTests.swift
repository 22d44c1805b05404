import KeywayCore
import KeywayTestSupport
import Testing

@Suite("InMemoryStore")
struct InMemoryStoreTests {
    @Test("passes the store conformance checks")
    func conformance() {
        let problems = StoreConformance.check(InMemoryStore())
        #expect(problems.isEmpty, "\(problems)")
    }
}
