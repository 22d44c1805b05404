import Glibc
import KeywayTestSupport
import Synchronization
import Testing

@testable import KeywayPlatform

/// The threads behind `spawn`, each test on a pool of its own so that other suites' background work cannot take its
/// threads.
@Suite("ParkedThreads")
struct ParkedThreadsTests {
    @Test("a thread that finished its body runs the next one, instead of a new thread")
    func reuses() {
        let pool = ParkedThreads(limit: 4, idleMilliseconds: 10_000)
        let threads = Mutex<[pthread_t]>([])
        #expect(pool.run { threads.withLock { $0.append(pthread_self()) } })
        #expect(eventually { pool.waitingCount == 1 })
        #expect(pool.run { threads.withLock { $0.append(pthread_self()) } })
        #expect(eventually { threads.withLock { $0.count } == 2 })
        let seen = threads.withLock { $0 }
        #expect(pthread_equal(seen[0], seen[1]) != 0)
        #expect(eventually { pool.waitingCount == 1 })
    }

    @Test("at most `limit` threads wait; the others exit when their bodies end")
    func bounded() {
        let pool = ParkedThreads(limit: 2, idleMilliseconds: 10_000)
        let running = Atomic<Int>(0)
        let released = Atomic<Bool>(false)
        for _ in 0..<5 {
            #expect(
                pool.run {
                    running.add(1, ordering: .sequentiallyConsistent)
                    while !released.load(ordering: .sequentiallyConsistent) { usleep(1000) }
                    running.subtract(1, ordering: .sequentiallyConsistent)
                })
        }
        // Five at once: none waited when they were handed over, so each has a thread of its own.
        #expect(eventually { running.load(ordering: .sequentiallyConsistent) == 5 })
        #expect(pool.waitingCount == 0)
        released.store(true, ordering: .sequentiallyConsistent)
        #expect(eventually { running.load(ordering: .sequentiallyConsistent) == 0 && pool.waitingCount == 2 })
        usleep(50_000)
        #expect(pool.waitingCount == 2)
    }

    @Test("a waiting thread exits after its idle time, and later work still runs")
    func idleExit() {
        let pool = ParkedThreads(limit: 4, idleMilliseconds: 100)
        let done = Atomic<Int>(0)
        #expect(pool.run { done.add(1, ordering: .sequentiallyConsistent) })
        #expect(eventually { done.load(ordering: .sequentiallyConsistent) == 1 && pool.waitingCount == 1 })
        #expect(eventually { pool.waitingCount == 0 })
        #expect(pool.run { done.add(1, ordering: .sequentiallyConsistent) })
        #expect(eventually { done.load(ordering: .sequentiallyConsistent) == 2 })
    }

    @Test("every body handed over runs exactly once, however many come at once")
    func nothingLost() {
        let pool = ParkedThreads(limit: 3, idleMilliseconds: 1000)
        let counts = Mutex<[Int]>(Array(repeating: 0, count: 300))
        for index in 0..<300 {
            #expect(pool.run { counts.withLock { $0[index] += 1 } })
            if index % 7 == 0 { usleep(200) }  // let some threads finish and wait, so both paths are taken
        }
        #expect(eventually { counts.withLock { $0.reduce(0, +) } == 300 })
        #expect(counts.withLock { $0.allSatisfy { $0 == 1 } })
        #expect(pool.waitingCount <= 3)
    }
}
