// What the simulated sensor produces and what the store keeps: points in R^d, and the enrolled mean of several.

/// A point in feature space: an identity, one noisy sample of it, or a template's mean.
///
/// Deliberately just numbers: what a vector means (identity, probe, template) depends on how `NoiseModel` made it.
public struct FeatureVector: Sendable, Equatable {
    /// The coordinates; the model expects exactly `NoiseModel.dimensions` finite values.
    public var components: [Double]

    /// Wraps coordinates as they are; validity is checked where it matters (enrolment, scoring, decoding).
    public init(components: [Double]) {
        self.components = components
    }
}

/// An enrolled finger or face: the mean of its enrolment samples and how many there were.
///
/// The count is kept because it sets how noisy the mean is (σ²/k), which the score needs to stay calibrated.
public struct Template: Sendable, Equatable {
    /// The mean of the enrolment samples.
    public var mean: FeatureVector
    /// How many samples were averaged; must be at least 1 for the template to match anything.
    public var sampleCount: Int

    /// Builds a template from parts, e.g. in tests; `NoiseModel.enroll` is the usual way to make one.
    public init(mean: FeatureVector, sampleCount: Int) {
        self.mean = mean
        self.sampleCount = sampleCount
    }

    /// The byte layout's version; bump it whenever the layout changes so old readers refuse new bytes.
    static let encodingVersion: UInt16 = 1
    /// "KWBT": lets a reader tell a biometric template from any other blob in the store.
    static let magic: [UInt8] = [0x4B, 0x57, 0x42, 0x54]
    /// Magic (4) + version (2) + dimensions (2) + sample count (4).
    static let headerSize = 12
    /// Far above any sensible feature space; bounds what a corrupt header can make a decoder expect.
    static let maximumDimensions = 4_096

    /// Little-endian, versioned byte encoding for the store; decoding rejects wrong version/length/non-finite values.
    ///
    /// Layout (all little-endian): "KWBT", UInt16 version = 1, UInt16 dimension count d, UInt32 sample count,
    /// then d IEEE-754 binary64 bit patterns. A template that could not be decoded (a count or dimension out of
    /// range, a non-finite value) still encodes, with the count clamped, and is then refused on decoding.
    public func encoded() -> [UInt8] {
        let values = mean.components
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.headerSize + 8 * values.count)
        bytes.append(contentsOf: Self.magic)
        Self.append(UInt64(Self.encodingVersion), byteCount: 2, to: &bytes)
        Self.append(UInt64(UInt16(clamping: values.count)), byteCount: 2, to: &bytes)
        Self.append(UInt64(UInt32(clamping: sampleCount)), byteCount: 4, to: &bytes)
        for value in values {
            Self.append(value.bitPattern, byteCount: 8, to: &bytes)
        }
        return bytes
    }

    /// Reads what `encoded()` wrote, refusing anything else with an error that says what was wrong.
    public init(decoding bytes: [UInt8]) throws(NoiseModelError) {
        guard bytes.count >= Self.headerSize else {
            throw NoiseModelError(
                "template is truncated: \(bytes.count) bytes, the header alone needs "
                    + "\(Self.headerSize)")
        }
        guard Array(bytes[0..<4]) == Self.magic else {
            throw NoiseModelError("template does not start with the \"KWBT\" magic: not a biometric template")
        }
        let version = UInt16(truncatingIfNeeded: Self.readLittleEndian(bytes, at: 4, byteCount: 2))
        guard version == Self.encodingVersion else {
            throw NoiseModelError(
                "template version \(version) is not supported: this build reads version "
                    + "\(Self.encodingVersion)")
        }
        let dimensions = Int(Self.readLittleEndian(bytes, at: 6, byteCount: 2))
        guard dimensions >= 2, dimensions <= Self.maximumDimensions, dimensions % 2 == 0 else {
            throw NoiseModelError(
                "template dimension count \(dimensions) is invalid: it must be even and in "
                    + "2...\(Self.maximumDimensions)")
        }
        let sampleCount = Int(Self.readLittleEndian(bytes, at: 8, byteCount: 4))
        guard sampleCount >= 1 else {
            throw NoiseModelError("template sample count is 0: a template is the mean of at least one sample")
        }
        let expectedLength = Self.headerSize + 8 * dimensions
        guard bytes.count == expectedLength else {
            throw NoiseModelError(
                "template length \(bytes.count) does not match its \(dimensions) dimensions "
                    + "(expected \(expectedLength) bytes)")
        }
        var components: [Double] = []
        components.reserveCapacity(dimensions)
        for index in 0..<dimensions {
            let bits = Self.readLittleEndian(bytes, at: Self.headerSize + 8 * index, byteCount: 8)
            let value = Double(bitPattern: bits)
            guard value.isFinite else {
                throw NoiseModelError("template component \(index) is not finite (\(value))")
            }
            components.append(value)
        }
        self.init(mean: FeatureVector(components: components), sampleCount: sampleCount)
    }

    private static func append(_ value: UInt64, byteCount: Int, to bytes: inout [UInt8]) {
        for index in 0..<byteCount {
            bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))))
        }
    }

    /// Callers check the length first; this never reads past `offset + byteCount`.
    private static func readLittleEndian(_ bytes: [UInt8], at offset: Int, byteCount: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in 0..<byteCount {
            value |= UInt64(bytes[offset + index]) << (8 * UInt64(index))
        }
        return value
    }
}
