import CPAM
import KeywayCore

// The C ABI of pam_keyway.so: each entry turns argv into strings and hands over to ModuleCall. Only these symbols
// are exported (pam/exports.map).

private func arguments(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> [String] {
    guard let argv, argc > 0 else { return [] }
    return (0..<Int(argc)).compactMap { argv[$0].map { String(cString: $0) } }
}

private func call(
    _ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32,
    _ argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?
) -> ModuleCall? {
    guard let pamh else { return nil }
    return ModuleCall(
        handle: PAMHandle(raw: pamh, silent: flags & Int32(PAM_SILENT) != 0),
        arguments: arguments(argc, argv))
}

/// Authenticates the user with the configured policy.
@_cdecl("pam_sm_authenticate")
public func pam_sm_authenticate(
    _ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32,
    _ argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?
) -> Int32 {
    call(pamh, flags, argc, argv)?.authenticate() ?? PAM_SYSTEM_ERR
}

/// Keyway sets no credentials; succeeding here lets applications such as sudo continue after authentication.
@_cdecl("pam_sm_setcred")
public func pam_sm_setcred(
    _ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32,
    _ argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?
) -> Int32 {
    pamh == nil ? PAM_SYSTEM_ERR : PAM_SUCCESS
}

/// Refuses an account whose policy is locked out.
@_cdecl("pam_sm_acct_mgmt")
public func pam_sm_acct_mgmt(
    _ pamh: OpaquePointer?, _ flags: Int32, _ argc: Int32,
    _ argv: UnsafeMutablePointer<UnsafePointer<CChar>?>?
) -> Int32 {
    call(pamh, flags, argc, argv)?.accountManagement() ?? PAM_SYSTEM_ERR
}

// @_cdecl does not check the C prototype: this fails to compile if a Swift signature drifts from pam_modules.h.
private typealias ServiceFunction = (OpaquePointer?, Int32, Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>?) ->
    Int32
private func checkPrototypes() {
    let _: ServiceFunction = pam_sm_authenticate
    let _: ServiceFunction = pam_sm_setcred
    let _: ServiceFunction = pam_sm_acct_mgmt
}
