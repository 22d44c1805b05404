import CKeywayLibc

/// keywayd's open-descriptor limit (RLIMIT_NOFILE). A daemon starts with the soft limit of 1,024 whatever it needs;
/// keywayd raises it at start to what its connection limits let clients make it hold at once, so that no client can
/// exhaust it for the others (docs/ARCHITECTURE.md §10, "Passed descriptors are hostile").
public enum DescriptorLimit {
    /// Raises the soft limit to `wanted`, and the hard limit too when it is lower and the process may (root, within
    /// fs.nr_open). `.success` with the limit now when it reaches `wanted`; `.failure` with the limit now otherwise.
    public static func raise(to wanted: UInt64) -> Result<UInt64, Shortfall> {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return .failure(Shortfall(limit: 0)) }
        if limit.rlim_cur >= wanted { return .success(UInt64(limit.rlim_cur)) }
        var raised = limit
        raised.rlim_cur = rlim_t(wanted)
        raised.rlim_max = max(limit.rlim_max, rlim_t(wanted))
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return .success(wanted) }
        // Not allowed past the hard limit: as far as it goes.
        raised = limit
        raised.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised)
        _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let now = UInt64(limit.rlim_cur)
        return now >= wanted ? .success(now) : .failure(Shortfall(limit: now))
    }

    /// The limit reached, short of what was wanted.
    public struct Shortfall: Error {
        public let limit: UInt64
    }
}
