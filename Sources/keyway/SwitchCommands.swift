import Glibc
import KeywayCore
import KeywayFactors
import KeywayGesture
import KeywayPlatform
import KeywayRuntime

/// `keyway enable|disable FACTOR` and `keyway set SWITCH on|off`: the per-user switches (UserSetting), one
/// mechanism: enable and disable are `set FACTOR.enabled`.
extension Command {
    func enable() -> Int32 { setSwitch(UserSetting.enabled(factor()), to: true) }
    func disable() -> Int32 { setSwitch(UserSetting.enabled(factor()), to: false) }

    func set() -> Int32 {
        guard let setting = Factors.all.userSetting(named: operands[0]) else {
            let keys = Factors.all.userSettings.map(\.key)
            Keyway.fail(
                usage: "Unknown switch '\(operands[0].escapingControlCharacters)'; use \(Setting.list(keys))."
                    + Subcommand.didYouMean(operands[0], among: keys + Factors.all.userSettings.map(\.name)),
                command: subcommand)
        }
        return setSwitch(setting, to: operands[1] == "on")
    }

    /// Sets one switch of the account (--user, or the caller's own). Turning a factor off asks for it first, as a
    /// phone's switch does; keywayd refuses the change from anyone but root without that verification.
    func setSwitch(_ setting: UserSetting, to value: Bool) -> Int32 {
        let user = parsed.value("--user") == nil ? callerName() : self.user()
        let runtime = runtime(creating: true)  // --store: a switch may come before any enrollment
        return attempt { () throws(AuthenticationError) in
            if setting.offNeedsProof && !value && getuid() != 0 {
                let proof = Policy(name: "verify the \(setting.factor)", rule: .factor(setting.factor, attempts: 3))
                let evaluation = runtime.context().evaluate(
                    proof, for: UserContext(name: user, service: "keyway", startedBy: getuid()),
                    reason: "turn the \(setting.factor) off", conversation: conversation)
                if let error = evaluation.error { throw error }
            }
            try runtime.vault.set(setting.key, to: value, of: user, by: actor)
            print("\(setting.key) is \(UserSetting.text(value)) for \(user.escapingControlCharacters).")
        }
    }

    /// The caller's own account name, for commands whose --user defaults to it.
    func callerName() -> String {
        guard let name = Accounts.name(of: getuid()) else {
            Keyway.fail(usage: "Your user id \(getuid()) has no account name; give --user.", command: subcommand)
        }
        return name
    }

    /// The switch `setting` of `user` as keywayd keeps it (its default when it cannot be read).
    func switchValue(_ setting: UserSetting, of user: String, in runtime: Runtime) -> Bool {
        guard let status = try? runtime.vault.status(of: user).first else { return setting.defaultValue }
        return status.value(of: setting)
    }
}
