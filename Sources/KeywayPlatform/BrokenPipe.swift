import CKeywayLibc

/// A write to a pipe or socket whose reader has gone ends in an error the writer handles (EPIPE), never in SIGPIPE
/// killing the writer: `keyway status | head -1`, a test whose child exited before reading its input, a probe whose
/// parent stopped reading. Programs (the CLI, test processes, helpers) call `ignoreSignal()` once at start.
///
/// The PAM module never calls it: it must not change its host's signal dispositions, so it sends with
/// `MSG_NOSIGNAL` instead (docs/ARCHITECTURE.md §7).
public enum BrokenPipe {
    /// `keyway_ignore_signal(SIGPIPE)`: from now on a write to a closed pipe fails with EPIPE.
    public static func ignoreSignal() {
        keyway_ignore_signal(SIGPIPE)
    }

    /// True when `descriptor` is a pipe or socket whose reading end has closed (`poll` reports POLLERR or POLLHUP
    /// for writing): the reader chose to stop reading, which is not the writer's error.
    public static func readerLeft(_ descriptor: Int32) -> Bool {
        var poller = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
        guard poll(&poller, 1, 0) > 0 else { return false }
        return poller.revents & Int16(POLLERR | POLLHUP) != 0
    }
}
