import CKeywayLibc
import Glibc
import KeywayCore
import KeywayPlatform
import KeywayWire
import Synchronization

/// keywayd's side of one arming connection: the terminal deposited on it, if any.
final class TerminalHolder: Sendable {
    private struct Deposit {
        var terminal: Int32
        var settings: termios
    }
    private let deposit = Mutex<Deposit?>(nil)
    private let closed = Mutex(false)
    private let refusal = Mutex<String?>(nil)
    /// Whether a terminal may be deposited here: only by the module inside a root host (keywayd(8), "Descriptors").
    let acceptsCustody: Bool
    /// Where descriptors the client passed but may not deposit go: its own disposal line (`Disposer`), never the
    /// thread that holds the device, since their close may block.
    private let discard: @Sendable ([Int32]) -> Void

    /// Creates an empty holder; `acceptsCustody` for a root client; what it refuses goes to `discard`.
    init(acceptsCustody: Bool, discard: @escaping @Sendable ([Int32]) -> Void) {
        self.acceptsCustody = acceptsCustody
        self.discard = discard
    }

    deinit { release() }

    /// Reads what the client sent on `connection` without waiting; true when the client has closed it (and from
    /// then on). Anything that is not a deposit of a terminal with settings of the right size, or a withdrawal,
    /// is dropped.
    func take(from connection: Int32) -> Bool {
        if closed.withLock({ $0 }) { return true }
        let gone = read(connection)
        if gone { closed.withLock { $0 = true } }
        return gone
    }

    private func read(_ connection: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 1 + MemoryLayout<termios>.size)
        while true {
            var passed: [Int32] = []
            var odd = false
            let count = buffer.withUnsafeMutableBytes {
                UnixSocket.receiveMessage(connection, into: $0, count: $0.count, descriptors: &passed, odd: &odd)
            }
            if count == -2 { return false }  // nothing more for now
            // The one message that may carry a descriptor: a deposit, from a root host, of exactly one terminal with
            // settings of the right size. Anything else passed is a protocol error that ends the lease.
            if count == buffer.count, buffer[0] == TerminalCustody.depositTag, acceptsCustody, !odd, passed.count == 1,
                keyway_is_terminal_device(passed[0]) == 1
            {
                var settings = termios()
                withUnsafeMutableBytes(of: &settings) { $0.copyBytes(from: buffer[1...]) }
                let earlier = deposit.withLock { held in
                    defer { held = Deposit(terminal: passed[0], settings: settings) }
                    return held?.terminal
                }
                if let earlier { UnixSocket.dispose(earlier) }
                continue
            }
            discard(passed)
            if count <= 0 { return true }  // closed, or failed: the client is as good as gone
            if !passed.isEmpty || odd {
                refusal.withLock {
                    $0 =
                        acceptsCustody
                        ? "passed \(passed.count) descriptor(s) that are not one terminal with its settings"
                        : "passed \(passed.count) descriptor(s); only a root host may deposit its terminal"
                }
                return true
            }
            if buffer[0] == TerminalCustody.withdrawTag && count == 1 { release() }
        }
    }

    /// Why the lease was ended for a protocol error, if it was.
    var protocolError: String? { refusal.withLock { $0 } }

    /// Puts the deposited settings back on the deposited terminal, and lets go of it.
    func restore() {
        guard
            let held = deposit.withLock({ held -> Deposit? in
                defer { held = nil }
                return held
            })
        else { return }
        RawTerminal.restore(held.terminal, to: held.settings)
        UnixSocket.dispose(held.terminal)
    }

    /// Lets go of the terminal without touching it.
    func release() {
        if let terminal = deposit.withLock({ held -> Int32? in
            defer { held = nil }
            return held?.terminal
        }) {
            UnixSocket.dispose(terminal)
        }
    }
}
