import CKeywayLibc

/// The system's accounts and groups, read through NSS (getpwnam_r, getgrouplist, getgrnam_r).
public enum Accounts {
    /// Whether `user` is an account of this system (NSS: /etc/passwd, LDAP, …). Names are case-sensitive, as
    /// getpwnam's are.
    public static func exists(_ user: String) -> Bool {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        return getpwnam_r(user, &entry, &buffer, buffer.count, &found) == 0 && found != nil
    }

    /// Whether the account `user` is a member of `group`, as its primary group or a supplementary one. False when
    /// either does not exist.
    public static func isMember(_ user: String, of groupName: String) -> Bool {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwnam_r(user, &entry, &buffer, buffer.count, &found) == 0, found != nil else { return false }
        var groupEntry = group()
        var groupFound: UnsafeMutablePointer<group>?
        var groupBuffer = [CChar](repeating: 0, count: 65_536)
        guard getgrnam_r(groupName, &groupEntry, &groupBuffer, groupBuffer.count, &groupFound) == 0, groupFound != nil
        else { return false }
        let wanted = groupEntry.gr_gid
        if entry.pw_gid == wanted { return true }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        while getgrouplist(user, entry.pw_gid, &groups, &count) == -1 {
            guard count > Int32(groups.count), count <= 65_536 else { return false }
            groups = [gid_t](repeating: 0, count: Int(count))
        }
        return groups.prefix(Int(count)).contains(wanted)
    }
}
