import CKeywayLibc
public import KeywayConfig
public import KeywayConfigFiles
public import KeywayCore
public import KeywayFactors
import KeywayPlatform
public import KeywayWire

/// The compiled `keyway.conf`, kept between processes so that each authentication does not compile it again
/// (docs/ARCHITECTURE.md §11, "The compiled configuration").
///
/// The module reads the files on every call, as always (their owners and modes checked, so an edit applies at once);
/// only the compiling is saved. A kept form is used when it holds exactly the bytes just read, file by file, and was
/// made by the same build of the code (`build`); otherwise the files are compiled and, by a root process, the form
/// kept for the next call. It is trusted only in a directory root alone can change and from a file root alone can
/// change, like the configuration itself; anything else, a truncated or malformed form included, is a miss.
public struct ConfigurationCache: Sendable {
    /// Where the forms are kept: keywayd's socket directory, /run/keyway (cleared at boot).
    public let directory: String
    /// What identifies the code that compiles (a form kept by another build is never used), found only when a form
    /// is read or kept; nil when it cannot be told, and then nothing is.
    private let identify: @Sendable () -> [UInt8]?

    /// The largest form read.
    static let maximumSize = 1 << 20
    /// The first bytes of a form, after the wire version and kind: the format's name and revision. Computed, as the
    /// module keeps no stored value that allocates (docs/ARCHITECTURE.md §8).
    static var magic: [UInt8] { Array("keyway.conf compiled 3".utf8) }

    /// A cache in `directory`, for code identified by `build`.
    public init(directory: String, build: [UInt8]) {
        self.directory = directory
        identify = { build }
    }

    private init(directory: String, identify: @escaping @Sendable () -> [UInt8]?) {
        self.directory = directory
        self.identify = identify
    }

    /// The cache in the directory of keywayd's socket, for the code of this module (the file it was loaded from:
    /// device, inode, size and modification time); nothing is read or kept when that file cannot be told.
    public static func besideSocket(_ socket: String) -> ConfigurationCache? {
        guard let slash = socket.utf8.lastIndex(of: UInt8(ascii: "/")), slash != socket.utf8.startIndex else {
            return nil
        }
        return ConfigurationCache(directory: String(socket[..<slash])) {
            var identity = [UInt64](repeating: 0, count: 5)
            guard keyway_code_identity(&identity) == 0 else { return nil }
            return build(identity: identity)
        }
    }

    /// The build named by a code file's identity (`keyway_code_identity`: device, inode, size, mtime seconds and
    /// nanoseconds), as a form records it.
    public static func build(identity: [UInt64]) -> [UInt8] {
        var build = WireWriter(kind: 0)
        for word in identity { build.i64(Int64(bitPattern: word)) }
        return build.bytes
    }

    /// The file of the form for the configuration at `path`: a hash of the path names it, so each `config=` has one.
    public func fileName(for path: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in path.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return "keyway.conf-" + String(repeating: "0", count: 16 - hex.utf8.count) + hex + ".compiled"
    }

    /// The configuration compiled from exactly `sources` (read from `path` and its drop-ins): restored from the kept
    /// form when a trusted one holds these bytes, else compiled and, by root, kept for the next call. The build is
    /// found and the directory opened once for both.
    public func configuration(for path: String, sources: [ConfigSource], plugins: [FactorPlugin])
        -> Result<Configuration, ConfigurationProblems>
    {
        guard let build = identify() else { return Configuration.parse(sources, plugins: plugins) }
        let dir = keyway_open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
        guard dir >= 0 else { return Configuration.parse(sources, plugins: plugins) }
        defer { close(dir) }
        guard case .success = TrustedFile.rootOnly(.directory).check(descriptor: dir) else {
            return Configuration.parse(sources, plugins: plugins)
        }
        let name = fileName(for: path)
        if case .read(let bytes) = TrustedFile.rootOnly(.regularFile).read(name, at: dir, limit: Self.maximumSize),
            let kept = try? Self.decode(bytes, build: build, sources: sources, plugins: plugins)
        {
            return .success(kept)
        }
        let compiled = Configuration.parse(sources, plugins: plugins)
        if case .success(let configuration) = compiled, geteuid() == 0 {
            keep(Self.encode(configuration, build: build, sources: sources), as: name, in: dir)
        }
        return compiled
    }

    /// Writes `form` as `name` in the open directory. Failing to keep it is not an error: the next call compiles
    /// again.
    private func keep(_ form: [UInt8], as name: String, in dir: Int32) {
        guard form.count <= Self.maximumSize else { return }
        KeptFiles.replace(name, in: dir, with: form, mode: 0o644)
    }

    // MARK: - The form

    /// The form: the magic, the build, the sources (paths and bytes), then the configuration's parts.
    public static func encode(_ configuration: Configuration, build: [UInt8], sources: [ConfigSource]) -> [UInt8] {
        var out = WireWriter(kind: 0, capacity: 4096 + sources.reduce(0) { $0 + $1.bytes.count })
        out.data(magic)
        out.data(build)
        out.u32(sources.count)
        for source in sources {
            out.string(source.path)
            out.data(source.bytes)
        }
        let plugins = configuration.plugins
        book(configuration.settings, plugins: plugins, into: &out)
        origins(configuration.settingOrigins, into: &out)
        out.u32(configuration.policies.count)
        for policy in configuration.policies {
            out.bool(policy.isBuiltIn)
            definition(policy.base, plugins: plugins, into: &out)
            out.u32(policy.variants.count)
            for variant in policy.variants { definition(variant, plugins: plugins, into: &out) }
        }
        out.u32(configuration.warnings.count)
        for warning in configuration.warnings { diagnostic(warning, into: &out) }
        out.u32(configuration.files.count)
        for file in configuration.files { out.string(file) }
        out.u32(configuration.unusable.count)
        for (name, errors) in configuration.unusable.sorted(by: { $0.key < $1.key }) {
            out.string(name)
            out.u32(errors.count)
            for error in errors { diagnostic(error, into: &out) }
        }
        return out.bytes
    }

    /// The configuration in `bytes`, if they are a whole form made by `build` from exactly `sources`.
    public static func decode(_ bytes: [UInt8], build: [UInt8], sources: [ConfigSource], plugins: [FactorPlugin])
        throws(WireError) -> Configuration
    {
        var reader = try WireReader(bytes)
        let limit = maximumSize
        guard reader.kind == 0, same(try reader.data("the magic", limit: 64), magic) else {
            throw WireError("not a compiled configuration")
        }
        guard same(try reader.data("the build", limit: 256), build) else {
            throw WireError("compiled by another build")
        }
        guard try reader.count("sources", limit: ConfigurationFiles.maximumDropIns + 1) == sources.count else {
            throw WireError("compiled from other files")
        }
        for source in sources {
            guard same(try reader.data("a path", limit: limit), Array(source.path.utf8)),
                same(try reader.data("a file", limit: limit), source.bytes)
            else { throw WireError("compiled from other contents") }
        }
        let settings = try book(&reader, plugins: plugins)
        let settingOrigins = try origins(&reader)
        var policies: [Configuration.NamedPolicy] = []
        for _ in 0..<(try reader.count("policies", limit: limit)) {
            let isBuiltIn = try reader.bool("built-in")
            let base = try definition(&reader, plugins: plugins)
            var variants: [Configuration.Definition] = []
            for _ in 0..<(try reader.count("variants", limit: limit)) {
                variants.append(try definition(&reader, plugins: plugins))
            }
            policies.append(Configuration.NamedPolicy(base: base, variants: variants, isBuiltIn: isBuiltIn))
        }
        var warnings: [Diagnostic] = []
        for _ in 0..<(try reader.count("warnings", limit: limit)) { warnings.append(try diagnostic(&reader)) }
        var files: [String] = []
        for _ in 0..<(try reader.count("files", limit: limit)) { files.append(try text(&reader, "a file")) }
        var unusable: [String: [Diagnostic]] = [:]
        for _ in 0..<(try reader.count("unusable policies", limit: limit)) {
            let name = try text(&reader, "a policy")
            var errors: [Diagnostic] = []
            for _ in 0..<(try reader.count("errors", limit: limit)) { errors.append(try diagnostic(&reader)) }
            unusable[name] = errors
        }
        try reader.finish()
        return Configuration(
            restoring: plugins, settings: settings, settingOrigins: settingOrigins, policies: policies,
            warnings: warnings, files: files, unusable: unusable)
    }

    /// A string of the form. It was written by root from strings, so it is not validated again: malformed UTF-8 would
    /// only be repaired, never trusted further.
    private static func text(_ reader: inout WireReader, _ what: String) throws(WireError) -> String {
        String(decoding: try reader.data(what, limit: maximumSize), as: UTF8.self)
    }

    /// True when the two hold the same bytes.
    private static func same(_ kept: ArraySlice<UInt8>, _ read: [UInt8]) -> Bool {
        kept.count == read.count
            && kept.withUnsafeBytes { a in
                read.withUnsafeBytes { b in a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 }
            }
    }

    private static func definition(
        _ definition: Configuration.Definition, plugins: [FactorPlugin], into out: inout WireWriter
    ) {
        out.string(definition.name)
        out.optional(definition.variant) { out, variant in
            out.string(variant.kind)
            out.string(variant.name)
        }
        rule(definition.rule, into: &out)
        out.string(definition.when.rawValue)
        out.string(definition.mode.rawValue)
        out.optional(definition.unenrolled) { $0.string($1.rawValue) }
        out.optional(definition.firstEnrollment) { $0.string($1.rawValue) }
        out.optional(definition.failMode) { $0.string($1.rawValue) }
        let overridden = definition.overrides.keys.sorted()
        out.u32(overridden.count)
        for factor in overridden {
            out.string(factor.rawValue)
            settings(definition.overrides[factor]!, of: plugins.plugin(factor), into: &out)
        }
        origins(definition.origins, into: &out)
        origin(definition.origin, into: &out)
        out.u32(definition.impossible.count)
        for reason in definition.impossible { out.string(reason) }
    }

    private static func definition(_ reader: inout WireReader, plugins: [FactorPlugin]) throws(WireError)
        -> Configuration.Definition
    {
        let limit = maximumSize
        let name = try text(&reader, "a policy name")
        let variant = try reader.optional("a variant") { reader throws(WireError) in
            Configuration.Variant(
                kind: try text(&reader, "a variant kind"),
                name: try text(&reader, "a variant name"))
        }
        let rule = try rule(&reader, depth: 0)
        let when = try choice(&reader, Configuration.When.self)
        let mode = try choice(&reader, Configuration.Mode.self)
        let unenrolled = try reader.optional("unenrolled") { reader throws(WireError) in
            try choice(&reader, Configuration.Unenrolled.self)
        }
        let firstEnrollment = try reader.optional("first-enrollment") { reader throws(WireError) in
            try choice(&reader, Configuration.FirstEnrollment.self)
        }
        let failMode = try reader.optional("failmode") { reader throws(WireError) in
            try choice(&reader, Configuration.FailMode.self)
        }
        var overrides: [FactorKind: FactorSettings] = [:]
        for _ in 0..<(try reader.count("overrides", limit: limit)) {
            let factor = FactorKind(rawValue: try text(&reader, "a factor"))
            overrides[factor] = try settings(&reader)
        }
        let origins = try origins(&reader)
        let origin = try origin(&reader)
        var impossible: [String] = []
        for _ in 0..<(try reader.count("impossible contexts", limit: limit)) {
            impossible.append(try text(&reader, "an impossible context"))
        }
        return Configuration.Definition(
            name: name, variant: variant, rule: rule, when: when, mode: mode, unenrolled: unenrolled,
            firstEnrollment: firstEnrollment, failMode: failMode, overrides: overrides, origins: origins,
            origin: origin,
            impossible: impossible)
    }

    private static func choice<T: RawRepresentable<String>>(_ reader: inout WireReader, _: T.Type) throws(WireError)
        -> T
    {
        guard let value = T(rawValue: try text(&reader, "a choice")) else {
            throw WireError("an unknown choice")
        }
        return value
    }

    private static func rule(_ rule: Policy.Rule, into out: inout WireWriter) {
        switch rule {
        case .factor(let kind, let attempts):
            out.u8(0)
            out.string(kind.rawValue)
            out.u32(attempts)
        case .atLeast(let count, let rules):
            out.u8(1)
            out.u32(count)
            out.u32(rules.count)
            for child in rules { self.rule(child, into: &out) }
        case .firstOf(let rules):
            out.u8(2)
            out.u32(rules.count)
            for child in rules { self.rule(child, into: &out) }
        }
    }

    /// A rule; the depth is bounded (a rule nests as deep as its text, which the builder bounds).
    private static func rule(_ reader: inout WireReader, depth: Int) throws(WireError) -> Policy.Rule {
        guard depth < 256 else { throw WireError("a rule nested too deep") }
        let limit = maximumSize
        switch try reader.u8("a rule") {
        case 0:
            return .factor(
                FactorKind(rawValue: try text(&reader, "a factor")),
                attempts: try reader.u32("attempts"))
        case 1:
            let count = try reader.u32("a count")
            var rules: [Policy.Rule] = []
            for _ in 0..<(try reader.count("rules", limit: limit)) { rules.append(try rule(&reader, depth: depth + 1)) }
            return .atLeast(count, of: rules)
        case 2:
            var rules: [Policy.Rule] = []
            for _ in 0..<(try reader.count("rules", limit: limit)) { rules.append(try rule(&reader, depth: depth + 1)) }
            return .firstOf(rules)
        default:
            throw WireError("an unknown rule")
        }
    }

    /// Every factor's settings: the plugins' factors that have any set.
    private static func book(_ book: SettingsBook, plugins: [FactorPlugin], into out: inout WireWriter) {
        let set = plugins.filter { plugin in plugin.settings.contains { book[plugin.kind].isSet($0.key) } }
        out.u32(set.count)
        for plugin in set {
            out.string(plugin.kind.rawValue)
            settings(book[plugin.kind], of: plugin, into: &out)
        }
    }

    private static func book(_ reader: inout WireReader, plugins: [FactorPlugin]) throws(WireError) -> SettingsBook {
        var book = SettingsBook()
        for _ in 0..<(try reader.count("factors", limit: maximumSize)) {
            let factor = FactorKind(rawValue: try text(&reader, "a factor"))
            book[factor] = try settings(&reader)
        }
        return book
    }

    /// The settings given (not defaulted), in the plugin's order.
    private static func settings(_ given: FactorSettings, of plugin: FactorPlugin?, into out: inout WireWriter) {
        let set = (plugin?.settings ?? []).filter { given.isSet($0.key) }
        out.u32(set.count)
        for setting in set {
            out.string(setting.key)
            switch given[setting] {
            case .integer(let value):
                out.u8(0)
                out.i64(Int64(value))
            case .boolean(let value):
                out.u8(1)
                out.bool(value)
            case .duration(let milliseconds):
                out.u8(2)
                out.optional(milliseconds) { $0.i64($1) }
            case .choice(let word):
                out.u8(3)
                out.string(word)
            case .rate(let denominator):
                out.u8(4)
                out.i64(Int64(denominator))
            case .word(let word):
                out.u8(5)
                out.string(word)
            }
        }
    }

    private static func settings(_ reader: inout WireReader) throws(WireError) -> FactorSettings {
        var settings = FactorSettings()
        for _ in 0..<(try reader.count("settings", limit: maximumSize)) {
            let key = try text(&reader, "a setting")
            let value: Setting.Value
            switch try reader.u8("a value") {
            case 0: value = .integer(Int(try reader.i64("an integer")))
            case 1: value = .boolean(try reader.bool("a boolean"))
            case 2:
                value = .duration(
                    try reader.optional("a duration") { reader throws(WireError) in try reader.i64("ms") })
            case 3: value = .choice(try text(&reader, "a choice"))
            case 4: value = .rate(Int(try reader.i64("a rate")))
            case 5: value = .word(try text(&reader, "a word"))
            default: throw WireError("an unknown value")
            }
            settings.set(key, value)
        }
        return settings
    }

    private static func origins(_ origins: [String: Configuration.Origin], into out: inout WireWriter) {
        let keys = origins.keys.sorted()
        out.u32(keys.count)
        for key in keys {
            out.string(key)
            origin(origins[key]!, into: &out)
        }
    }

    private static func origins(_ reader: inout WireReader) throws(WireError) -> [String: Configuration.Origin] {
        let count = try reader.count("origins", limit: maximumSize)
        var origins: [String: Configuration.Origin] = [:]
        origins.reserveCapacity(count)
        for _ in 0..<count {
            let key = try text(&reader, "a key")
            origins[key] = try origin(&reader)
        }
        return origins
    }

    private static func origin(_ origin: Configuration.Origin, into out: inout WireWriter) {
        out.optional(origin.file) { $0.string($1) }
        out.u32(origin.line)
        out.string(origin.missing)
    }

    private static func origin(_ reader: inout WireReader) throws(WireError) -> Configuration.Origin {
        Configuration.Origin(
            file: try reader.optional("a file") { reader throws(WireError) in
                try text(&reader, "a file")
            },
            line: try reader.u32("a line"), missing: try text(&reader, "an origin"))
    }

    private static func diagnostic(_ diagnostic: Diagnostic, into out: inout WireWriter) {
        out.string(diagnostic.severity.rawValue)
        out.string(diagnostic.file)
        out.u32(diagnostic.line)
        out.u32(diagnostic.column)
        out.u32(diagnostic.length)
        out.string(diagnostic.message)
        out.optional(diagnostic.help) { $0.string($1) }
        out.optional(diagnostic.source) { $0.string($1) }
    }

    private static func diagnostic(_ reader: inout WireReader) throws(WireError) -> Diagnostic {
        let severity = try choice(&reader, Diagnostic.Severity.self)
        let file = try text(&reader, "a file")
        let line = try reader.u32("a line")
        let column = try reader.u32("a column")
        let length = try reader.u32("a length")
        let message = try text(&reader, "a message")
        let help = try reader.optional("help") { reader throws(WireError) in try text(&reader, "help") }
        let source = try reader.optional("a source") { reader throws(WireError) in
            try text(&reader, "a source")
        }
        return Diagnostic(
            severity, file: file, line: line, column: column, length: length, message, help: help, source: source)
    }
}

extension ConfigurationFiles {
    /// `load`, the module's way: the files are still read and checked on every call, but compiled only when `cache`
    /// holds no form of exactly these bytes.
    public static func load(_ named: String?, plugins: [FactorPlugin] = Factors.all, cache: ConfigurationCache?)
        -> Result<Configuration, ConfigurationProblems>
    {
        let read: [ConfigSource]
        switch sources(named) {
        case .failure(let problems): return .failure(problems)
        case .success(let found): read = found
        }
        // The built-ins alone compile faster than a kept form is read.
        guard let cache, !read.isEmpty else { return Configuration.parse(read, plugins: plugins) }
        return cache.configuration(for: named ?? defaultPath, sources: read, plugins: plugins)
    }
}
