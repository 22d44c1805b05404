import KeywayCore
import KeywayCrypto
import KeywayFactors
import KeywayTestSupport
import KeywayWire
import Testing

/// One conformance run over every entry of `Factors.all` (docs/ARCHITECTURE.md §11): each factor's keeper and person
/// side agree with what its plugin declares, its own specimen enrolls and verifies through the vault, a wrong
/// presentation fails and is counted, and its evidence crosses the wire unchanged (or, made by a device inside
/// keywayd, is refused from a client). A factor is listed with its
/// specimen (`FactorPlugin.Specimen`), so a new one is checked here without a line of this file changing.
@Suite("every factor in Factors.all: one conformance run")
struct FactorConformanceTests {
    @Test(
        "keeper, person side, specimen and wire agree with the plugin", arguments: Factors.all.map { $0.kind.rawValue })
    func conformance(_ name: String) throws {
        let plugin = try #require(Factors.all.plugin(FactorKind(rawValue: name)))
        let kind = plugin.kind
        let store = InMemoryStore()
        let clock = ManualClock()
        let hasher = try Argon2idHasher(cost: .minimum)
        // The vault keywayd builds: every factor's keeper, since factors lean on each other (the biometric on the
        // passcode to fall back on).
        let keepers = Factors.all.map { other in
            other.vaultSide(.init(store: store, clock: clock, hasher: hasher, settings: FactorSettings()))
        }
        let keeper = try #require(keepers.first { $0.factor == kind })
        // One declaration: the keeper and the person side say what the plugin says.
        #expect(keeper.codes == plugin.codes, "\(kind): the keeper's codes differ from the plugin's")
        #expect(keeper.changeable == plugin.changeable, "\(kind): the keeper and the plugin differ on changing")
        let vault = LocalVault(store: store, clock: clock, keepers: keepers)
        let person = plugin.personSide(
            .init(vault: vault, settings: FactorSettings(), sensorDirectory: "/nonexistent/keyway", sensorOwner: 0))
        #expect(person.factor == kind)
        #expect(person.codes == plugin.codes, "\(kind): the person side's codes differ from the plugin's")
        #expect((plugin.input == .presented) == (plugin.arming != nil), "\(kind): presented exactly when armed")

        let stranger = UserContext(name: "conformance-stranger")
        #expect(vault.availability(of: kind, for: stranger) == .notEnrolled, "\(kind)")
        #expect(
            vault.availability(of: kind, for: stranger).error(for: kind, codes: plugin.codes)?.code
                == plugin.codes.notEnrolled)

        // Every factor's specimen enrolled, this one's presentations kept.
        let user = UserContext(name: "conformance-user")
        var shown: FactorPlugin.Specimen.Presentations? = nil
        for other in Factors.all {
            let presentations = try other.specimen.enroll(vault, user.name, clock)
            if other.kind == kind { shown = presentations }
        }
        let mine = try #require(shown)
        #expect(vault.availability(of: kind, for: user).isAvailable, "\(kind): enrolled but not available")
        let status = try #require(try vault.status(of: user.name).first?[kind])
        #expect(status.enrolled?.by == "conformance", "\(kind): \(status)")

        // The wire carries both presentations unchanged; what a device made inside keywayd no client may send.
        for evidence in [mine.right, mine.wrong] {
            let request = Request.verify(kind, user, evidence)
            if case .device = evidence {
                #expect(throws: WireError.self, "\(kind): a client sent a device's evidence") {
                    try Request(decoding: request.encoded)
                }
            } else {
                #expect(try Request(decoding: request.encoded) == request, "\(kind): the evidence did not round-trip")
            }
        }
        // Right passes, wrong fails and is counted.
        #expect(try vault.verify(mine.right, of: kind, for: user) == .success, "\(kind): its specimen is refused")
        #expect(try vault.verify(mine.wrong, of: kind, for: user) != .success, "\(kind): a wrong one passed")
        #expect(try vault.status(of: user.name).first?[kind]?.failures == 1, "\(kind): the failure was not counted")
    }
}
