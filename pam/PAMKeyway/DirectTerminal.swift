import CKeywayLibc
import KeywayCore
import KeywayPlatform

/// `read-tty` (docs/ARCHITECTURE.md §14): the module reads the terminal PAM_TTY names itself, so it can wait on the
/// person and on an armed sensor together, and a touch alone completes the prompt. Only where that terminal is
/// local, open to us, this process's standard input and in its foreground; anywhere else (`sudo -S`, an askpass
/// helper, no terminal, a remote session) the module uses the host's conversation and logs why.
///
/// While it reads, echo, line editing and the keys' signals are off (Ctrl-C is read as a byte: no signal is sent,
/// none is caught); the settings are put back on every way out the module sees: Enter, a touch, Ctrl-C, Ctrl-D, a
/// hang-up, an error. For a host killed outright, the terminal and its settings are deposited with keywayd first
/// (`TerminalCustody`), which puts them back when the arming connection closes without their withdrawal.
final class DirectTerminal {
    let descriptor: Int32
    let path: String

    private init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { close(descriptor) }

    /// The terminal `tty` (PAM_TTY) names, or why the module cannot read it itself.
    static func open(tty: String?, isRemote: Bool, because locality: String = "")
        -> Result<DirectTerminal, AuthenticationError>
    {
        func no(_ why: String) -> Result<DirectTerminal, AuthenticationError> {
            .failure(AuthenticationError(.notInteractive, why))
        }
        guard let tty, !tty.isEmpty else { return no("PAM_TTY is not set") }
        let path = tty.hasPrefix("/") ? tty : "/dev/" + tty
        // Split at '/' bytes, not Characters: a character that joins the next one (U+0600 is one) would hide a '/'.
        let parts = path.utf8.split(separator: UInt8(ascii: "/"))
        guard path.hasPrefix("/dev/"), !parts.contains(where: { $0.elementsEqual("..".utf8) }) else {
            return no("PAM_TTY (\(tty)) is not a device")
        }
        let descriptor = keyway_open(path, O_RDWR | O_NOCTTY | O_CLOEXEC, 0)
        guard descriptor >= 0 else {
            return no("cannot open PAM_TTY \(path): \(String(cString: strerror(keyway_errno())))")
        }
        let terminal = DirectTerminal(descriptor: descriptor, path: path)
        guard isatty(descriptor) == 1 else { return no("PAM_TTY \(path) is not a terminal") }
        if isRemote { return no("the session is remote (\(locality))") }
        var mine = stat()
        var input = stat()
        guard fstat(descriptor, &mine) == 0, fstat(0, &input) == 0, isatty(0) == 1, mine.st_rdev == input.st_rdev
        else { return no("standard input is not the terminal PAM_TTY names (\(path))") }
        guard tcgetpgrp(descriptor) == getpgrp() else { return no("this process is not in the foreground of \(path)") }
        return .success(terminal)
    }

    /// What a prompt read this way ended with.
    enum Outcome {
        /// A line (Enter).
        case line(Secret)
        /// The wake descriptor became readable: something happened at the armed factor.
        case woken
        /// Ctrl-C, Ctrl-D on an empty line, or the terminal hung up.
        case cancel
    }

    /// Shows `text`, then reads a line with echo off until Enter, or until `wake` becomes readable. With
    /// `deposit`, the terminal and its settings are first left with the other end of `wake` (keywayd), which puts
    /// them back if this process is killed before it does so itself.
    func read(_ text: String, wake: Int32, deposit: Bool) -> Result<Outcome, AuthenticationError> {
        guard let terminal = RawTerminal(descriptor) else {
            return .failure(
                AuthenticationError(
                    .conversationFailure, "cannot read \(path): \(String(cString: strerror(keyway_errno())))"))
        }
        if deposit { TerminalCustody.deposit(descriptor, settings: terminal.saved, over: wake) }
        defer { if deposit { TerminalCustody.withdraw(over: wake) } }
        guard terminal.enter(.raw) else {
            return .failure(
                AuthenticationError(
                    .conversationFailure, "cannot set \(path): \(String(cString: strerror(keyway_errno())))"))
        }
        defer { terminal.restore() }
        show(text)
        var line: [UInt8] = []
        defer { line.withUnsafeMutableBytes { secureZero($0) } }
        while true {
            var entries = [
                pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&entries, 2, 1000)
            if ready < 0 && keyway_errno() != EINTR {
                return .failure(AuthenticationError(.conversationFailure, "cannot wait on \(path)"))
            }
            if ready <= 0 { continue }
            if entries[1].revents != 0 {
                show("\r\n")
                return .success(.woken)
            }
            guard entries[0].revents & Int16(POLLIN) != 0 else {
                return .success(.cancel)  // hung up
            }
            var byte: UInt8 = 0
            let count = CKeywayLibc.read(descriptor, &byte, 1)
            if count == 0 || (count < 0 && keyway_errno() != EINTR && keyway_errno() != EAGAIN) {
                return .success(.cancel)
            }
            if count < 0 { continue }
            switch byte {
            case 0x0A, 0x0D:
                show("\r\n")
                return .success(.line(Secret(copying: line)))
            case 0x03:
                show("^C\r\n")
                return .success(.cancel)
            case 0x04 where line.isEmpty:
                show("\r\n")
                return .success(.cancel)
            case 0x7F, 0x08:
                while let last = line.popLast(), last & 0xC0 == 0x80 {}  // a whole character
            case 0x15:
                line.withUnsafeMutableBytes { secureZero($0) }
                line.removeAll()
            case 0x20...:
                guard line.count < PAMHandle.maximumReply else { continue }
                line.append(byte)
            default:
                continue
            }
        }
    }

    private func show(_ text: String) {
        Descriptor.write(text, to: descriptor)
    }
}
