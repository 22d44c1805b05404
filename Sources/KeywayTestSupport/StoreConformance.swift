import Glibc
public import KeywayCore

/// Checks every `Store` must pass, so the in-memory and SQLite stores behave the same.
/// Returns the problems found; the user names `store-conformance-*` must be unused.
public enum StoreConformance {
    /// Runs the checks against `store`.
    public static func check(_ store: any Store) -> [String] {
        var problems: [String] = []
        func expect(_ condition: Bool, _ what: String) { if !condition { problems.append(what) } }
        let user = "store-conformance-alice"
        let other = "store-conformance-bob"
        let at = Timestamp(seconds: 1_767_225_600)
        do {
            expect(try store.enrollment(user: user, factor: .passcode) == nil, "a new user has no enrollment")
            let first = Enrollment(user: user, factor: .passcode, payload: [1, 2, 3], changedAt: at, changedBy: "root")
            try store.save(first)
            expect(try store.enrollment(user: user, factor: .passcode) == first, "a saved enrollment reads back")
            let second = Enrollment(
                user: user, factor: .passcode, payload: [9], changedAt: at.adding(.seconds(1)),
                changedBy: "alice")
            try store.save(second)
            expect(try store.enrollment(user: user, factor: .passcode) == second, "saving replaces")
            try store.save(Enrollment(user: user, factor: .gesture, payload: [], changedAt: at, changedBy: "root"))
            expect(
                try store.enrollments(user: user).map(\.factor) == [.gesture, .passcode],
                "enrollments are listed by factor")
            expect(try store.enrollment(user: user, factor: .gesture)?.payload == [], "an empty payload reads back")

            var counted = 0
            try store.updateAttempts(user: user) { book in
                book[.passcode].consecutiveFailures += 2
                book[.passcode].lastFailure = at
                book[.passcode].recentMismatches = [[1, 2], [], [3]]
                book[.biometric].consecutiveFailures = 1
                counted = book[.passcode].consecutiveFailures
            }
            expect(counted == 2, "updateAttempts hands the body the book it writes back")
            let book = try store.attempts(user: user)
            expect(
                book[.passcode]
                    == AttemptState(
                        consecutiveFailures: 2, lastFailure: at,
                        recentMismatches: [[1, 2], [], [3]]),
                "counters read back exactly, got \(book[.passcode])")
            expect(try store.attempts(user: other) == AttemptBook(), "counters are per user")
            try store.updateAttempts(user: user) { $0[.biometric] = AttemptState() }
            expect(try store.attempts(user: user)[.biometric] == AttemptState(), "a cleared state reads as empty")
            try store.updateAttempts(user: other) { $0[.gesture].consecutiveFailures = 7 }
            expect(
                try store.failingAccounts(atLeast: 5, limit: 1_000_000).filter { $0.hasPrefix("store-conformance") }
                    == [other],
                "failingAccounts lists the names with that many failures in a factor")
            expect(
                try store.failingAccounts(atLeast: 2, limit: 1_000_000).filter { $0.hasPrefix("store-conformance") }
                    == [user, other],
                "failingAccounts lists each name once, sorted")
            expect(try store.failingAccounts(atLeast: 2, limit: 0).isEmpty, "failingAccounts keeps to its limit")
            expect(
                try store.users().filter { $0.hasPrefix("store-conformance") } == [user, other],
                "users lists enrolled users and users with counters")

            try store.resetAttempts(user: user, factor: .passcode, by: Attribution("root", at: at))
            expect(try store.attempts(user: user)[.passcode] == AttemptState(), "reset clears one factor")
            try store.resetAttempts(user: other, factor: nil, by: Attribution("root", at: at))
            expect(try store.attempts(user: other) == AttemptBook(), "reset without a factor clears all")

            expect(
                try store.removeEnrollment(user: user, factor: .gesture, by: Attribution("root", at: at)),
                "removing an enrollment reports it")
            expect(
                try !store.removeEnrollment(user: user, factor: .gesture, by: Attribution("root", at: at)),
                "removing a missing enrollment reports false")
            expect(try store.enrollments(user: user).map(\.factor) == [.passcode], "removal removes one factor")

            let trail = try store.auditTrail(user: user).map {
                "\($0.actor) \($0.action.rawValue) \($0.factor?.rawValue ?? "all")"
            }
            expect(
                trail == [
                    "root enroll passcode", "alice enroll passcode", "root enroll gesture",
                    "root reset passcode", "root remove gesture",
                ], "the audit trail records changes: \(trail)")
            expect(try store.auditTrail(user: other).map(\.action) == [.reset], "the audit trail is per user")
            let succeeded = Timestamp(milliseconds: 1_700_000_000_000)
            try store.updateAttempts(user: other) { book in
                book[.gesture] = AttemptState(consecutiveFailures: 3, lastFailure: at, lastSuccess: succeeded)
            }
            try store.resetAttempts(user: other, factor: nil, by: Attribution("root", at: at))
            expect(
                try store.attempts(user: other)[.gesture] == AttemptState(lastSuccess: succeeded),
                "reset keeps when a factor last succeeded (a one-time code stays used; the passcode's age stays)")
            try store.updateAttempts(user: other) { $0[.gesture] = AttemptState() }

            // A replacement happens only over the record it expects.
            let current = try store.enrollment(user: user, factor: .passcode)
            var newer = current ?? Enrollment(user: user, factor: .passcode, payload: [], changedAt: at, changedBy: "t")
            newer.payload = [7, 7, 7]
            var stale = newer
            stale.payload = [1]
            expect(try !store.replace(stale, with: newer), "a replacement over another record is refused")
            expect(
                try store.enrollment(user: user, factor: .passcode) == current, "a refused replacement changes nothing")
            if let current {
                expect(try store.replace(current, with: newer), "a replacement over the expected record is made")
                expect(try store.enrollment(user: user, factor: .passcode)?.payload == [7, 7, 7], "and stored")
                expect(
                    try store.enrollments(of: .passcode).filter { $0.user == user }.map { $0.payload } == [[7, 7, 7]],
                    "one factor's enrollments are read across users")
                expect(
                    try store.enrollments(of: .passcode).allSatisfy { $0.factor == .passcode },
                    "and only that factor's")
            }

            // Counters of names without an enrollment are capped, the latest kept; enrolled users' never go.
            for (index, name) in ["ghost-1", "ghost-2", "ghost-3", user].enumerated() {
                try store.updateAttempts(user: name) { book in
                    book[.gesture].consecutiveFailures = 1
                    book[.gesture].lastFailure = Timestamp(milliseconds: at.milliseconds + Int64(index))
                }
            }
            expect(try store.pruneCounters(ofUnenrolledKeeping: 1) == 2, "pruning reports the names it cleared")
            expect(try store.attempts(user: "ghost-3")[.gesture].consecutiveFailures == 1, "the latest name stays")
            expect(try store.attempts(user: "ghost-1") == AttemptBook(), "older names are cleared")
            expect(try store.attempts(user: user)[.gesture].consecutiveFailures == 1, "enrolled users are kept")
            // A name whose counters throttle it now is kept however many names come after it.
            try store.updateAttempts(user: "ghost-throttled") { book in
                book[.gesture].consecutiveFailures = AttemptState.deciding
                book[.gesture].lastFailure = Timestamp(milliseconds: at.milliseconds - 1000)
            }
            expect(try store.pruneCounters(ofUnenrolledKeeping: 0) >= 1, "pruning to none clears the fresh names")
            expect(
                try store.attempts(user: "ghost-throttled")[.gesture].consecutiveFailures == AttemptState.deciding,
                "a throttled name is never pruned")
            expect(try store.attempts(user: user)[.gesture].consecutiveFailures == 1, "enrolled users are kept")

            // Per-user switches: set, replaced, forgotten; each change in the audit trail with what was set.
            let switcher = "store-conformance-carol"
            expect(try store.preferences(user: switcher) == [:], "a new user has no preferences")
            try store.setPreference(
                user: switcher, key: "gesture.enabled", value: "off", by: Attribution("root", at: at))
            try store.setPreference(
                user: switcher, key: "gesture.show-trail", value: "off", by: Attribution("c", at: at))
            try store.setPreference(
                user: switcher, key: "gesture.show-trail", value: "on", by: Attribution("c", at: at))
            expect(
                try store.preferences(user: switcher) == ["gesture.enabled": "off", "gesture.show-trail": "on"],
                "preferences read back, the latest value kept")
            try store.setPreference(user: switcher, key: "gesture.enabled", value: nil, by: Attribution("root", at: at))
            expect(try store.preferences(user: switcher) == ["gesture.show-trail": "on"], "nil forgets a preference")
            expect(try store.preferences(user: other) == [:], "preferences are per user")
            expect(try store.users().contains(switcher), "a user with only preferences is listed")
            let switchTrail = try store.auditTrail(user: switcher)
            expect(
                switchTrail.map { $0.detail ?? "" }
                    == [
                        "gesture.enabled=off", "gesture.show-trail=off", "gesture.show-trail=on",
                        "gesture.enabled=default",
                    ],
                "each change is audited with what was set: \(switchTrail.map { $0.detail ?? "nil" })")
            expect(switchTrail.allSatisfy { $0.action == .set && $0.factor == .gesture }, "as a set of the gesture")
            // A change that changes nothing writes nothing: no row, no audit entry.
            try store.setPreference(
                user: switcher, key: "gesture.show-trail", value: "on", by: Attribution("c", at: at))
            try store.setPreference(user: switcher, key: "gesture.enabled", value: nil, by: Attribution("c", at: at))
            expect(try store.auditTrail(user: switcher).count == 4, "setting what is already set is not audited")

            // The audit trail is capped: routine rows (a switch set) go first, then the oldest of the rest, and the
            // count of those dropped is returned.
            let fullTrail = try store.auditTrail(user: nil)
            let important = fullTrail.filter { !$0.action.isRoutine }
            expect(important.count >= 2 && important.count < fullTrail.count, "the trail has rows of both kinds")
            expect(try store.pruneAudit(keeping: fullTrail.count) == 0, "a trail within its cap loses nothing")
            expect(
                try store.pruneAudit(keeping: important.count) == fullTrail.count - important.count,
                "pruning reports the rows it dropped")
            expect(
                try store.auditTrail(user: nil) == important,
                "enrollments, removals and resets are kept before a switch set")
            expect(try store.pruneAudit(keeping: 1) == important.count - 1, "the oldest important rows go next")
            expect(try store.auditTrail(user: nil) == Array(important.suffix(1)), "then the latest rows are kept")
            // One account toggling a switch keeps only its latest routine rows, however high the cap.
            let toggler = "store-conformance-toggler"
            for round in 0..<(AuditEntry.routineRowsPerAccount + 6) {
                try store.setPreference(
                    user: toggler, key: "gesture.enabled", value: round % 2 == 0 ? "off" : "on",
                    by: Attribution(toggler, at: at))
            }
            try store.setPreference(
                user: switcher, key: "gesture.enabled", value: "off", by: Attribution(switcher, at: at))
            expect(try store.pruneAudit(keeping: 100_000) == 6, "the toggler's oldest routine rows are dropped")
            expect(
                try store.auditTrail(user: toggler).count == AuditEntry.routineRowsPerAccount,
                "the toggler keeps its latest routine rows")
            expect(try store.auditTrail(user: switcher).count == 1, "another account's routine row is kept")
            expect(try store.auditTrail(user: nil).count == AuditEntry.routineRowsPerAccount + 2, "nothing else goes")
            // A host's accounts together keep only the host's latest routine rows; an enrollment is never one of them.
            let rowsBefore = try store.auditTrail(user: nil)
            let hostBound = rowsBefore.filter { $0.action.isRoutine }.count + 3
            for index in 0..<5 {
                try store.setPreference(
                    user: "store-conformance-host-\(index)", key: "gesture.enabled", value: "off",
                    by: Attribution("root", at: at))
            }
            expect(
                try store.pruneAudit(keeping: 100_000, routinePerHost: hostBound) == 2,
                "the host's two oldest routine rows beyond its bound are dropped")
            let afterHost = try store.auditTrail(user: nil)
            expect(
                afterHost.filter { $0.action.isRoutine }.count == hostBound
                    && afterHost.filter { !$0.action.isRoutine } == rowsBefore.filter { !$0.action.isRoutine },
                "the host keeps its latest routine rows and every enrollment, removal and reset")

            // The account in one read: what the three reads give.
            let account = try store.account(user: user)
            try store.setPreference(user: user, key: "passcode.enabled", value: "off", by: Attribution("root", at: at))
            let switched = try store.account(user: user)
            let enrollments = try store.enrollments(user: user)
            let attempts = try store.attempts(user: user)
            expect(
                account == AccountRecord(enrollments: enrollments, attempts: attempts, preferences: [:])
                    && switched
                        == AccountRecord(
                            enrollments: enrollments, attempts: attempts, preferences: ["passcode.enabled": "off"]),
                "account reads the enrollments, counters and preferences the other reads do")
            expect(!enrollments.isEmpty && attempts != AttemptBook(), "(an account with enrollments and counters)")
            expect(
                try store.account(user: "store-conformance-nobody")
                    == AccountRecord(enrollments: [], attempts: AttemptBook(), preferences: [:]),
                "an unknown user's account is empty")
            try store.setPreference(user: user, key: "passcode.enabled", value: nil, by: Attribution("root", at: at))
        } catch {
            problems.append("threw \(error)")
        }
        return problems + checkOneTimeCodes(store)
    }

    /// The wall clock, as a fleet's database checks codes by its own (the same machine in these tests).
    public static func wallClock() -> Timestamp {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Timestamp(milliseconds: Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000)
    }

    /// A one-time code matches once, whichever channel sent it; an earlier step's code after it, never; a new
    /// secret starts over; the code of the step an enrollment was made in never matches (it confirmed it).
    static func checkOneTimeCodes(_ store: any Store) -> [String] {
        var problems: [String] = []
        func expect(_ condition: Bool, _ what: String) { if !condition { problems.append(what) } }
        let user = "store-conformance-dave"
        let totp = FactorKind(rawValue: "totp")
        func check(_ generator: OneTimeCode, step: Int64, remote: Bool = false) throws(AuthenticationError) -> Int64? {
            let code = generator.code(step: step)
            try store.reserveOneTimeCode(user: user, factor: totp, code: code, remote: remote)
            return try store.checkOneTimeCode(
                user: user, factor: totp, code: code, window: 1, remote: remote, at: wallClock())?.step
        }
        do {
            let hourAgo = Timestamp(milliseconds: wallClock().milliseconds - 3_600_000)
            let first = OneTimeCode(secret: (0..<20).map { UInt8($0 * 11 + 5) })
            try store.save(
                Enrollment(user: user, factor: totp, payload: first.record, changedAt: hourAgo, changedBy: "root"))
            let step = first.step(at: wallClock())
            expect(try check(first, step: step) == step, "a current code matches")
            expect(try check(first, step: step) == nil, "the same code again does not")
            expect(try check(first, step: step, remote: true) == nil, "nor from the other channel")
            expect(try check(first, step: step - 1) == nil, "nor an earlier step's code after it")
            let second = OneTimeCode(secret: (0..<20).map { UInt8($0 * 13 + 1) })
            try store.save(
                Enrollment(
                    user: user, factor: totp, payload: second.record, changedAt: hourAgo.adding(.seconds(1)),
                    changedBy: "root"))
            expect(try check(second, step: step) == step, "a new secret's current code matches: it starts over")
            let made = wallClock()
            try store.save(
                Enrollment(user: user, factor: totp, payload: first.record, changedAt: made, changedBy: "root"))
            expect(
                try check(first, step: first.step(at: made)) == nil,
                "the code of the step an enrollment was made in does not match")
            try store.removeEnrollment(user: user, factor: totp, by: Attribution("root", at: made))
        } catch {
            problems.append("one-time codes: threw \(error)")
        }
        return problems
    }
}
