import KeywayCore
import KeywayTestSupport
import Testing

@testable import KeywayTOTP

/// `keyway enroll totp` as the person sees it: three wrong codes save nothing, and the entry the app already made is
/// named so it can be deleted (the phone would otherwise keep an entry whose codes never work).
@Suite("TOTP enrollment")
struct TOTPEnrollmentTests {
    @Test(
        "three wrong confirmations: nothing saved, refused as an enrollment (not a configuration error), the entry named"
    )
    func deadEntryNamed() throws {
        let store = InMemoryStore()
        let clock = ManualClock(Timestamp(seconds: 1_800_000_010))
        let vault = LocalVault(store: store, clock: clock, keepers: [TOTPKeeper(store: store, clock: clock)])
        let conversation = ScriptedConversation(typing: "000000", "111111", "222222")
        let request = EnrollmentRequest(user: "alice", actor: "root")
        do {
            _ = try TOTPAuthenticator(vault: vault).enroll(request, conversation: conversation)
            Issue.record("enrolled with three wrong codes")
        } catch {
            #expect(error.code == .enrollmentRefused, "\(error)")
            let account = "alice" + (TOTPAuthenticator.hostName.map { "@\($0)" } ?? "")
            #expect(error.reason.contains("delete the entry Keyway (\(account))"), "\(error.reason)")
        }
        #expect(try store.enrollment(user: "alice", factor: .totp) == nil)
        #expect(conversation.messages.filter { $0.kind == .error }.count == 3)
    }
}
