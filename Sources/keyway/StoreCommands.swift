import Glibc
import KeywayCore
import KeywayFactors
import KeywayPlatform
import KeywayStore

/// `keyway store migrate` and `keyway store copy`: a fleet's database made ready, and a host's store moved into it
/// (keyway(8), STORE; docs/GUIDE.md, "Fleets").
extension Command {
    /// Options for opening a store by its location, as root, with `--passfile`.
    private func storeOptions(_ location: String, create: Bool) -> Stores.Options {
        var options = Stores.Options(location: location)
        options.create = create
        options.spendable = Factors.spendable
        if let passfile = parsed.value("--passfile") { options.passfile = passfile }
        return options
    }

    private func requireRoot() {
        guard getuid() == 0 else {
            Keyway.printError("keyway: \(tool) works on stores directly, which only root may do")
            Keyway.finish(ExitStatus.notPermitted)
        }
    }

    func storeMigrate() -> Int32 {
        requireRoot()
        let uri = operands[0]
        guard PostgresStore.isDatabaseURI(uri) else {
            Keyway.fail(
                usage: "'\(uri.escapingControlCharacters)' is not a postgresql:// URI (an SQLite store migrates itself "
                    + "when keywayd opens it).", command: subcommand)
        }
        return attempt { () throws(AuthenticationError) in
            var options = PostgresStore.Options(uri: uri)
            options.spendable = Factors.spendable
            if let passfile = parsed.value("--passfile") { options.passfile = passfile }
            let store = try PostgresStore(options)
            let roles = (parsed.value("--grant") ?? "").split(separator: ",").map(String.init)
            let writers = (parsed.value("--grant-writer") ?? "").split(separator: ",").map(String.init)
            let found = try store.migrate(granting: roles, writers: writers, parts: Factors.database)
            let current = PostgresStore.schemaVersion
            print(
                found == current
                    ? "schema version \(current): already current"
                    : "schema version \(found) → \(current)")
            for role in roles { print("granted \(role) a host's functions, and no table") }
            for role in writers { print("granted \(role) a host's functions and every table's rows (a writer)") }
        }
    }

    func storeCopy() -> Int32 {
        requireRoot()
        let (from, to) = (operands[0], operands[1])
        return attempt { () throws(AuthenticationError) in
            let source = try Stores.open(storeOptions(from, create: false)).store
            let target = try Stores.open(storeOptions(to, create: true)).store
            let contents = try StoreContents.read(from: source)
            try target.load(contents)
            var copied = try StoreContents.read(from: target)
            // A shared store names the host and the role of every change; the copied rows take this host's there.
            for index in copied.audit.indices where index < contents.audit.count {
                copied.audit[index].host = contents.audit[index].host
                copied.audit[index].role = contents.audit[index].role
            }
            guard copied == contents else {
                throw AuthenticationError(
                    .storeFailure, "\(to): what was read back differs from \(from); compare keyway status of both")
            }
            let users = Set(contents.enrollments.map(\.user)).count
            print(
                "copied \(contents.enrollments.count) enrollments of \(users) users, the counters of "
                    + "\(contents.attempts.count) users, \(contents.preferences.count) users' switches and "
                    + "\(contents.audit.count) audit rows; read back identical")
        }
    }
}
