public import KeywayCore

/// The arguments after `pam_keyway.so` in a PAM stack, parsed; an unknown, malformed or repeated one is an error.
/// It lives here rather than in the module so the fuzzer (Tests/KeywayFuzz) drives the very parser the module uses.
public struct ModuleArguments: Equatable, Sendable {
    /// The policy (`policy=`); built-in names until the policy language lands.
    public var policy = Policy.biometricsOrPasscode
    /// keywayd's socket (`socket=`).
    public var socket = "/run/keyway/keywayd.sock"
    /// The sensor control directory (`sensor=`).
    public var sensorDirectory = "/run/keyway/sensor"
    /// Seconds to wait for a touch (`timeout=`).
    public var sensorTimeout = 30
    /// What to do for a user with none of the policy's factors enrolled (`unenrolled=`).
    public var unenrolled = Unenrolled.fail
    /// Log every step (`debug`).
    public var debug = false

    /// `unenrolled=fail|ignore`.
    public enum Unenrolled: String, Sendable { case fail, ignore }

    /// Every argument the module knows, for messages.
    public static let known = ["policy=", "config=", "socket=", "sensor=", "timeout=", "unenrolled=", "debug"]

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
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0])
            let value = parts.count == 2 ? String(parts[1]) : nil
            if let earlier = seen[key] {
                return bad("'\(argument)' repeats '\(earlier)'; give each argument once")
            }
            switch (key, value) {
            case ("debug", nil):
                parsed.debug = true
            case ("policy", let name?):
                guard let policy = Policy.builtIn(named: name) else {
                    let names = Policy.builtIns.map { $0.name }.joined(separator: ", ")
                    return bad("unknown policy '\(name)' in 'policy=\(name)'; the built-in policies are \(names)")
                }
                parsed.policy = policy
            case ("config", _):
                return bad(
                    "'\(argument)': configuration files need the policy language, which this version does "
                        + "not have yet; use a built-in policy= instead")
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
                guard let choice = Unenrolled(rawValue: mode) else {
                    return bad("'\(argument)': unenrolled= takes fail or ignore")
                }
                parsed.unenrolled = choice
            case ("socket", _), ("sensor", _):
                return bad("'\(argument)': the path must be absolute")
            default:
                return bad("unknown argument '\(argument)'; known: \(known.joined(separator: " "))")
            }
            seen[key] = argument
        }
        return .success(parsed)
    }
}
