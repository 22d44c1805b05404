public import CKeywayLibc

/// A terminal's settings left with keywayd while the PAM module reads that terminal itself (`read-tty`,
/// docs/ARCHITECTURE.md §14), so they are put back even when the host is killed in the middle of the read. The module
/// deposits the terminal (its descriptor, passed over the arming connection) and the settings it found; it withdraws
/// them once it has put them back itself. keywayd restores what is still deposited when the connection closes.
public enum TerminalCustody {
    /// The first byte of a deposit (then the settings, with the terminal's descriptor).
    public static let depositTag: UInt8 = 0x54  // "T"
    /// The one byte of a withdrawal.
    public static let withdrawTag: UInt8 = 0x52  // "R"

    /// Hands `terminal` and the settings to restore to the other end of `connection`; false when it could not.
    @discardableResult
    public static func deposit(_ terminal: Int32, settings: termios, over connection: Int32) -> Bool {
        var message = [depositTag]
        withUnsafeBytes(of: settings) { message.append(contentsOf: $0) }
        return message.withUnsafeBytes {
            keyway_send_with_descriptor(connection, $0.baseAddress, $0.count, terminal) == message.count
        }
    }

    /// Tells the other end the settings are back: it lets go of the terminal.
    public static func withdraw(over connection: Int32) {
        var tag = withdrawTag
        _ = keyway_send_with_descriptor(connection, &tag, 1, -1)
    }
}
