import KeywayCore
import KeywayTestSupport
import KeywayWire
import Testing

/// keywayd's availability notes (docs/ARCHITECTURE.md §10, "Notes"): the file's form, and what the vault notes.
@Suite("availability notes: the form and what is noted")
struct AvailabilityNoteTests {
    @Test("a note reads back as written; anything but exactly one whole note is no note")
    func form() throws {
        let note = AvailabilityNote(user: "alice", concealing: [.gesture, .passcode], plain: [.passcode])
        #expect(try AvailabilityNote(decoding: note.encoded) == note)
        #expect(note.lists(.gesture, concealing: true) && !note.lists(.gesture, concealing: false))
        var trailing = note.encoded
        trailing.append(0)
        #expect(throws: WireError.self) { try AvailabilityNote(decoding: trailing) }
        #expect(throws: WireError.self) { try AvailabilityNote(decoding: Array(note.encoded.dropLast())) }
        var magic = note.encoded
        magic[10] ^= 1
        #expect(throws: WireError.self) { try AvailabilityNote(decoding: magic) }
        let crowded = AvailabilityNote(
            user: "alice", concealing: (0..<17).map { FactorKind(rawValue: "f\($0)") }, plain: [])
        #expect(throws: WireError.self) { try AvailabilityNote(decoding: crowded.encoded) }
        let empty = AvailabilityNote(user: "alice", concealing: [.passcode], plain: [FactorKind(rawValue: "")])
        #expect(throws: WireError.self) { try AvailabilityNote(decoding: empty.encoded) }
    }

    @Test("a note's file is its name's bytes in hex, never a path; a name too long has none")
    func fileNames() {
        #expect(AvailabilityNote.fileName(for: "alice") == "616c696365")
        #expect(AvailabilityNote.fileName(for: "..") == "2e2e")
        #expect(AvailabilityNote.fileName(for: "a/b") == "612f62")
        #expect(AvailabilityNote.fileName(for: String(repeating: "x", count: 100))?.utf8.count == 200)
        #expect(AvailabilityNote.fileName(for: String(repeating: "x", count: 101)) == nil)
        #expect(AvailabilityNote.fileName(for: "") == nil)
        #expect(
            AvailabilityNote.directory(besideSocket: "/run/keyway/keywayd.sock") == "/run/keyway/keywayd.sock.notes")
    }

    @Test("noted: what availability answers, both ways; a throttled or switched-off factor is not listed")
    func noted() throws {
        let vault = try patternAndPasscodeVault(InMemoryStore())
        let passcode = Secret(copying: Array("739155".utf8))
        try vault.enroll(.secret(passcode), of: .passcode, for: "alice", label: nil, by: "t")
        func agrees(_ user: String) throws {
            let lists = try vault.noted(user)
            for factor in [FactorKind.gesture, .passcode] {
                for concealing in [true, false] {
                    let answer = vault.availability(
                        of: factor, for: UserContext(name: user, concealsEnrollment: concealing))
                    let listed = (concealing ? lists.concealing : lists.plain).contains(factor)
                    #expect(listed == (answer == .available), "\(user) \(factor) concealing=\(concealing)")
                }
            }
        }
        // Concealing, a name with nothing enrolled is listed as one with everything: the notes tell nobody more.
        #expect(try vault.noted("alice").concealing == [.gesture, .passcode])
        #expect(try vault.noted("nobody-here").concealing == [.gesture, .passcode])
        #expect(try vault.noted("alice").plain == [.passcode])
        #expect(try vault.noted("nobody-here").plain == [])
        try agrees("alice")
        try vault.set("passcode.enabled", to: false, of: "alice", by: "t")
        #expect(try vault.noted("alice").plain == [])
        try agrees("alice")
        try vault.set("passcode.enabled", to: true, of: "alice", by: "t")
        // Five different wrong passcodes (a repeated one is not counted again).
        for guess in 0..<5 {
            let wrong = Secret(copying: Array("10000\(guess)".utf8))
            _ = try vault.verify(.secret(wrong), of: .passcode, for: UserContext(name: "alice"))
        }
        #expect(try vault.noted("alice").plain == [])
        #expect(!(try vault.noted("alice").concealing.contains(.passcode)))
        try agrees("alice")
    }
}
