import Foundation
import KeywayCore
import KeywayFactors
import Testing

@testable import KeywayProcessFixture

/// Every factor's name, as the command line lists them ("gesture, biometric or passcode").
let factorWords = Setting.list(Factors.all.map { $0.kind.rawValue })

/// The `keyway` command as built (`build/keyway`): error messages and exit statuses, table-driven.
@Suite("keyway command line")
struct CommandLineTests {
    /// Every command's usage errors: unknown option, bad value, out of range, missing or extra words, no such
    /// factor. Each says what is wrong, suggests the near miss, points at the command's own help, and exits 64.
    static let usageCases: [([String], String)] = [
        (["--usr", "alice", "status"], "Error: Unknown option '--usr'. Did you mean '--user'?"),
        (["status", "--stor"], "Error: Unknown option '--stor'. Did you mean '--store'?"),
        (["statsu"], "Error: Unknown command 'statsu'. Did you mean 'status'?"),
        (["status", "extra"], "Error: Unexpected argument 'extra' for 'keyway status'."),
        (["status", "--rounds", "3"], "Error: 'keyway status' takes no option '--rounds'."),
        (["enroll", "gesture", "--user"], "Error: Missing value for '--user <user>'."),
        (
            ["enroll", "retina", "--user", "alice"],
            "Error: Unknown factor 'retina'; use \(factorWords)."
        ),
        (["enroll", "gesture"], "Error: Missing '--user <user>'."),
        (["enroll", "--user", "root"], "Error: Missing the factor: \(factorWords)."),
        (
            ["enroll", "gesture", "--user", "root", "--finger", "left"],
            "Error: '--finger' applies to a factor enrolled in named parts only."
        ),
        (
            ["enroll", "gesture", "--user", "root", "--polcy", "x"],
            "Error: Unknown option '--polcy'. Did you mean '--policy'?"
        ),
        (["enroll", "gesture", "--user", "bad:name"], "Error: 'bad:name' is not a valid user name"),
        (["change", "gesture"], "Error: Missing '--user <user>'."),
        (
            ["change", "biometric", "--user", "alice"],
            "Error: 'keyway change' does not apply to the biometric; use gesture or passcode."
        ),
        (["remove", "--user", "alice"], "Error: Missing the factor: \(factorWords)."),
        (["remove", "iris", "--user", "alice"], "Error: Unknown factor 'iris'; use \(factorWords)."),
        (["enable"], "Error: Missing the factor: \(factorWords)."),
        (["enable", "gesture", "--stdin"], "Error: 'keyway enable' takes no option '--stdin'."),
        (["disable", "retina"], "Error: Unknown factor 'retina'; use \(factorWords)."),
        (["disable", "gesture", "--user", "bad:name"], "Error: 'bad:name' is not a valid user name"),
        (["set", "show-trail"], "Error: Missing the value: on or off."),
        (["set", "show-trial", "off"], "Error: Unknown switch 'show-trial'; use gesture.enabled, gesture.show-trail,"),
        (["set", "show-trail", "maybe"], "Error: Unknown value 'maybe'; use on or off."),
        (["reset"], "Error: Missing '--user <user>'."),
        (["health", "--jsn"], "Error: Unknown option '--jsn'. Did you mean '--json'?"),
        (["health", "--json=yes"], "Error: The flag '--json' takes no value."),
        (["metrics", "extra"], "Error: Unexpected argument 'extra' for 'keyway metrics'."),
        (
            ["reset", "--user", "alice", "--factor", "retina"],
            "Error: Unknown factor 'retina'; use \(factorWords)."
        ),
        (["unlock", "--stdin=yes", "--user", "a"], "Error: The flag '--stdin' takes no value."),
        (["unlock", "--policy", "pattern"], "Error: Missing '--user <user>'."),
        (["sensor"], "Error: Missing the event: keyway sensor EVENT ... [--wait SECONDS]."),
        (["sensor", "present", "alice"], "Error: unknown command 'present' with 1 arguments"),
        (["sensor", "plug", "--wait", "abc"], "Error: '--wait abc': give a number from 0 to 600."),
        (["sensor", "plug", "--wait", "-1"], "Error: '--wait -1': give a number from 0 to 600."),
        (["sensor", "plug", "--wait", "nan"], "Error: '--wait nan': give a number from 0 to 600."),
        (["sensor", "plug", "--wait", "601"], "Error: '--wait 601': give a number from 0 to 600."),
        (["sensor", "roc", "--svg"], "Error: Missing value for '--svg <svg>'."),
        (["sensor", "roc", "--wait", "1"], "Error: 'keyway sensor roc' takes no option '--wait'."),
        (["policy"], "Error: Missing the policy command: check, edit, list or show."),
        (["policy", "shwo", "pattern"], "Error: Unknown policy command 'shwo'. Did you mean 'show'?"),
        (["policy", "show"], "Error: Missing the name: keyway policy show NAME"),
        (["policy", "check", "extra"], "Error: Unexpected argument 'extra' for 'keyway policy check'."),
        (["policy", "edit", "extra"], "Error: Unexpected argument 'extra' for 'keyway policy edit'."),
        (["pass", "issue"], "Error: Missing '--user <user>'."),
        (["pass", "issue", "--user", "root", "--uses", "11"], "Error: '--uses 11': give a whole number from 1 to 10."),
        (["pass", "issue", "--user", "root", "--for", "2y"], "Error: '2y' is not valid for --for"),
        (
            ["pass", "issue", "--user", "root", "--in-place-of", "gesture"],
            "Error: A pass cannot be typed at the gesture's prompt"
        ),
        (["pass", "revoke"], "Error: Missing '--user <user>'."),
        (["policy", "list", "--remote"], "Error: 'keyway policy list' takes no option '--remote'."),
        (["audit", "--user"], "Error: Missing value for '--user <user>'."),
        // Numbers are checked where they are parsed: none falls back silently, none crashes.
        (["calibrate", "--target-ms", "10"], "Error: '--target-ms 10': give a whole number from 50 to 5000."),
        (["calibrate", "--target-ms", "abc"], "Error: '--target-ms abc': give a whole number from 50 to 5000."),
        (["calibrate", "--target-ms=5001"], "Error: '--target-ms 5001': give a whole number from 50 to 5000."),
        (["calibrate", "extra"], "Error: Unexpected argument 'extra' for 'keyway calibrate'."),
        (["calibrate", "--write=yes"], "Error: The flag '--write' takes no value."),
        (["calibrate", "--rounds", "3"], "Error: 'keyway calibrate' takes no option '--rounds'."),
        (["bench", "--rounds", "0"], "Error: '--rounds 0': give a whole number from 1 to 100000."),
        (["bench", "--rounds", "abc"], "Error: '--rounds abc': give a whole number from 1 to 100000."),
        (["bench", "--rounds=2.5"], "Error: '--rounds 2.5': give a whole number from 1 to 100000."),
        (["bench", "--rounds", "100001"], "Error: '--rounds 100001': give a whole number from 1 to 100000."),
        (["doctor", "--pam-dir"], "Error: Missing value for '--pam-dir <pam-dir>'."),
        (["doctor", "sudo"], "Error: Unexpected argument 'sudo' for 'keyway doctor'."),
        (["completion"], "Error: Missing the shell: bash."),
        (["completion", "zsh"], "Error: Unknown shell 'zsh'; use bash."),
        (["help", "enrol"], "Error: Unknown command 'enrol'. Did you mean 'enroll'?"),
        (["--socket", "/x", "--store", "/y", "status"], "Error: Give --socket or --store, not both."),
        (
            ["store", "migrate"],
            "Error: Missing the uri: keyway store migrate URI [--grant ROLE] [--grant-writer ROLE]."
        ),
        (
            ["store", "migrate", "/var/lib/keyway/keyway.db"],
            "Error: '/var/lib/keyway/keyway.db' is not a postgresql:// URI"
        ),
        (
            ["store", "copy", "/var/lib/keyway/keyway.db"],
            "Error: Missing the target: keyway store copy SOURCE TARGET."
        ),
        (["store", "move"], "Error: Unknown store command 'move'."),
    ]

    @Test("usage errors say what is wrong, suggest the near miss, and exit 64", arguments: usageCases)
    func usageErrors(arguments: [String], message: String) throws {
        let result = try run(cliPath, arguments)
        #expect(result.status == 64, "\(result.text)")
        #expect(result.output.first?.hasPrefix(message) == true, "\(result.text)")
        #expect(result.output.contains { $0.hasPrefix("See 'keyway") && $0.hasSuffix("--help'.") }, "\(result.text)")
    }

    @Test("every command is in the table of usage errors, and every command's --help shows its synopsis")
    func everyCommandCovered() throws {
        let synopses = try run(cliPath, ["help", "--synopsis"])
        #expect(synopses.status == 0)
        #expect(synopses.output.count >= 14, "\(synopses.text)")
        let firstWords = synopses.output.map { $0.split(separator: " ")[1] }
        for synopsis in synopses.output {
            // The command's words: the first, and the second where several commands share the first (policy show).
            let words = synopsis.split(separator: " ").dropFirst().map(String.init)
            let shared = firstWords.filter { $0 == words[0] }.count > 1
            let path = shared && words[1] == words[1].lowercased() ? Array(words.prefix(2)) : [words[0]]
            #expect(
                Self.usageCases.contains { Array($0.0.prefix(path.count)) == Array(path) },
                "no usage error is tested for \(synopsis)")
            let help = try run(cliPath, Array(path) + ["--help"])
            #expect(help.status == 0, "\(help.text)")
            #expect(help.output.first == "usage: \(synopsis)", "\(help.text)")
        }
    }

    @Test("every `keyway COMMAND` the README, docs/ and pam/examples/ mention is a command keyway has")
    func documentedCommandsExist() throws {
        let synopses = try run(cliPath, ["help", "--synopsis"]).output.map { $0.split(separator: " ").map(String.init) }
        let commands = Set(synopses.map { $0[1] })
        // A first word with commands under it (policy check, store copy): the second must be one of them.
        var below: [String: Set<String>] = [:]
        for words in synopses where words.count > 2 && synopses.filter({ $0[1] == words[1] }).count > 1 {
            below[words[1], default: []].insert(words[2])
        }
        var files = ["README.md"]
        // docs/ holds images too (a screenshot): only its text is read.
        files += try FileManager.default.contentsOfDirectory(atPath: packageRoot + "/docs")
            .filter { !$0.hasSuffix(".png") }.map { "docs/" + $0 }
        files += try FileManager.default.contentsOfDirectory(atPath: packageRoot + "/pam/examples").map {
            "pam/examples/" + $0
        }
        // In code: after a backtick, or at the start of a line (a shell example, a comment in an example stack).
        let mention = try Regex("(`|^[ \t#]*(?:\\$ |sudo )?)keyway ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")
            .anchorsMatchLineEndings()
        var checked = 0
        for file in files where !file.hasSuffix(".svg") {
            let text = try String(contentsOfFile: packageRoot + "/" + file, encoding: .utf8)
            for match in text.matches(of: mention) {
                let first = match.output[2].substring.map(String.init) ?? ""
                let second = match.output[3].substring.map(String.init)
                checked += 1
                #expect(commands.contains(first), "\(file): `\(match.output[0].substring ?? "")` is no keyway command")
                if let allowed = below[first], let second, !allowed.contains(where: { $0.uppercased() == $0 }) {
                    #expect(allowed.contains(second), "\(file): `keyway \(first) \(second)` is no keyway command")
                }
            }
        }
        #expect(checked > 50, "only \(checked) mentions found")
    }

    @Test("refusals that are not usage errors: no such account 67, --store as another user 77, sensor as another user")
    func refusals() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        let store = ["--store", fixture.store]
        for name in ["nosuchuser", "KWALICE", "Root"] {
            let result = try run(
                cliPath, store + ["enroll", "gesture", "--user", name, "--stdin"], input: "2-5-8-9-6\n")
            #expect(result.status == 67, "\(result.text)")
            #expect(result.text.contains("'\(name)' is not an account of this system"), "\(result.text)")
        }
        let asNobody = ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", cliPath]
        let status = try run(asNobody[0], Array(asNobody.dropFirst()) + store + ["status"])
        #expect(status.status == 77, "\(status.text)")
        #expect(status.text.contains("--store works on the store file directly, which only root may do"))
        let directory = fixture.directory + "/sensor"
        #expect(mkdir(directory, 0o700) == 0)
        let sensor = try run(asNobody[0], Array(asNobody.dropFirst()) + ["--sensor", directory, "sensor", "stranger"])
        #expect(sensor.status == 3, "\(sensor.text)")
        #expect(sensor.text.contains("only root may drive the simulated sensor"), "\(sensor.text)")
    }

    @Test(
        "outcomes map to exit statuses: 0 success, 1 failed, 2 locked, 3 not enrolled, 65/66 config, 74 store, 78 policy"
    )
    func exitStatuses() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        let store = ["--store", fixture.store]
        func unlock(_ user: String, _ typed: String) throws -> Run {
            try run(cliPath, store + ["unlock", "--user", user, "--policy", "pattern", "--stdin"], input: typed)
        }
        #expect(try unlock("alice", "2-4-9-3\n").status == 0)
        #expect(try unlock("alice", "3-4-9-2\n6-1-8-3\n4-3-8-1-6\n").status == 1)
        _ = try unlock("alice", "7-5-3-6\n9-5-1-4\n8-4-2-6\n")
        let locked = try unlock("alice", "2-4-9-3\n")
        #expect(locked.status == 2, "\(locked.text)")
        #expect(locked.text.contains("gesture is locked until 20"), "\(locked.text)")
        #expect(try unlock("bob", "2-4-9-3\n").status == 3)
        let unknown = try run(cliPath, store + ["unlock", "--user", "alice", "--policy", "no-such", "--stdin"])
        #expect(unknown.status == 78, "\(unknown.text)")
        #expect(unknown.text.contains("unknown policy 'no-such'"), "\(unknown.text)")
        let missing = try run(cliPath, store + ["--config", fixture.directory + "/absent.conf", "status"])
        #expect(missing.status == 66, "\(missing.text)")
        #expect(missing.text.contains("absent.conf: error: the file does not exist"), "\(missing.text)")
        fixture.writeConfig("[gesture]\nmin-dots = 12\n")
        let broken = try run(cliPath, store + ["--config", fixture.configPath, "status"])
        #expect(broken.status == 65, "\(broken.text)")
        #expect(broken.text.contains("keyway.conf:2:12: error: min-dots = 12 is out of range"), "\(broken.text)")
        chmod(fixture.store, 0o644)
        let unsafe = try run(cliPath, store + ["status"])
        #expect(unsafe.status == 74, "\(unsafe.text)")
        #expect(unsafe.text.contains("keyway: Keyway store \(fixture.store): it is accessible to group or others"))
        chmod(fixture.store, 0o600)
        let reset = try run(cliPath, store + ["reset", "--user", "alice"])
        #expect(reset.status == 0, "\(reset.text)")
        #expect(try unlock("alice", "2-4-9-3\n").status == 0)
        let audit = try run(cliPath, store + ["audit", "--user", "alice"])
        #expect(audit.text.contains("reset alice all; by root via keyway reset"), "\(audit.text)")
    }

    @Test("enroll and change with --stdin, status shows the factors, remove takes them away")
    func lifecycle() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        let store = ["--store", fixture.store]
        #expect(
            try run(cliPath, store + ["enroll", "passcode", "--user", "daemon", "--stdin"], input: "739155\n").status
                == 0)
        let weak = try run(cliPath, store + ["enroll", "passcode", "--user", "bin", "--stdin"], input: "123456\n")
        #expect(weak.status == 1)
        #expect(weak.text.contains("That passcode is too easy to guess; choose another."))
        let change = try run(
            cliPath, store + ["change", "passcode", "--user", "daemon", "--stdin"], input: "739155\n482915\n")
        #expect(change.status == 0, "\(change.text)")
        let status = try run(cliPath, store + ["status", "--user", "daemon"])
        #expect(status.text.contains("passcode: enrolled"), "\(status.text)")
        #expect(try run(cliPath, store + ["remove", "passcode", "--user", "daemon"]).status == 0)
        let gone = try run(cliPath, store + ["remove", "passcode", "--user", "daemon"])
        #expect(gone.status == 3, "\(gone.text)")
    }
}

/// `keyway sensor roc`: the plot an administrator looks at when choosing `[biometric] false-match-rate`.
/// `keyway policy edit` in a terminal, as root would use it: an editor that leaves a typo, the errors shown, the
/// file left as it was; then the same edit done right, saved by a rename.
@Suite("keyway policy edit")
struct PolicyEditTests {
    @Test("a typo is refused with its place and the file kept; edit again, fixed, it is saved (0644, root's)")
    func typoThenFix() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        _ = fixture.writeConfig("[policy admin]\nrequire = gesture\n")
        let original = try Data(contentsOf: URL(fileURLWithPath: fixture.configPath))
        // The "editor": the first time it leaves a typo, the second time it writes the intended rule.
        let editor = fixture.directory + "/editor.sh"
        try """
        #!/bin/sh
        if [ -e "\(fixture.directory)/edited-once" ]; then
            sed -i 's/^require = .*/require = gesture and passcode/' "$1"
        else
            touch "\(fixture.directory)/edited-once"
            sed -i 's/^require = gesture$/require = gesture and pascode/' "$1"
        fi
        """.write(toFile: editor, atomically: true, encoding: .utf8)
        chmod(editor, 0o755)
        // Read by sh rather than executed: a child another test forks while the script is being written inherits the
        // descriptor until its exec, and executing a file open for writing fails (ETXTBSY, "Text file busy").
        let command = "EDITOR='/bin/sh \(editor)' \(cliPath) --config \(fixture.configPath) policy edit"
        do {
            let terminal = try Terminal(command)
            defer { terminal.close() }
            let screen = try terminal.waitFor("What now?")
            #expect(screen.contains("keyway.conf:2:23: error: unknown factor 'pascode'"), "\(screen)")
            #expect(screen.contains("did you mean 'passcode'?"), "\(screen)")
            try terminal.type("x")
            #expect(try terminal.waitFor("[exit ").contains("[exit 65]"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.configPath)) == original)
        }
        unlink(fixture.directory + "/edited-once")
        let terminal = try Terminal(command)
        defer { terminal.close() }
        try terminal.waitFor("What now?")
        try terminal.type("e")
        let screen = try terminal.waitFor("[exit ")
        #expect(screen.contains("is saved") && screen.contains("[exit 0]"), "\(screen)")
        let saved = try String(contentsOfFile: fixture.configPath, encoding: .utf8)
        #expect(saved == "[policy admin]\nrequire = gesture and passcode\n", "\(saved)")
        var info = stat()
        #expect(stat(fixture.configPath, &info) == 0 && info.st_mode & 0o7777 == 0o644 && info.st_uid == 0)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: fixture.directory).filter {
            $0.hasPrefix(".keyway.conf.edit")
        }
        #expect(leftovers.isEmpty, "\(leftovers)")
        let check = try run(cliPath, ["--config", fixture.configPath, "policy", "check"])
        #expect(check.status == 0, "\(check.text)")
    }
}

@Suite("keyway sensor roc")
struct SensorRocTests {
    @Test("the SVG has the curve and the configured operating point, which follows keyway.conf")
    func plot() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        let svgPath = fixture.directory + "/roc.svg"
        _ = fixture.writeConfig("# nothing set: the defaults\n")
        let defaults = try run(cliPath, ["--config", fixture.configPath, "sensor", "roc", "--svg", svgPath])
        #expect(defaults.status == 0, "\(defaults.text)")
        #expect(defaults.text.contains("1/50,000                  2.0%  ← configured"), "\(defaults.text)")
        let svg = try String(contentsOfFile: svgPath, encoding: .utf8)
        #expect(svg.hasPrefix("<svg") && svg.contains("xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(svg.contains("id=\"curve\""), "no curve")
        #expect(svg.contains("id=\"operating-point\""), "no operating point")
        #expect(svg.contains("configured: FMR 1/50,000, FNMR 2.0%"))

        _ = fixture.writeConfig("[biometric]\nfalse-match-rate = 1/1000\n")
        let loose = try run(cliPath, ["--config", fixture.configPath, "sensor", "roc", "--svg", svgPath])
        #expect(loose.status == 0, "\(loose.text)")
        let moved = try String(contentsOfFile: svgPath, encoding: .utf8)
        #expect(moved.contains("configured: FMR 1/1,000, FNMR"), "\(moved.prefix(400))")
        #expect(!moved.contains("FMR 1/50,000"))

        let unwritable = try run(cliPath, ["sensor", "roc", "--svg", fixture.directory + "/no/such/dir/roc.svg"])
        #expect(unwritable.status == 73, "\(unwritable.text)")
        #expect(unwritable.text.contains("cannot write \(fixture.directory)/no/such/dir/roc.svg: No such file"))
    }
}

/// `keyway completion bash`, sourced into a real bash and asked as the shell asks on Tab.
@Suite("keyway bash completion")
struct CompletionTests {
    @Test(
        "Tab offers the commands, their factors, events and options, and accounts for --user",
        arguments: [
            ("keyway en", ["enable", "enroll"]),
            ("keyway set ", (Factors.all.map { "\($0.kind).enabled" } + ["show-trail"]).sorted()),
            ("keyway set show-trail ", ["off", "on"]),
            ("keyway enroll ", Factors.all.map { $0.kind.rawValue }.sorted()),
            ("keyway change ", ["gesture", "passcode"]),
            ("keyway enroll gesture --u", ["--user"]),
            ("keyway enroll gesture --user ro", ["root"]),
            ("keyway --store /tmp/k.db enroll g", ["gesture"]),
            ("keyway policy s", ["show"]),
            ("keyway policies --", ["--config", "--help", "--passfile", "--sensor", "--socket", "--store"]),
            ("keyway sensor p", ["plug", "present"]),
            ("keyway bench --r", ["--rounds"]),
            ("keyway reset --user root --factor pa", ["passcode"]),
            ("keyway completion ", ["bash"]),
        ])
    func complete(line: String, expected: [String]) throws {
        let script = try run(cliPath, ["completion", "bash"])
        #expect(script.status == 0)
        let file = NSTemporaryDirectory() + "keyway-completion-\(UUID().uuidString).bash"
        try script.text.write(toFile: file, atomically: true, encoding: .utf8)
        defer { unlink(file) }
        var words = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        if words.last == nil { words.append("") }
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        let probe = """
            source \(file)
            COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1)
            _keyway
            printf '%s\\n' "${COMPREPLY[@]}" | sort
            """
        let result = try run("/bin/bash", ["-c", probe])
        #expect(result.status == 0, "\(result.text)")
        #expect(result.output.filter { !$0.isEmpty } == expected, "\(line): \(result.text)")
    }
}

/// keyway(8) lists every command with the synopsis its type gives (`keyway help --synopsis`).
@Suite("keyway(8) against the commands")
struct ManualTests {
    @Test("each command's synopsis is a heading of keyway(8)'s COMMANDS, and nothing else is")
    func synopses() throws {
        let manual = try String(contentsOfFile: packageRoot + "/man/keyway.8", encoding: .utf8)
        let lines = manual.components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: ".SH COMMANDS"))
        let end = try #require(lines.firstIndex(of: ".SH OPTIONS"))
        // Each .TP's heading, as plain text: fonts dropped, \- as -.
        var headings: [String] = []
        for index in start..<end where lines[index] == ".TP" {
            var heading = lines[index + 1]
            for font in ["\\fB", "\\fR", "\\fI", "\\fP"] { heading = heading.replacingOccurrences(of: font, with: "") }
            headings.append("keyway " + heading.replacingOccurrences(of: "\\-", with: "-"))
        }
        let synopses = try run(cliPath, ["help", "--synopsis"]).output
        #expect(headings == synopses)
    }
}
