import Foundation
import Glibc
import KeywayPlatform
import Synchronization
import Testing

/// Signals that reached the writing thread's handler.
private let interruptions = Atomic<Int>(0)

/// The one unbuffered write of every byte, on a real pipe: signals interrupt it part way, the reader takes the
/// bytes slowly, and a reader that is gone is reported, not waited for.
@Suite("Descriptor", .serialized)
struct DescriptorTests {
    @Test(
        "1 MiB through a pipe read in bursts while SIGUSR1 interrupts the write (no SA_RESTART): every byte, in order")
    func everyByteDespiteSignals() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let bytes = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        interruptions.store(0, ordering: .relaxed)

        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in interruptions.add(1, ordering: .relaxed) }
        action.sa_flags = 0  // no SA_RESTART: a blocked write returns short or with EINTR
        var previous = sigaction()
        sigaction(SIGUSR1, &action, &previous)
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGUSR1)
        var mask = sigset_t()
        pthread_sigmask(SIG_UNBLOCK, &unblock, &mask)
        defer {
            pthread_sigmask(SIG_SETMASK, &mask, nil)
            sigaction(SIGUSR1, &previous, nil)
        }

        let (readEnd, writeEnd) = (ends[0], ends[1])
        let received = Mutex<[UInt8]>([])
        let readerDone = DispatchSemaphore(value: 0)
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = read(readEnd, &buffer, buffer.count)
                if count <= 0 { break }
                received.withLock { $0 += buffer[..<count] }
                usleep(20_000)  // in bursts: the writer waits on a full pipe, where a signal ends its write with EINTR
            }
            readerDone.signal()
        }
        reader.start()
        let writer = pthread_self()
        let writing = Atomic<Bool>(true)
        let interrupterDone = DispatchSemaphore(value: 0)
        let interrupter = Thread {
            while writing.load(ordering: .relaxed) {
                pthread_kill(writer, SIGUSR1)
                usleep(1000)
            }
            interrupterDone.signal()
        }
        interrupter.start()

        let written = Descriptor.write(bytes, to: writeEnd)
        writing.store(false, ordering: .relaxed)
        interrupterDone.wait()  // no signal still on its way when the handler and the mask are put back
        close(writeEnd)
        readerDone.wait()
        close(readEnd)

        #expect(written)
        #expect(interruptions.load(ordering: .relaxed) > 0, "no signal reached the write: the test proved nothing")
        let got = received.withLock { $0 }
        // Compared as one Bool: a failing #expect on two 1 MiB arrays would have the test library diff them.
        let firstDifference = got.indices.first { $0 >= bytes.count || got[$0] != bytes[$0] }
        #expect(
            got.count == bytes.count && firstDifference == nil,
            "\(got.count) bytes, first wrong at \(firstDifference ?? -1)")
    }

    @Test("a pipe whose reader is gone: false at once (EPIPE, SIGPIPE ignored), not a wait or a crash")
    func readerGone() {
        BrokenPipe.ignoreSignal()
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        close(ends[0])
        #expect(!Descriptor.write("anything\n", to: ends[1]))
        #expect(errno == EPIPE)
        close(ends[1])
    }

    @Test("text is written as its UTF-8")
    func textAndLines() {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        #expect(Descriptor.write("grille · ✓", to: ends[1]))
        close(ends[1])
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(ends[0], &buffer, buffer.count)
        close(ends[0])
        #expect(Array(buffer[..<max(count, 0)]) == Array("grille · ✓".utf8))
    }
}
