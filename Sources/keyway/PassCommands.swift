import Glibc
import KeywayCore
import KeywayFactors
import KeywayPlatform
import KeywayRuntime

/// `keyway pass issue | revoke`: an administrator's temporary pass (PassKeeper), for a person who lost the factor a
/// policy asks for: typed at that factor's prompt instead, a number of times, until a time.
extension Command {
    /// How long a pass lasts: `--for`, as keyway.conf writes durations.
    static let passLifetime = Setting(
        "--for", .duration(60_000...(PassKeeper.longest * 1000), offAllowed: false), default: .duration(3_600_000),
        help: "how long the pass lasts")

    func passIssue() -> Int32 {
        let user = user()
        let factor = Self.factor(named: parsed.value("--in-place-of") ?? "totp")
        let uses = Int(parsed.value("--uses") ?? "1") ?? 1
        let milliseconds: Int64
        switch Self.passLifetime.parse(parsed.value("--for") ?? "1h") {
        case .success(.duration(let value?)): milliseconds = value
        case .success: milliseconds = 3_600_000
        case .failure(let error): Keyway.fail(usage: error.message + ".")
        }
        let runtime = runtime()
        // A pass is typed at the factor's prompt as it is: only where the prompt hands the text on unchanged.
        let sample = Secret(
            copying: Array(PassKeeper.form.written(Array(repeating: UInt8(ascii: "k"), count: 16)).utf8))
        guard let entry = runtime.authenticator(factor)?.typedEntry, case .success(let kept) = entry.normalize(sample),
            kept == sample
        else {
            Keyway.fail(
                usage: "A pass cannot be typed at the \(factor)'s prompt; give one in place of a code or passcode.")
        }
        return attempt { () throws(AuthenticationError) in
            var code = try runtime.vault.offer(.pass, for: user, by: actor)
            defer { code.withUnsafeMutableBytes { secureZero($0) } }
            try runtime.vault.enroll(
                .secret(Secret(copying: code)), of: .pass, for: user, label: "\(factor) \(milliseconds / 1000) \(uses)",
                by: actor)
            let until = SystemClock().now().adding(.milliseconds(milliseconds))
            print("Pass for \(user): \(String(decoding: code, as: UTF8.self))")
            print(
                "Typed at the \(factor)'s prompt, it lets \(user) in \(uses == 1 ? "once" : "\(uses) times"), until "
                    + "\(SystemClock.local(until, now: SystemClock().now())) (\(until)); it is shown only now. "
                    + "Any earlier pass of \(user) no longer works.")
        }
    }

    func passRevoke() -> Int32 {
        let user = user()
        let runtime = runtime()
        return attempt { () throws(AuthenticationError) in
            guard try runtime.vault.remove(.pass, of: user, label: nil, by: actor) else {
                throw AuthenticationError(.factorNotEnrolled, "\(user) holds no pass")
            }
            print("Revoked the pass of \(user).")
        }
    }
}
