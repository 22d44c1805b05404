import Foundation
import KeywayConfig
import KeywayConfigFiles
import KeywayCore
import KeywayFactors
import KeywayRuntime
import Testing

/// The compiled keyway.conf kept between module calls (docs/ARCHITECTURE.md §11): used only for exactly the bytes
/// read and the same build, only from a file and a directory root alone can change; anything else compiles afresh.
@Suite("the compiled configuration kept between calls")
struct ConfigurationCacheTests {
    static let build = Array("test build 1".utf8)

    /// Every example of keyway.conf(5), each alone, then all together as drop-ins (as Benchmarks/run's).
    static func exampleSources() throws -> [[ConfigSource]] {
        let directory = packageDirectory + "/man/examples"
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".conf") }
            .sorted()
        let each = try names.map { name in
            let path = directory + "/" + name
            return [ConfigSource(path: path, bytes: Array(try Data(contentsOf: URL(fileURLWithPath: path))))]
        }
        return each + [
            each.flatMap { $0 }.enumerated().map { index, source in
                // Distinct policy names per drop-in, as one configuration cannot define a policy twice.
                var text = String(decoding: source.bytes, as: UTF8.self)
                text = text.replacingOccurrences(of: "[policy ", with: "[policy d\(index)-")
                return ConfigSource(path: "/etc/keyway/keyway.conf.d/\(index).conf", text: text)
            }
        ]
    }

    static func compile(_ sources: [ConfigSource]) throws -> Configuration {
        switch Configuration.parse(sources, plugins: Factors.all) {
        case .success(let configuration): return configuration
        case .failure(let problems): throw problems
        }
    }

    /// What a configuration means, for comparing two: every definition with its rule, settings and origins, the
    /// global settings and the warnings.
    static func meaning(_ configuration: Configuration) -> String {
        var lines: [String] = []
        for policy in configuration.policies {
            for definition in [policy.base] + policy.variants {
                let overrides = definition.overrides.keys.sorted().map { factor in
                    let plugin = Factors.all.plugin(factor)!
                    let values = plugin.settings.filter { definition.overrides[factor]!.isSet($0.key) }
                        .map { "\($0.key)=\(definition.overrides[factor]![$0])" }
                    return "\(factor)[\(values.joined(separator: ","))]"
                }
                let origins = definition.origins.keys.sorted().map { "\($0)@\(definition.origins[$0]!)" }
                lines.append(
                    "\(definition.name) \(definition.variant?.description ?? "base") builtIn=\(policy.isBuiltIn) "
                        + "\(definition.rule) when=\(definition.when) mode=\(definition.mode) "
                        + "unenrolled=\(definition.unenrolled?.rawValue ?? "-") "
                        + "first=\(definition.firstEnrollment?.rawValue ?? "-") \(overrides) \(origins) "
                        + "at=\(definition.origin) impossible=\(definition.impossible)")
            }
        }
        for plugin in Factors.all {
            for setting in plugin.settings {
                lines.append("\(plugin.kind).\(setting.key)=\(configuration.settings[plugin.kind][setting])")
            }
        }
        lines += configuration.settingOrigins.keys.sorted().map { "\($0)@\(configuration.settingOrigins[$0]!)" }
        lines += configuration.warnings.map { $0.description }
        lines += configuration.files
        return lines.joined(separator: "\n")
    }

    @Test("the kept form of every example means what compiling it means, and encodes to the same bytes again")
    func roundTrip() throws {
        for sources in try Self.exampleSources() + [[]] {
            let compiled = try Self.compile(sources)
            let form = ConfigurationCache.encode(compiled, build: Self.build, sources: sources)
            let restored = try ConfigurationCache.decode(
                form, build: Self.build, sources: sources, plugins: Factors.all)
            #expect(Self.meaning(restored) == Self.meaning(compiled), "\(sources.map { $0.path })")
            #expect(ConfigurationCache.encode(restored, build: Self.build, sources: sources) == form)
        }
    }

    @Test("a form is refused for other bytes, another path, another build, and when cut short at any byte")
    func refusals() throws {
        let sources = try Self.exampleSources().last!
        let form = ConfigurationCache.encode(try Self.compile(sources), build: Self.build, sources: sources)
        func refused(_ bytes: [UInt8], build: [UInt8] = Self.build, sources given: [ConfigSource]? = nil) -> Bool {
            (try? ConfigurationCache.decode(bytes, build: build, sources: given ?? sources, plugins: Factors.all))
                == nil
        }
        var edited = sources
        edited[1].bytes[edited[1].bytes.count - 2] ^= 1
        #expect(refused(form, sources: edited))
        var moved = sources
        moved[0].path += "x"
        #expect(refused(form, sources: moved))
        #expect(refused(form, sources: Array(sources.dropLast())))
        #expect(refused(form, build: Array("test build 2".utf8)))
        for length in 0..<form.count { #expect(refused(Array(form.prefix(length))), "cut at \(length)") }
        #expect(refused(form + [0]))
    }

    @Test("a form with any one byte changed is read or refused, never a crash")
    func flippedBytes() throws {
        let sources = try Self.exampleSources().last!
        let form = ConfigurationCache.encode(try Self.compile(sources), build: Self.build, sources: sources)
        let header =
            form.count
            - ConfigurationCache.encode(try Self.compile([]), build: Self.build, sources: [])
            .count
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            var bytes = form
            let at = Int.random(in: max(0, header - 64)..<bytes.count, using: &generator)
            bytes[at] = UInt8.random(in: 0...255, using: &generator)
            _ = try? ConfigurationCache.decode(bytes, build: Self.build, sources: sources, plugins: Factors.all)
        }
    }

    /// A directory of root's for the cache and the configuration, removed afterwards.
    final class Place {
        let directory: String
        let cache: ConfigurationCache
        let config: String

        init() throws {
            directory = NSTemporaryDirectory() + "keyway-cache-" + UUID().uuidString
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
            cache = ConfigurationCache(directory: directory, build: ConfigurationCacheTests.build)
            config = directory + "/keyway.conf"
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }

        func write(_ text: String) throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: config))
            chmod(config, 0o644)
        }

        var kept: String { directory + "/" + cache.fileName(for: config) }

        func load() throws -> Configuration {
            switch ConfigurationFiles.load(config, plugins: Factors.all, cache: cache) {
            case .success(let configuration): return configuration
            case .failure(let problems): throw problems
            }
        }

        func rule(_ policy: String) throws -> String {
            "\(try #require(try load().policy(named: policy)).base.rule)"
        }

        /// Plants, under the name of the form for the file as it is now, the form of `other` made to claim it.
        func plant(_ other: String) throws {
            guard case .success(let sources) = ConfigurationFiles.sources(config) else {
                throw CocoaError(.fileReadUnknown)
            }
            let lie = try ConfigurationCacheTests.compile([ConfigSource(path: config, text: other)])
            let form = ConfigurationCache.encode(lie, build: ConfigurationCacheTests.build, sources: sources)
            try? FileManager.default.removeItem(atPath: kept)
            try Data(form).write(to: URL(fileURLWithPath: kept))
            chmod(kept, 0o644)
        }
    }

    @Test("root's load keeps the form (root's, 0644) and the next load uses it; an edit applies at once")
    func keptAndUsed() throws {
        let place = try Place()
        try place.write("[policy site]\nrequire = passcode\n")
        #expect(try place.rule("site") == "passcode×3")
        let status = try FileManager.default.attributesOfItem(atPath: place.kept)
        #expect(status[.ownerAccountID] as? Int == 0)
        #expect(status[.posixPermissions] as? Int == 0o644)
        // Used: a form planted for these bytes (root's, in root's directory) is what the next load returns.
        try place.plant("[policy site]\nrequire = gesture\n")
        #expect(try place.rule("site") == "gesture×3")
        // An edit: other bytes, so the file is compiled again and the form replaced.
        try place.write("[policy site]\nrequire = passcode and gesture\n")
        #expect(try place.rule("site") == "all-of(passcode×3, gesture×3)")
        #expect(try place.rule("site") == "all-of(passcode×3, gesture×3)")
        let files = try FileManager.default.contentsOfDirectory(atPath: place.directory)
        #expect(files.sorted() == ["keyway.conf", place.cache.fileName(for: place.config)].sorted(), "\(files)")
    }

    @Test("a form another user could have written is never used: not root's, writable by others, a link, a bad dir")
    func untrusted() throws {
        let place = try Place()
        try place.write("[policy site]\nrequire = passcode\n")
        try place.plant("[policy site]\nrequire = gesture\n")
        #expect(try place.rule("site") == "gesture×3")  // planted right: used (the control)

        chown(place.kept, 65534, 65534)
        #expect(try place.rule("site") == "passcode×3", "a form owned by nobody is used")

        try place.plant("[policy site]\nrequire = gesture\n")
        chmod(place.kept, 0o666)
        #expect(try place.rule("site") == "passcode×3", "a world-writable form is used")

        // A link to a form that would be trusted, in its place.
        try place.plant("[policy site]\nrequire = gesture\n")
        let elsewhere = place.directory + "/elsewhere"
        try FileManager.default.moveItem(atPath: place.kept, toPath: elsewhere)
        try FileManager.default.createSymbolicLink(atPath: place.kept, withDestinationPath: elsewhere)
        #expect(try place.rule("site") == "passcode×3", "a link is followed")
        try FileManager.default.removeItem(atPath: place.kept)

        // A directory others can write: its forms are neither used nor kept.
        try place.plant("[policy site]\nrequire = gesture\n")
        chmod(place.directory, 0o777)
        #expect(try place.rule("site") == "passcode×3", "a form in a world-writable directory is used")
        try FileManager.default.removeItem(atPath: place.kept)
        _ = try place.load()
        #expect(!FileManager.default.fileExists(atPath: place.kept), "a form is kept in a world-writable directory")
        chmod(place.directory, 0o755)
    }

    @Test("a configuration with errors is refused with them, whatever is kept, and nothing is kept for it")
    func errorsAreNotKept() throws {
        let place = try Place()
        try place.write("[policy site]\nrequire = passcode\n")
        _ = try place.load()
        try place.write("[policy site]\nrequire = passcode\n[gesture]\nmin-dots = 12\n")
        switch ConfigurationFiles.load(place.config, plugins: Factors.all, cache: place.cache) {
        case .success: Issue.record("a configuration with a setting out of range was used")
        case .failure(let problems): #expect(problems.errors.first?.headline.contains(":4:12: error:") == true)
        }
        // The form of the good bytes is still there, and is not used for the bad ones.
        #expect(FileManager.default.fileExists(atPath: place.kept))
    }

    @Test("a policy with errors is kept unusable in the form, with its errors, beside the usable ones")
    func unusableIsKept() throws {
        let place = try Place()
        try place.write("[policy site]\nrequire = passcode\n[policy typo]\nrequire = pascode\n")
        for pass in ["compiled", "restored"] {
            guard
                case .success(let configuration) = ConfigurationFiles.load(
                    place.config, plugins: Factors.all, cache: place.cache)
            else {
                Issue.record("\(pass): refused")
                continue
            }
            #expect(configuration.policy(named: "site") != nil, "\(pass)")
            #expect(
                configuration.unusable["typo"]?.first?.headline.hasSuffix(":4:11: error: unknown factor 'pascode'")
                    == true, "\(pass): \(configuration.unusable)")
            #expect(FileManager.default.fileExists(atPath: place.kept), "\(pass)")
        }
    }
}

/// pam_keyway's arguments are split at the first '=' (as bytes); what each shape means.
@Suite("the module's arguments")
struct ModuleArgumentTests {
    @Test("a value keeps every '=' after the first; a flag takes none; an empty or keyless one is refused")
    func splitting() throws {
        guard case .success(let parsed) = ModuleArguments.parse(["policy=a=b", "config=/etc/k=1.conf", "debug"])
        else { Issue.record("valid arguments refused"); return }
        #expect(parsed.policy == "a=b")
        #expect(parsed.config == "/etc/k=1.conf")
        #expect(parsed.debug)
        for refused in [["debug=1"], ["policy="], ["=passcode"], ["policy"], ["pölicy=x"], ["debug", "debug"]] {
            guard case .failure(let error) = ModuleArguments.parse(refused) else {
                Issue.record("\(refused) accepted")
                continue
            }
            #expect(error.code == .invalidPolicy, "\(refused)")
        }
    }
}
