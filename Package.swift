// swift-tools-version:6.0
// Keyway: multi-factor authentication for Linux. See README.md and docs/ARCHITECTURE.md.
import PackageDescription

/// Settings every Swift target shares (the habits of swift-log's manifest).
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// A library target with those settings. `scripts/package-graph.py check` (make lint) fails when a target's imports and
/// its declared dependencies differ, so this list is the import graph (docs/ARCHITECTURE.md §2).
func library(_ name: String, _ dependencies: [Target.Dependency] = [], path: String? = nil) -> Target {
    .target(name: name, dependencies: dependencies, path: path, swiftSettings: strictSettings)
}

/// A test target with those settings, named after the module it tests.
func tests(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .testTarget(name: name, dependencies: dependencies, swiftSettings: strictSettings)
}

let package = Package(
    name: "Keyway",
    products: [
        .executable(name: "keyway", targets: ["keyway"]),
        .library(name: "KeywayCore", targets: ["KeywayCore"]),
        .library(name: "KeywayPlatform", targets: ["KeywayPlatform"]),
        .library(name: "KeywayGesture", targets: ["KeywayGesture"]),
        .library(name: "KeywayBiometric", targets: ["KeywayBiometric"]),
        .library(name: "KeywayBiometricSimulator", targets: ["KeywayBiometricSimulator"]),
        .library(name: "KeywayPasscode", targets: ["KeywayPasscode"]),
        .library(name: "KeywayTestSupport", targets: ["KeywayTestSupport"]),
        .library(name: "KeywayStore", targets: ["KeywayStore"]),
        .library(name: "KeywayFactors", targets: ["KeywayFactors"]),
        .executable(name: "keywayd", targets: ["keywayd"]),
        .executable(name: "keyway-lock", targets: ["keyway-lock"]),
        // The PAM module. SwiftPM names the file libpam_keyway.so; `make module` installs it as pam_keyway.so.
        .library(name: "pam_keyway", type: .dynamic, targets: ["PAMKeyway"]),
    ],
    targets: [
        // The core: protocols, secrets, errors, throttling, the policy engine. No C, no Foundation.
        library("KeywayCore"),

        // The C library as the module's code sees it in both build modes (Embedded Swift has no Glibc overlay):
        // the same headers, errno and open(2) as functions.
        .systemLibrary(name: "CKeywayLibc", path: "Sources/CKeywayLibc"),

        // The operating system: the wall clock, SIGPIPE, Unix sockets, accounts. No C library beyond libc.
        library("KeywayPlatform", ["KeywayCore", "CKeywayLibc"]),

        // libsodium, wrapped once: Argon2id hashing and constant-time helpers. Only keywayd's side links it.
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        library("KeywayCrypto", ["KeywayCore", "CSodium"]),

        // The stores: durable enrollments, counters and lockouts in one host's SQLite file, or a fleet's PostgreSQL
        // database through libpq (docs/ARCHITECTURE.md §17).
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        library("KeywayStore", ["KeywayCore", "KeywayPlatform", "CSQLite", "CPostgres", "CKeywayLibc"]),

        // One target per factor, each a folder under Plugins/ that depends on the core alone (and libc where it
        // talks to a device).
        library("KeywayGesture", ["KeywayCore"], path: "Plugins/Gesture/Factor"),
        // The drawn pattern's model (the grid laid out for a surface, hit testing, the trail, the states), for a
        // graphical front end such as a screen locker; no window system here (issue 45).
        library("KeywayGestureDrawing", ["KeywayGesture"], path: "Plugins/Gesture/Drawing"),
        library("KeywayPasscode", ["KeywayCore"], path: "Plugins/Passcode"),
        library("KeywayTOTP", ["KeywayCore", "CKeywayLibc"], path: "Plugins/TOTP"),
        library("KeywayRecovery", ["KeywayCore"], path: "Plugins/Recovery"),
        // The biometric factor (core only) and its two backends: the simulated sensor, which a person's process
        // may read too, and fprintd's readers over the system bus (libdbus-1), which only keywayd links: the module
        // and the CLI never talk to D-Bus (docs/ARCHITECTURE.md §18).
        library("KeywayBiometric", ["KeywayCore"], path: "Plugins/Biometric/Factor"),
        library(
            "KeywayBiometricSimulator", ["KeywayCore", "KeywayBiometric", "KeywayPlatform", "CKeywayLibc"],
            path: "Plugins/Biometric/Simulator"),
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        // keywayd's D-Bus client (fprintd's reader, logind's sleep signals): the one caller of libdbus-1.
        library("KeywayDBus", ["CDBus", "CKeywayLibc"]),
        library(
            "KeywayFprintd", ["KeywayCore", "KeywayPlatform", "KeywayDBus", "CKeywayLibc"],
            path: "Plugins/Biometric/Fprintd"),

        // Security keys: the factor (core only, in the module too), and its libfido2 backend, which only keywayd links.
        library("KeywayFIDO2", ["KeywayCore"], path: "Plugins/FIDO2/Factor"),
        .systemLibrary(
            name: "CFido2", path: "Plugins/FIDO2/CFido2", pkgConfig: "libfido2", providers: [.apt(["libfido2-dev"])]),
        library(
            "KeywayFIDO2Key", ["KeywayCore", "KeywayFIDO2", "KeywayPlatform", "CFido2", "CKeywayLibc"],
            path: "Plugins/FIDO2/Key"),

        // The one list of factors, below both sides: the module, the CLI and keywayd all read it (Factors.all).
        library(
            "KeywayFactors",
            [
                "KeywayCore", "KeywayGesture", "KeywayBiometric", "KeywayBiometricSimulator", "KeywayPasscode",
                "KeywayTOTP", "KeywayRecovery", "KeywayFIDO2",
            ]),

        // The configuration language: keyway.conf's sections, settings checked against what the plugins declare,
        // the `require =` rules, diagnostics. Pure Swift, no files: the loader is KeywayConfigFiles.
        library("KeywayConfig", ["KeywayCore"]),

        // keyway.conf read from disk and trusted (root's alone), below both sides: the module, the CLI and keywayd load
        // the configuration the same way, and keywayd links no client code.
        library("KeywayConfigFiles", ["KeywayCore", "KeywayConfig", "KeywayFactors", "KeywayPlatform", "CKeywayLibc"]),

        // keywayd's protocol: the frames, the requests and answers, and who may ask what. Pure Swift.
        library("KeywayWire", ["KeywayCore"]),

        // The clients' composition (the PAM module, the CLI): the factors' person side over keywayd's socket.
        library(
            "KeywayRuntime",
            [
                "KeywayCore", "KeywayConfig", "KeywayConfigFiles", "KeywayFactors", "KeywayPlatform", "KeywayWire",
                "CKeywayLibc",
            ]),

        // The state's composition (keywayd, `keyway --store`, tests): the SQLite store, Argon2id, the keepers.
        library(
            "KeywayVault",
            [
                "KeywayCore", "KeywayCrypto", "KeywayFactors", "KeywayStore", "KeywayPlatform",
            ]),

        // keywayd's server as a library: the accept loop, the connection threads, the bounded pool, the armed sensor
        // (docs/ARCHITECTURE.md §10). Tests drive it in-process (Tests/KeywayDaemonTests).
        library(
            "KeywayDaemon",
            ["KeywayCore", "KeywayWire", "KeywayPlatform", "CKeywayLibc"]),

        // keywayd: the one process that opens the store and runs the KDF: its options, the store, the socket, then
        // the server.
        .executableTarget(
            name: "keywayd",
            dependencies: [
                "KeywayCore", "KeywayConfig", "KeywayConfigFiles", "KeywayFactors", "KeywayVault",
                "KeywayWire", "KeywayPlatform", "KeywayDaemon", "CKeywayLibc", "KeywayStore", "KeywayFprintd",
                "KeywayFIDO2Key", "KeywayDBus",
            ],
            swiftSettings: strictSettings),

        // The PAM module's sources in full mode, built on every `swift build` so that both modes keep compiling. The
        // deployable pam_keyway.so is the Embedded Swift build of the same sources (scripts/build-module.sh, which
        // reads this target's dependencies and settings from here; docs/ARCHITECTURE.md §4); this one links the
        // static Swift runtime the way the module did before.
        .systemLibrary(name: "CPAM", path: "pam/CPAM", providers: [.apt(["libpam0g-dev"])]),
        .target(
            name: "PAMKeyway",
            dependencies: [
                "CPAM", "CKeywayLibc", "KeywayCore", "KeywayConfig", "KeywayConfigFiles", "KeywayFactors",
                "KeywayPlatform", "KeywayRuntime",
                "KeywayWire",
            ],
            path: "pam/PAMKeyway",
            swiftSettings: strictSettings + [.unsafeFlags(["-static-stdlib"])],
            linkerSettings: [
                .unsafeFlags([
                    "-static-stdlib", "-Xlinker", "-z", "-Xlinker", "nodelete", "-Xlinker", "-z", "-Xlinker", "defs",
                    "-Xlinker", "--version-script=\(Context.packageDirectory)/pam/exports.map", "-Xlinker",
                    "--strip-all",
                ])
            ]),

        // libqrencode, for the QR code of a shared secret (`keyway enroll totp`). Only KeywayTools links it.
        .systemLibrary(name: "CQREncode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),

        // What only the `keyway` command shows a person, kept out of the module: the pattern drawn on a terminal grid,
        // the simulator's ROC plot, `keyway doctor`'s reading of PAM stacks, a shared secret's QR code, `keyway
        // calibrate`'s measurement of Argon2id. Tested on its
        // own (Tests/KeywayToolsTests).
        library(
            "KeywayTools",
            [
                "KeywayCore", "KeywayGesture", "KeywayBiometricSimulator", "KeywayConfig", "KeywayConfigFiles",
                "KeywayRuntime", "CQREncode", "KeywayCrypto", "KeywayFactors", "KeywayPlatform",
            ]),

        // The `keyway` command line.
        .executableTarget(
            name: "keyway",
            dependencies: [
                "KeywayCore", "KeywayTools", "KeywayConfig", "KeywayConfigFiles", "KeywayFactors", "KeywayRuntime",
                "KeywayVault", "KeywayPlatform", "KeywayCrypto", "KeywayBiometric", "KeywayBiometricSimulator",
                "KeywayGesture", "KeywayStore", "KeywayWire",
            ],
            swiftSettings: strictSettings),

        // Xlib and cairo, for the X11 lock screen only.
        .systemLibrary(
            name: "CX11Cairo", pkgConfig: "cairo-xlib", providers: [.apt(["libx11-dev", "libcairo2-dev"])]),

        // keyway-lock, the X11 lock screen: the locking, drawing and authentication processes (docs/LOCK.md).
        .executableTarget(
            name: "keyway-lock",
            dependencies: [
                "CX11Cairo", "CPAM", "KeywayCore", "KeywayGesture", "KeywayGestureDrawing", "KeywayPlatform",
                "KeywayRuntime",
            ],
            swiftSettings: strictSettings),

        // Test doubles shipped as a real library: scripted conversation, manual clock, conformance checks.
        library("KeywayTestSupport", ["KeywayCore"]),

        tests("KeywayCoreTests", ["KeywayCore", "KeywayTestSupport"]),
        tests(
            "KeywayToolsTests",
            [
                "KeywayTools", "KeywayCore", "KeywayFactors", "KeywayGesture", "KeywayBiometricSimulator",
                "KeywayConfig", "KeywayRuntime",
            ]),
        tests(
            "KeywayConfigTests",
            [
                "KeywayConfig", "KeywayConfigFiles", "KeywayCore", "KeywayFactors", "KeywayRuntime",
                "KeywayTestSupport", "KeywayCrypto", "KeywayGesture", "KeywayBiometric", "KeywayBiometricSimulator",
            ]),
        tests("KeywayPlatformTests", ["KeywayPlatform", "KeywayCore", "KeywayTestSupport"]),
        tests("KeywayCryptoTests", ["KeywayCrypto", "KeywayCore"]),
        // keywayd's own tests: the server in-process, and keywayd as a process under hostile peers, floods, shares of
        // the hash pool, notes and arming (with the built programs, through the fixture below).
        tests(
            "KeywayDaemonTests",
            [
                "KeywayDaemon", "KeywayCore", "KeywayWire", "KeywayRuntime", "KeywayTestSupport", "KeywayPlatform",
                "KeywayProcessFixture", "keyway-hostile",
            ]),
        tests(
            "KeywayWireTests",
            [
                "KeywayWire", "KeywayCore", "KeywayCrypto", "KeywayFactors", "KeywayGesture", "KeywayPasscode",
                "KeywayTestSupport",
            ]),
        tests("GestureDrawingTests", ["KeywayGestureDrawing", "KeywayGesture"]),
        tests("GestureTests", ["KeywayGesture", "KeywayCore", "KeywayPlatform", "KeywayCrypto", "KeywayTestSupport"]),
        tests(
            "BiometricSimulatorTests",
            [
                "KeywayBiometric", "KeywayBiometricSimulator", "KeywayCore", "KeywayTestSupport", "KeywayPasscode",
                "KeywayPlatform",
                "KeywayCrypto",
            ]),
        tests("TOTPTests", ["KeywayTOTP", "KeywayCore", "KeywayTestSupport"]),
        // The security key's record codec, alone: no libfido2, no key (the PAM tests drive those).
        tests("FIDO2RecordTests", ["KeywayFIDO2", "KeywayCore"]),
        tests(
            "RecoveryTests",
            ["KeywayRecovery", "KeywayCore", "KeywayCrypto", "KeywayStore", "KeywayTestSupport", "KeywayTOTP"]),
        tests(
            "PasscodeTests", ["KeywayPasscode", "KeywayCore", "KeywayCrypto", "KeywayTestSupport"]),
        tests(
            "KeywayStoreTests",
            [
                "KeywayStore", "KeywayCore", "KeywayPlatform", "KeywayTestSupport", "KeywayTOTP", "KeywayFactors",
                "KeywayRecovery", "KeywayFIDO2", "KeywayCrypto", "keyway-probe",
            ]),
        tests(
            "PAMTests",
            [
                "KeywayRuntime", "KeywayConfig", "KeywayConfigFiles", "KeywayFactors", "KeywayVault", "KeywayCrypto",
                "KeywayCore", "KeywayStore", "KeywayPlatform", "KeywayGesture", "KeywayPasscode", "KeywayTestSupport",
                "keyway-softkey", "KeywayFIDO2", "KeywayProcessFixture", "KeywayGestureDrawing",
            ]),
        // What the process tests share: a throwaway PAM setup with keywayd (`PAMFixture`), programs run as a person
        // would (`run`, `Terminal` in tmux), the syslog capture and its datagram sink. PAMTests and KeywayDaemonTests
        // use it.
        .target(
            name: "KeywayProcessFixture",
            dependencies: [
                "KeywayBiometric", "KeywayBiometricSimulator", "KeywayCore", "KeywayCrypto", "KeywayGesture",
                "KeywayPasscode", "KeywayPlatform", "KeywayRuntime", "KeywayStore", "KeywayVault",
            ],
            path: "Tests/KeywayProcessFixture", swiftSettings: strictSettings),
        // The parsers that read hostile input, under libFuzzer (`make fuzz`); a replayer otherwise.
        .executableTarget(
            name: "keyway-fuzz",
            dependencies: [
                "KeywayCore", "KeywayFactors", "KeywayGesture", "KeywayBiometric", "KeywayBiometricSimulator",
                "KeywayStore", "KeywayPasscode", "KeywayRuntime", "KeywayWire", "KeywayCrypto", "KeywayConfig",
            ],
            path: "Tests/KeywayFuzz", swiftSettings: strictSettings),
        // What a hostile local user does to keywayd, run as that user by the hostile-peer tests.
        .executableTarget(
            name: "keyway-hostile",
            dependencies: ["KeywayCore", "KeywayPlatform", "KeywayWire"],
            path: "Tests/KeywayHostile", swiftSettings: strictSettings),
        // A software FIDO2 security key (CTAP2 over a Unix socket; Ed25519 through libsodium, ES256 and the PIN
        // protocol's P-256, AES and HMAC through libcrypto in a small C helper) for the FIDO2 tests. The LD_PRELOAD
        // shim that lets any libfido2 program reach it is C, built by `make harness` with gcc (Tests/SoftKeyShim),
        // so it carries no Swift runtime into the programs it is preloaded into. Nothing Keyway ships links either.
        .target(
            name: "SoftKeyCrypto", path: "Tests/SoftKeyCrypto", linkerSettings: [.linkedLibrary("crypto")]),
        .executableTarget(
            name: "keyway-softkey",
            dependencies: ["KeywayCore", "KeywayPlatform", "CSodium", "CKeywayLibc", "SoftKeyCrypto"],
            path: "Tests/KeywaySoftKey", swiftSettings: strictSettings),
        // A separate process that drives a real store, for the multi-process tests and the store benchmark.
        .executableTarget(
            name: "keyway-probe",
            dependencies: ["KeywayStore", "KeywayCore", "KeywayPasscode", "KeywayPlatform", "KeywayCrypto"],
            path: "Tests/KeywayProbe", swiftSettings: strictSettings),
    ],
    swiftLanguageModes: [.v6]
)
