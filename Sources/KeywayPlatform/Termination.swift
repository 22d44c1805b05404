import CKeywayLibc

/// keywayd's orderly stop: SIGTERM (systemd's stop, `kill`), SIGINT (Ctrl-C in the foreground) and SIGHUP are held
/// back from every thread and taken by one thread that waits for them, so keywayd can take back what it leaves for
/// other processes (its socket, its availability notes: a module must not prompt from a note of a keywayd that has
/// gone) before it exits (docs/ARCHITECTURE.md §10, "Notes").
public enum Termination {
    /// The signals that stop keywayd.
    static var signals: [Int32] { [SIGTERM, SIGINT, SIGHUP] }

    private static func set() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        return set
    }

    /// Holds the signals back in this thread and every thread it makes from now on: call first in `main`, before
    /// any thread exists.
    public static func holdSignals() {
        var held = set()
        pthread_sigmask(SIG_BLOCK, &held, nil)
    }

    /// Starts the thread that waits for one of the signals, runs `tidy` with it and ends the process with status 0
    /// (`_exit`: no exit handler runs while other threads may be mid-request, which a store survives as it survives
    /// SIGKILL). False when no thread could be had.
    public static func onSignal(_ tidy: @escaping @Sendable (Int32) -> Void) -> Bool {
        spawn {
            var waited = set()
            var signal: Int32 = 0
            while sigwait(&waited, &signal) != 0 {}
            tidy(signal)
            _exit(0)
        }
    }
}
