import CKeywayLibc

/// The system's accounts and groups, read through NSS (getpwnam_r, getgrouplist, getgrnam_r). Each lookup grows
/// its buffer on ERANGE (a group of thousands of members), and a lookup that fails for any other reason is an
/// error, never an answer: unknown means no (docs/ARCHITECTURE.md §11).
public enum Accounts {
    /// Why NSS could not answer.
    public struct LookupFailure: Error, Sendable, CustomStringConvertible {
        /// What was looked up and why it failed.
        public var description: String
    }

    /// The largest buffer a lookup grows to: an entry larger than this is a failure.
    static let largestBuffer = 1 << 20

    /// Runs a reentrant NSS lookup with a buffer that grows on ERANGE; `.success(nil)` when there is no entry.
    /// glibc says "no entry" as 0 with no result; any error number is a source that could not answer, ENOENT
    /// included (nss_hesiod without its configuration, sssd stopped): the entry may exist there.
    private static func lookup<Entry, Value>(
        _ what: String, _ empty: Entry,
        _ call: (
            UnsafeMutablePointer<Entry>, UnsafeMutablePointer<CChar>, Int,
            UnsafeMutablePointer<UnsafeMutablePointer<Entry>?>
        ) -> Int32,
        _ read: (Entry) -> Value
    ) -> Result<Value?, LookupFailure> {
        var size = 16_384
        while true {
            var entry = empty
            var found: UnsafeMutablePointer<Entry>?
            var buffer = [CChar](repeating: 0, count: size)
            let status = buffer.withUnsafeMutableBufferPointer { call(&entry, $0.baseAddress!, $0.count, &found) }
            if status == ERANGE && size < largestBuffer {
                size *= 4
                continue
            }
            guard status == 0 else {
                return .failure(LookupFailure(description: "\(what): \(String(cString: strerror(status)))"))
            }
            return .success(found == nil ? nil : read(entry))
        }
    }

    /// The uid of the account `user`; nil when there is none; a failure when NSS cannot say.
    public static func uid(of user: String) -> Result<UInt32?, LookupFailure> {
        lookup("the account \(user)", passwd(), { getpwnam_r(user, $0, $1, $2, $3) }) { $0.pw_uid }
    }

    /// The account name of `uid`, or nil when it has none or NSS cannot say (keywayd names its callers with it).
    /// Root needs no lookup: that spares every request from the module inside sudo or login a read of the password
    /// database.
    public static func name(of uid: UInt32) -> String? {
        if uid == 0 { return "root" }
        let found = lookup("uid \(uid)", passwd(), { getpwuid_r(uid, $0, $1, $2, $3) }) { entry in
            entry.pw_name.map { String(cString: $0) }
        }
        if case .success(let name??) = found { return name }
        return nil
    }

    /// The primary gid of the account `user`.
    private static func primaryGroup(of user: String) -> Result<UInt32?, LookupFailure> {
        lookup("the account \(user)", passwd(), { getpwnam_r(user, $0, $1, $2, $3) }) { $0.pw_gid }
    }

    /// Whether `user` is an account of this system (NSS: /etc/passwd, LDAP, …). Names are case-sensitive, as
    /// getpwnam's are. A failed lookup counts as no account.
    public static func exists(_ user: String) -> Bool {
        if case .success(.some) = uid(of: user) { return true }
        return false
    }

    /// Whether the account `user` is a member of `group`, as its primary group or a supplementary one: false when
    /// either does not exist, a failure when NSS cannot say (an error, a group entry too large to read), which the
    /// caller must treat as unknown, never as "not a member".
    public static func isMember(_ user: String, of groupName: String) -> Result<Bool, LookupFailure> {
        let primary: UInt32
        switch primaryGroup(of: user) {
        case .success(let gid?): primary = gid
        case .success(nil): return .success(false)
        case .failure(let failure): return .failure(failure)
        }
        let wanted: UInt32
        switch lookup("the group \(groupName)", group(), { getgrnam_r(groupName, $0, $1, $2, $3) }, { $0.gr_gid }) {
        case .success(let gid?): wanted = gid
        case .success(nil): return .success(false)
        case .failure(let failure): return .failure(failure)
        }
        if primary == wanted { return .success(true) }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        while getgrouplist(user, primary, &groups, &count) == -1 {
            guard count > Int32(groups.count), count <= 65_536 else {
                return .failure(LookupFailure(description: "the groups of \(user): more than 65536"))
            }
            groups = [gid_t](repeating: 0, count: Int(count))
        }
        return .success(groups.prefix(Int(count)).contains(wanted))
    }
}
