public import KeywayConfig
public import KeywayCore

/// The arguments after `pam_keyway.so` in a PAM stack, parsed; an unknown, malformed or repeated one is an error.
/// It lives here rather than in the module so the fuzzer (Tests/KeywayFuzz) drives the very parser the module uses.
public struct ModuleArguments: Equatable, Sendable {
    /// The policy's name (`policy=`): a built-in or one defined in the configuration.
    public var policy = Policy.biometricsOrPasscode.name
    /// The configuration's main file (`config=`), or nil for /etc/keyway/keyway.conf.
    public var config: String?
    /// keywayd's socket (`socket=`).
    public var socket = "/run/keyway/keywayd.sock"
    /// The sensor control directory (`sensor=`).
    public var sensorDirectory = "/run/keyway/sensor"
    /// Seconds to wait for a touch (`timeout=`), replacing `[biometric] timeout`; nil when not given.
    public var sensorTimeout: Int?
    /// What to do for a user with none of the policy's factors enrolled (`unenrolled=`), replacing the policy's
    /// `unenrolled =`; nil when not given.
    public var unenrolled: Configuration.Unenrolled?
    /// What the stack gets while keywayd is not running (`failmode=`), replacing the policy's `failmode =`; nil when
    /// not given.
    public var failMode: Configuration.FailMode?
    /// What a lockout returns (`lockout=`): PAM_MAXTRIES, or PAM_AUTH_ERR for sshd, which on PAM_MAXTRIES turns
    /// keyboard-interactive off and leaves the client an empty list of methods, so ssh asks for a password that
    /// cannot work.
    public var lockoutIsAuthError = false
    /// What comes after Keyway in the stack (`next=password`), offered at every prompt no factor of the policy
    /// follows as "Enter: use password"; nil offers nothing there.
    public var next: String?
    /// Read the terminal itself where it can (`read-tty`), so a `first of` sensor completes without Enter.
    public var readTTY = false
    /// Log every step (`debug`).
    public var debug = false

    /// Every argument the module knows, for messages.
    public static let known = [
        "policy=", "config=", "socket=", "sensor=", "timeout=", "unenrolled=", "failmode=", "lockout=", "next=",
        "read-tty", "debug",
    ]

    /// The defaults (what an empty argument list means).
    public init() {}

    /// Parses the argument list; the error names the argument and the reason. An argument given twice is refused
    /// rather than letting the last one win: `policy=passcode policy=pattern` is a mistake whoever made it, and a
    /// stack must mean exactly one thing.
    public static func parse(_ arguments: [String]) -> Result<ModuleArguments, AuthenticationError> {
        var parsed = ModuleArguments()
        var seen: [String: String] = [:]
        func bad(_ why: String) -> Result<ModuleArguments, AuthenticationError> {
            .failure(AuthenticationError(.invalidPolicy, why))
        }
        for argument in arguments {
            // Split at the first '=' as bytes: splitting by Characters cost 7,000 instructions an argument.
            let equals = argument.utf8.firstIndex(of: UInt8(ascii: "="))
            let key = equals.map { String(argument[..<$0]) } ?? argument
            let value = equals.map { String(argument[argument.utf8.index(after: $0)...]) }
            if let earlier = seen[key] {
                return bad("'\(argument)' repeats '\(earlier)'; give each argument once")
            }
            switch (key, value) {
            case ("debug", nil):
                parsed.debug = true
            case ("read-tty", nil):
                parsed.readTTY = true
            case ("policy", let name?) where !name.isEmpty:
                parsed.policy = name  // checked against the configuration, which knows every policy
            case ("config", let path?) where path.hasPrefix("/"):
                parsed.config = path
            case ("socket", let path?) where path.hasPrefix("/"):
                parsed.socket = path
            case ("store", _):
                return bad(
                    "'\(argument)': the module no longer opens the store; keywayd does (keywayd --store), and the "
                        + "module reaches it with socket=")
            case ("sensor", let path?) where path.hasPrefix("/"):
                parsed.sensorDirectory = path
            case ("timeout", let seconds?):
                guard let value = Int(seconds), (1...600).contains(value) else {
                    return bad("'\(argument)': the timeout is a whole number of seconds from 1 to 600")
                }
                parsed.sensorTimeout = value
            case ("unenrolled", let mode?):
                // `ignore` is the older spelling of `skip`.
                guard let choice = Configuration.Unenrolled(rawValue: mode == "ignore" ? "skip" : mode) else {
                    return bad("'\(argument)': unenrolled= takes conceal, fail, skip or allow")
                }
                parsed.unenrolled = choice
            case ("lockout", let code?):
                guard code == "maxtries" || code == "auth_err" else {
                    return bad("'\(argument)': lockout= takes maxtries or auth_err")
                }
                parsed.lockoutIsAuthError = code == "auth_err"
            case ("failmode", let mode?):
                guard let choice = Configuration.FailMode(rawValue: mode) else {
                    return bad("'\(argument)': failmode= takes secure or safe")
                }
                parsed.failMode = choice
            case ("next", let name?):
                // Shown in a prompt: lowercase words only, so no argument can put control characters on the screen.
                let allowed = name.utf8.allSatisfy {
                    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || $0 == 0x2D
                }
                guard allowed, (1...24).contains(name.utf8.count) else {
                    return bad(
                        "'\(argument)': next= names what follows Keyway in 1 to 24 lowercase letters, e.g. next=password"
                    )
                }
                parsed.next = name
            case ("socket", _), ("sensor", _), ("config", _):
                return bad("'\(argument)': the path must be absolute")
            default:
                return bad("unknown argument '\(argument)'; known: \(known.joined(separator: " "))")
            }
            seen[key] = argument
        }
        return .success(parsed)
    }
}
