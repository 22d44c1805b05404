/// A secret (a pattern, a passcode) that owns its bytes, wipes them when released,
/// compares in constant time and never prints.
///
/// Secrets are not `String`s: a `String` may be copied anywhere and is never wiped.
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    private let storage: Storage

    /// Copies `bytes` into wiped-on-release storage. The caller should wipe its own copy.
    public init(copying bytes: some Collection<UInt8>) {
        storage = Storage(copying: bytes)
    }

    /// The number of bytes.
    public var count: Int { storage.bytes.count }

    /// True when no bytes were entered.
    public var isEmpty: Bool { storage.bytes.isEmpty }

    /// Gives `body` read access to the bytes; they must not escape it.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(storage.bytes))
    }

    /// Compares in time that depends only on the lengths, never on where the bytes differ.
    public static func == (lhs: Secret, rhs: Secret) -> Bool {
        lhs.withUnsafeBytes { a in rhs.withUnsafeBytes { b in constantTimeEquals(a, b) } }
    }

    public var description: String { "Secret(redacted)" }
    public var debugDescription: String { "Secret(redacted)" }

    /// The wiped-on-release byte buffer behind a `Secret`.
    private final class Storage: @unchecked Sendable {  // immutable after init; only read through withUnsafeBytes
        let bytes: UnsafeMutableRawBufferPointer

        init(count: Int) {
            bytes = .allocate(byteCount: max(count, 0), alignment: 1)
            bytes.initializeMemory(as: UInt8.self, repeating: 0)
        }

        convenience init(copying source: some Collection<UInt8>) {
            self.init(count: source.count)
            // One copy where the bytes are contiguous (an array, a slice, a buffer): keywayd calls this across a
            // module boundary, where the byte loop below is not specialised and cost 10,000 instructions a byte.
            let bytes = self.bytes
            let copied: Void? = source.withContiguousStorageIfAvailable { contiguous in
                bytes.copyMemory(from: UnsafeRawBufferPointer(contiguous))
            }
            if copied == nil { for (index, byte) in zip(bytes.indices, source) { bytes[index] = byte } }
        }

        deinit {
            secureZero(bytes)
            bytes.deallocate()
        }
    }
}

/// Compares two byte buffers in time that depends only on their lengths.
public func constantTimeEquals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    var difference: UInt8 = a.count == b.count ? 0 : 1
    let count = Swift.min(a.count, b.count)
    for index in 0..<count { difference |= a[index] ^ b[index] }
    return difference == 0
}

/// Overwrites `buffer` with zeros in a way the optimizer cannot remove.
///
/// The core knows no C, so there is no `sodium_memzero` here. This function is kept out of line and unoptimized,
/// so no caller learns that it only writes (an unoptimized function gets no inferred attributes) and none can prove
/// its stores dead; the zeroing itself is one optimized `memset` in `zeroBytes`, whose only caller is this one. It
/// was a byte loop run unoptimized, hundreds of instructions a byte, on every request keywayd read (callgrind).
@inline(never) @_optimize(none)
public func secureZero(_ buffer: UnsafeMutableRawBufferPointer) {
    zeroBytes(buffer)
}

@inline(never)
func zeroBytes(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    base.initializeMemory(as: UInt8.self, repeating: 0, count: buffer.count)
}
