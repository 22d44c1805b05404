#if hasFeature(Embedded)
    import Synchronization

    /// Embedded Swift's Synchronization module has `Atomic` but no `Mutex`, so the PAM module (built in that mode,
    /// docs/ARCHITECTURE.md §4) gets this one, with the same `withLock` shape; the full-mode build keeps the standard
    /// library's. It spins on an atomic flag: the module runs one thread per PAM handle, so nothing contends for it, and
    /// the locks it guards are never held across a wait for the person, the daemon or the sensor.
    public final class Mutex<Value>: @unchecked Sendable {
        private let held = Atomic<Bool>(false)
        private var value: Value

        /// A lock around `value`.
        public init(_ value: Value) { self.value = value }

        /// Runs `body` with the value while holding the lock.
        public func withLock<Result, Failure: Error>(
            _ body: (inout Value) throws(Failure) -> Result
        ) throws(Failure) -> Result {
            while !held.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged {}
            defer { held.store(false, ordering: .releasing) }
            return try body(&value)
        }
    }
#endif
