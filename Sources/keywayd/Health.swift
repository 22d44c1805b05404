import Glibc
import KeywayConfig
import KeywayConfigFiles
import KeywayCore
import KeywayDaemon
import KeywayPlatform
import KeywayStore
import KeywayWire
import Synchronization

/// keywayd's checks beyond the server's own, for `keyway health` (keywayd(8), HEALTH): the store reachable and
/// writable, the configuration valid and the one keywayd enforces, the readers present, the fleet's database and what
/// a failover would do.
enum Health {
    static func checks(
        store: any Store, vault: LocalVault, storePath: String, telemetry: Telemetry, configPath: String?,
        settings: SettingsBook, backends: [String: any DeviceBackend]
    ) -> [HealthCheck] {
        var checks: [HealthCheck] = []
        checks.append(self.store(store, path: storePath, telemetry: telemetry))
        checks.append(configuration(configPath, enforced: settings))
        if let file = telemetry.options.file {
            checks.append(
                telemetry.fileProblem.map {
                    HealthCheck("metrics", .warning, "\($0); node_exporter shows old figures (keyway metrics answers)")
                } ?? HealthCheck("metrics", .ok, "written to \(file)"))
        }
        for (name, backend) in backends.sorted(by: { $0.key < $1.key }) {
            do throws(AuthenticationError) {
                try backend.check()
                checks.append(HealthCheck("reader \(name)", .ok, "\(backend.name) \(backend.place)"))
            } catch {
                checks.append(
                    HealthCheck("reader \(name)", .warning, "cannot be used (the policies fall back): \(error.reason)"))
            }
        }
        return checks
    }

    /// The store: read (a query of the counters), written lately without an error, and for a host's SQLite file a
    /// file system that takes writes; for a fleet's database, the server a primary and its synchronous standbys.
    static func store(_ store: any Store, path: String, telemetry: Telemetry) -> HealthCheck {
        if let database = store as? PostgresStore { return self.database(database, telemetry: telemetry) }
        do throws(AuthenticationError) {
            _ = try store.failingAccounts(atLeast: Int.max, limit: 1)
        } catch {
            return HealthCheck(
                "store", .critical, "cannot be read (every authentication fails closed): \(error.reason)")
        }
        if let failure = telemetry.lastWriteFailed {
            let ago = (MonotonicClock.milliseconds() - failure.at) / 1000
            return HealthCheck(
                "store", .critical, "the last write failed \(ago) s ago (attempts cannot be counted): \(failure.reason)"
            )
        }
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else {
            return HealthCheck("store", .critical, "cannot look at \(directory): \(String(cString: strerror(errno)))")
        }
        if info.f_flag & UInt(ST_RDONLY) != 0 {
            return HealthCheck(
                "store", .critical, "\(directory) is mounted read-only: no attempt can be counted, so all fail")
        }
        let free = UInt64(info.f_bavail) * UInt64(info.f_frsize)
        if free < 1 << 20 {
            return HealthCheck("store", .critical, "\(directory) has \(free / 1024) KiB free: writes will fail")
        }
        if free < 64 << 20 {
            return HealthCheck("store", .warning, "\(directory) has \(free >> 20) MiB free")
        }
        return HealthCheck("store", .ok, "\(path): read and writable, \(free >> 20) MiB free")
    }

    /// A fleet's database: answering, a primary, a write not failing lately, and what a failover would keep.
    static func database(_ database: PostgresStore, telemetry: Telemetry) -> HealthCheck {
        switch (database.probe(), database.failoverState()) {
        case (.failure(let error), _), (_, .failure(let error)):
            return HealthCheck("database", .critical, "cannot be used (authentications fail closed): \(error.reason)")
        case (.success(let line), .success(let state)):
            guard state.primary else {
                return HealthCheck("database", .critical, "\(line): the server is a standby; nothing can be counted")
            }
            if let failure = telemetry.lastWriteFailed {
                let ago = (MonotonicClock.milliseconds() - failure.at) / 1000
                return HealthCheck("database", .critical, "the last write failed \(ago) s ago: \(failure.reason)")
            }
            let failover =
                state.synchronous.isEmpty
                ? "no synchronous standby: a failover may lose the latest counts (keywayd(8), FLEETS)"
                : "synchronous standby '\(state.synchronous)': a failover keeps every count"
            if let held = longHeld(database) {
                return HealthCheck(
                    "database", .warning,
                    "role \(held.role) (server process \(held.pid)) has held an account's lock for at least "
                        + "\(held.seconds) s: every host answers that account unavailable meanwhile; end it with "
                        + "SELECT pg_terminate_backend(\(held.pid)) (keywayd(8), FLEETS)")
            }
            return HealthCheck("database", .ok, "\(line); \(failover)")
        }
    }

    /// How long a lock may be held before health warns: keywayd's own transactions end within its timeout.
    static let lockHeldLimit: Int64 = 5_000

    /// The locks seen held, by holder and key, with when each was first seen (monotonic ms).
    private static let locksSeen = Mutex<[String: Int64]>([:])

    /// A lock another session has held since an earlier look at least `lockHeldLimit` ago (a host's role holding an
    /// account's lock in an open transaction denies that account to every host), or nil.
    static func longHeld(_ database: PostgresStore) -> (role: String, pid: String, seconds: Int64)? {
        guard case .success(let held) = database.heldLocks() else { return nil }
        let now = MonotonicClock.milliseconds()
        return locksSeen.withLock { seen in
            var still: [String: Int64] = [:]
            var oldest: (role: String, pid: String, seconds: Int64)? = nil
            for lock in held {
                let name = "\(lock.pid) \(lock.key)"
                let since = seen[name] ?? now
                still[name] = since
                if now - since >= lockHeldLimit, (oldest?.seconds ?? -1) < (now - since) / 1000 {
                    oldest = (lock.role, lock.pid, (now - since) / 1000)
                }
            }
            seen = still
            return oldest
        }
    }

    /// The configuration as the module reads it now: errors fail every stack closed; unusable policies fail theirs;
    /// settings changed since keywayd started are not enforced until it restarts.
    static func configuration(_ path: String?, enforced: SettingsBook) -> HealthCheck {
        switch ConfigurationFiles.load(path) {
        case .failure(let problems):
            let first = problems.errors.first?.headline ?? "cannot be read"
            return HealthCheck(
                "configuration", .critical, "has errors (pam_keyway fails closed; keyway policy check): \(first)")
        case .success(let configuration):
            if let (name, errors) = configuration.unusable.sorted(by: { $0.key < $1.key }).first {
                return HealthCheck(
                    "configuration", .warning,
                    "policy '\(name)' cannot be used (stacks naming it fail closed): "
                        + (errors.first?.headline ?? "errors"))
            }
            if configuration.settings != enforced {
                return HealthCheck(
                    "configuration", .warning,
                    "the factors' settings changed since keywayd started; it enforces the old ones until restarted "
                        + "(systemctl restart keywayd)")
            }
            let warnings = configuration.warnings.isEmpty ? "" : ", \(configuration.warnings.count) warnings"
            let read =
                configuration.files.isEmpty
                ? "no \(path ?? ConfigurationFiles.defaultPath), \(configuration.policies.count) built-in policies"
                : "\(configuration.files.joined(separator: ", ")), \(configuration.policies.count) policies"
            return HealthCheck("configuration", .ok, "valid: " + read + warnings)
        }
    }
}
