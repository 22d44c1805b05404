// swift-tools-version:6.0
// Keyway: multi-factor authentication for Linux. See README.md and docs/ARCHITECTURE.md.
import PackageDescription

/// Settings every Swift target shares (the habits of swift-log's manifest).
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Keyway",
    products: [
        .executable(name: "keyway", targets: ["keyway"]),
        .library(name: "KeywayCore", targets: ["KeywayCore"]),
        .library(name: "KeywayPlatform", targets: ["KeywayPlatform"]),
        .library(name: "KeywayGesture", targets: ["KeywayGesture"]),
        .library(name: "KeywayBiometricSimulator", targets: ["KeywayBiometricSimulator"]),
        .library(name: "KeywayPasscode", targets: ["KeywayPasscode"]),
        .library(name: "KeywayTestSupport", targets: ["KeywayTestSupport"]),
        .library(name: "KeywayStore", targets: ["KeywayStore"]),
        .executable(name: "keywayd", targets: ["keywayd"]),
        // The PAM module. SwiftPM names the file libpam_keyway.so; `make module` installs it as pam_keyway.so.
        .library(name: "pam_keyway", type: .dynamic, targets: ["PAMKeyway"]),
    ],
    targets: [
        // The core: protocols, secrets, errors, throttling, the policy engine. No C, no Foundation.
        .target(name: "KeywayCore", swiftSettings: strictSettings),

        // The C library as the module's code sees it in both build modes (Embedded Swift has no Glibc overlay):
        // the same headers, errno and open(2) as functions.
        .systemLibrary(name: "CKeywayLibc", path: "Sources/CKeywayLibc"),

        // The operating system: the wall clock, SIGPIPE, Unix sockets. No C library beyond libc.
        .target(name: "KeywayPlatform", dependencies: ["KeywayCore", "CKeywayLibc"], swiftSettings: strictSettings),

        // libsodium, wrapped once: Argon2id hashing and constant-time helpers. Only keywayd's side links it.
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium",
                       providers: [.apt(["libsodium-dev"])]),
        .target(name: "KeywayCrypto", dependencies: ["KeywayCore", "CSodium"], swiftSettings: strictSettings),

        // The SQLite store: durable enrollments, counters and lockouts.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "KeywayStore", dependencies: ["KeywayCore", "CSQLite"], swiftSettings: strictSettings),

        // One target per factor.
        .target(name: "KeywayGesture", dependencies: ["KeywayCore"], path: "Plugins/Gesture",
                swiftSettings: strictSettings),
        .target(name: "KeywayBiometricSimulator", dependencies: ["KeywayCore", "CKeywayLibc"],
                path: "Plugins/BiometricSimulator", swiftSettings: strictSettings),
        .target(name: "KeywayPasscode", dependencies: ["KeywayCore"], path: "Plugins/Passcode",
                swiftSettings: strictSettings),

        // The configuration language: keyway.conf's sections, settings checked against what the plugins declare,
        // the `require =` rules, diagnostics. Pure Swift, no files: the loader is in KeywayRuntime.
        .target(name: "KeywayConfig", dependencies: ["KeywayCore"], swiftSettings: strictSettings),

        // keywayd's protocol: the frames, the requests and answers, and who may ask what. Pure Swift.
        .target(name: "KeywayWire", dependencies: ["KeywayCore"], swiftSettings: strictSettings),

        // The clients' composition (the PAM module, the CLI): the factors' person side over keywayd's socket.
        .target(name: "KeywayRuntime",
                dependencies: ["KeywayCore", "KeywayConfig", "KeywayPlatform", "KeywayWire", "KeywayGesture",
                               "KeywayPasscode", "KeywayBiometricSimulator", "CKeywayLibc"],
                swiftSettings: strictSettings),

        // The state's composition (keywayd, `keyway --store`, tests): the SQLite store, Argon2id, the keepers.
        .target(name: "KeywayVault",
                dependencies: ["KeywayCore", "KeywayCrypto", "KeywayStore", "KeywayGesture", "KeywayPasscode",
                               "KeywayBiometricSimulator", "KeywayWire", "KeywayPlatform", "KeywayRuntime"],
                swiftSettings: strictSettings),

        // keywayd: the one process that opens the store and runs the KDF (docs/ARCHITECTURE.md §10).
        .executableTarget(name: "keywayd",
                          dependencies: ["KeywayCore", "KeywayConfig", "KeywayRuntime", "KeywayVault", "KeywayWire",
                                         "KeywayPlatform"],
                          swiftSettings: strictSettings),

        // The PAM module's sources in full mode, built on every `swift build` so that both modes keep compiling. The
        // deployable pam_keyway.so is the Embedded Swift build of the same sources (scripts/build-module.sh,
        // docs/ARCHITECTURE.md §4); this one links the static Swift runtime the way the module did before.
        .systemLibrary(name: "CPAM", path: "pam/CPAM", providers: [.apt(["libpam0g-dev"])]),
        .target(name: "PAMKeyway",
                dependencies: ["CPAM", "CKeywayLibc", "KeywayCore", "KeywayConfig", "KeywayPlatform", "KeywayRuntime"],
                path: "pam/PAMKeyway",
                swiftSettings: strictSettings + [.unsafeFlags(["-static-stdlib"])],
                linkerSettings: [.unsafeFlags([
                    "-static-stdlib", "-Xlinker", "-z", "-Xlinker", "nodelete", "-Xlinker", "-z", "-Xlinker", "defs",
                    "-Xlinker", "--version-script=\(Context.packageDirectory)/pam/exports.map", "-Xlinker", "--strip-all",
                ])]),

        // What only the `keyway` command shows a person, kept out of the module: the pattern drawn on a terminal grid,
        // the simulator's ROC plot, `keyway doctor`'s reading of PAM stacks. Pure Swift over the plugins, tested on
        // its own (Tests/KeywayToolsTests).
        .target(name: "KeywayTools",
                dependencies: ["KeywayCore", "KeywayGesture", "KeywayBiometricSimulator", "KeywayConfig",
                               "KeywayRuntime"],
                swiftSettings: strictSettings),

        // The `keyway` command line.
        .executableTarget(name: "keyway",
                          dependencies: ["KeywayCore", "KeywayTools", "KeywayConfig", "KeywayRuntime", "KeywayVault", "KeywayStore", "KeywayPlatform",
                                         "KeywayCrypto", "KeywayBiometricSimulator", "KeywayGesture", "KeywayPasscode",
                                         "KeywayWire"],
                          swiftSettings: strictSettings),

        // Test doubles shipped as a real library: scripted conversation, manual clock, conformance checks.
        .target(name: "KeywayTestSupport", dependencies: ["KeywayCore"], swiftSettings: strictSettings),

        .testTarget(name: "KeywayCoreTests", dependencies: ["KeywayCore", "KeywayTestSupport", "KeywayPlatform"],
                    swiftSettings: strictSettings),
        .testTarget(name: "KeywayToolsTests",
                    dependencies: ["KeywayTools", "KeywayCore", "KeywayGesture", "KeywayBiometricSimulator",
                                   "KeywayConfig", "KeywayRuntime"],
                    swiftSettings: strictSettings),
        .testTarget(name: "KeywayConfigTests",
                    dependencies: ["KeywayConfig", "KeywayCore", "KeywayRuntime", "KeywayTestSupport", "KeywayCrypto",
                                   "KeywayGesture", "KeywayPasscode", "KeywayBiometricSimulator"],
                    swiftSettings: strictSettings),
        .testTarget(name: "KeywayPlatformTests", dependencies: ["KeywayPlatform", "KeywayCore", "KeywayCrypto"],
                    swiftSettings: strictSettings),
        .testTarget(name: "GestureTests",
                    dependencies: ["KeywayGesture", "KeywayCore", "KeywayPlatform", "KeywayCrypto", "KeywayTestSupport"],
                    swiftSettings: strictSettings),
        .testTarget(name: "BiometricSimulatorTests",
                    dependencies: ["KeywayBiometricSimulator", "KeywayCore", "KeywayTestSupport", "KeywayPasscode",
                                   "KeywayPlatform", "KeywayCrypto"],
                    swiftSettings: strictSettings),
        .testTarget(name: "PasscodeTests",
                    dependencies: ["KeywayPasscode", "KeywayCore", "KeywayPlatform", "KeywayCrypto", "KeywayTestSupport"],
                    swiftSettings: strictSettings),
        .testTarget(name: "KeywayStoreTests",
                    dependencies: ["KeywayStore", "KeywayCore", "KeywayPasscode", "KeywayPlatform", "KeywayTestSupport",
                                   "keyway-probe"],
                    swiftSettings: strictSettings),
        .testTarget(name: "PAMTests",
                    dependencies: ["KeywayRuntime", "KeywayConfig", "KeywayVault", "KeywayWire", "KeywayCrypto", "KeywayCore",
                                   "KeywayTestSupport",
                                   "KeywayStore", "KeywayPlatform", "KeywayGesture",
                                   "KeywayPasscode", "KeywayBiometricSimulator", "keyway-hostile"],
                    swiftSettings: strictSettings),
        // The parsers that read hostile input, under libFuzzer (`make fuzz`); a replayer otherwise.
        .executableTarget(
            name: "keyway-fuzz",
            dependencies: [
                "KeywayCore", "KeywayGesture", "KeywayBiometricSimulator", "KeywayPlatform", "KeywayStore",
                "KeywayPasscode", "KeywayRuntime", "KeywayWire", "KeywayCrypto", "KeywayConfig",
            ],
            path: "Tests/KeywayFuzz", swiftSettings: strictSettings),
        // What a hostile local user does to keywayd, run as that user by the hostile-peer tests.
        .executableTarget(name: "keyway-hostile",
                          dependencies: ["KeywayCore", "KeywayPlatform", "KeywayWire"],
                          path: "Tests/KeywayHostile", swiftSettings: strictSettings),
        // A separate process that drives a real store, for the multi-process tests and the store benchmark.
        .executableTarget(name: "keyway-probe",
                          dependencies: ["KeywayStore", "KeywayCore", "KeywayPasscode", "KeywayPlatform", "KeywayCrypto"],
                          path: "Tests/KeywayProbe", swiftSettings: strictSettings),
    ],
    swiftLanguageModes: [.v6]
)
