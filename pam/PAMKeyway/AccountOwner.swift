import CKeywayLibc
import KeywayPlatform

/// Whether the person at this PAM call is the owner of the account being authenticated, proving who they are
/// (sudo, a screen locker running as the user), rather than someone trying to become that account (login, su to
/// another user, a greeter): the calling process's real uid is the account's, and is not root's.
///
/// Concealment (`unenrolled = conceal`, the default) exists so that nobody learns whether *another* account has a pattern or
/// passcode. Its owner may know (`keyway status` tells them), so hiding it from them protects no one and only costs
/// them prompts that cannot succeed. Root is left out: a root process authenticating root is a login prompt, where
/// whoever sits at the console types the name.
enum AccountOwner {
    /// Unknown (no such account, or one NSS cannot tell) is "not the owner": concealment stays on.
    static func isCaller(_ user: String) -> Bool {
        let caller = getuid()
        guard caller != 0, case .success(let owner?) = Accounts.uid(of: user) else { return false }
        return owner == caller
    }
}
