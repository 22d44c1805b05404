import KeywayCore
import Testing

/// The system generator every keeper draws secrets, nonces and challenges from by default.
@Suite("randomBytes")
struct RandomBytesTests {
    @Test("as many bytes as asked; two draws of 32 differ; 64 KiB use every byte value")
    func drawsWhatWasAsked() {
        #expect(randomBytes(0).isEmpty)
        #expect(randomBytes(7).count == 7)
        #expect(randomBytes(32) != randomBytes(32))  // equal with probability 2^-256
        let many = randomBytes(1 << 16)
        #expect(Set(many).count == 256)  // a value missing from 65536 draws: probability about 256·e^-256
    }
}
