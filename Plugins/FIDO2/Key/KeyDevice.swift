import CFido2
import CKeywayLibc
import KeywayCore
import KeywayPlatform
import Synchronization

/// A call's result, handed from its thread.
private final class CallResult: Sendable {
    private let code = Mutex<Int32?>(nil)
    func set(_ value: Int32) { code.withLock { $0 = value } }
    var value: Int32? { code.withLock { $0 } }
}

/// One open security key (libfido2's `fido_dev_t`), and the one call at a time keywayd makes on it. A call that
/// waits for a touch runs on a thread of its own, so the caller can stop it: `fido_dev_cancel` sends the key
/// CTAPHID_CANCEL and the call returns. This file and `SecurityKeys.swift` are the only callers of libfido2.
final class KeyDevice: @unchecked Sendable {
    /// libfido2's handle: used by one call at a time (`run`), cancelled from the caller's thread.
    private let device: OpaquePointer
    /// The path it was opened at ("/dev/hidraw3").
    let path: String

    private init(device: OpaquePointer, path: String) {
        self.device = device
        self.path = path
    }

    deinit {
        _ = fido_dev_close(device)
        var handle: OpaquePointer? = device
        fido_dev_free(&handle)
    }

    /// The first key libfido2 finds (hidraw devices that speak FIDO), opened; nil when none is plugged in.
    static func first() throws(AuthenticationError) -> KeyDevice? {
        guard let list = fido_dev_info_new(16) else {
            throw AuthenticationError(.internalFailure, "libfido2: no memory")
        }
        var handle: OpaquePointer? = list
        defer { fido_dev_info_free(&handle, 16) }
        var found = 0
        guard fido_dev_info_manifest(list, 16, &found) == FIDO_OK, found > 0,
            let info = fido_dev_info_ptr(list, 0), let cPath = fido_dev_info_path(info)
        else { return nil }
        let path = String(cString: cPath)
        guard let device = fido_dev_new() else { throw AuthenticationError(.internalFailure, "libfido2: no memory") }
        let opened = fido_dev_open(device, cPath)
        guard opened == FIDO_OK else {
            var failed: OpaquePointer? = device
            fido_dev_free(&failed)
            throw AuthenticationError(
                .factorNotAvailable, "the security key at \(path) cannot be opened (\(KeyDevice.describe(opened)))")
        }
        return KeyDevice(device: device, path: path)
    }

    /// The fewest PIN tries a key must have left for Keyway to send it a PIN. The key's own counter is shared by
    /// every program that uses the key, and a key at 0 is blocked for good until reset: with 3 or fewer left, a PIN
    /// is not sent (the policy's fallback runs), so no run of Keyway's own attempts can block a key left plugged in.
    static let leastPINRetries: Int32 = 3

    /// Why a PIN must not be sent to this key now (it has `leastPINRetries` or fewer tries left), or nil. A key
    /// that does not answer the question is sent the PIN, as before.
    func refusesPIN() -> AuthenticationError? {
        var left: Int32 = 0
        guard fido_dev_get_retry_count(device, &left) == FIDO_OK, left <= Self.leastPINRetries else { return nil }
        return AuthenticationError(
            .factorNotAvailable,
            "the security key at \(path) has \(left) PIN tries left of its own; Keyway sends no PIN to a key with "
                + "\(Self.leastPINRetries) or fewer, so that no mistyped PIN blocks it (the right PIN entered with "
                + "fido2-token or the key's own tool restores its tries)")
    }

    /// True when the key can verify its user itself (a PIN set, or its own reader).
    var verifiesUsers: Bool { fido_dev_has_uv(device) || fido_dev_has_pin(device) }

    /// Runs `call` on the device on a thread of its own; while it waits, `stop` is asked every 50 ms and a true
    /// answer cancels the call at the key. Returns libfido2's result, or nil when it was stopped.
    func run(stop: () -> Bool, _ call: @escaping @Sendable (OpaquePointer) -> Int32) -> Int32? {
        let result = CallResult()
        // The thread holds this device until the call returns, so it is never closed under a running call.
        guard spawn({ result.set(call(self.device)) }) else { return FIDO_ERR_INTERNAL }
        var cancelled = false
        while true {
            if let code = result.value { return cancelled ? nil : code }
            if !cancelled && stop() {
                cancelled = true
                _ = fido_dev_cancel(device)
            }
            usleep(50_000)
        }
    }

    /// libfido2's name for a result ("FIDO_ERR_NO_CREDENTIALS").
    static func describe(_ code: Int32) -> String { String(cString: fido_strerr(code)) }

    /// Fresh random bytes for a challenge: each attempt signs a new one, so no assertion can be replayed.
    static func challenge() -> [UInt8] { randomBytes(32) }
}

/// What the person typed for the key (its PIN), as libfido2 takes it: a C string, wiped when dropped. Shared with
/// the thread a call runs on (`KeyDevice.run` returns only after the call has).
final class PINText: @unchecked Sendable {
    private let buffer: UnsafeMutableRawBufferPointer?

    /// The PIN of `secret`; none for nil.
    init(_ secret: Secret?) {
        guard let secret else {
            buffer = nil
            return
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: secret.count + 1, alignment: 1)
        secret.withUnsafeBytes { bytes in buffer.copyMemory(from: bytes) }
        buffer[secret.count] = 0
        self.buffer = buffer
    }

    deinit {
        guard let buffer else { return }
        secureZero(buffer)
        buffer.deallocate()
    }

    /// The C string, or nil for no PIN.
    var pointer: UnsafePointer<CChar>? {
        buffer.map { UnsafePointer($0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
    }
}
