import KeywayBiometricSimulator
import KeywayCore
import KeywayFactors
import KeywayRuntime

/// Every `keyway` command, in the order `keyway --help` and keyway(8) list them.
extension Subcommand {
    static let all: [Subcommand] = [
        Subcommand(
            path: ["enroll"],
            summary: "enroll a factor for an account",
            operands: [factor],
            options: [
                .init(
                    name: "--user", placeholder: "USER", help: "the account (default: your own; root gives it)",
                    completion: .users),
                stdin, name, finger, simulateTouches,
                .init(
                    name: "--qr-file", placeholder: "FILE",
                    help: "write a TOTP's QR code to FILE as an SVG image (new, 0600) instead of the terminal",
                    completion: .files),
            ],
            details: "The account must exist on this system. "
                + Factors.all.map { "\($0.kind): \($0.enrollmentHelp)." }.joined(separator: " ")
                + " --name applies to a factor enrolled in named parts ("
                + Factors.all.compactMap { $0.part.map { part in "\(part)s" } }.joined(separator: ", ")
                + "). Creates the store if needed (--store).",
            run: { $0.enroll() }),
        Subcommand(
            path: ["change"], summary: "change a pattern or passcode (the current one first)",
            operands: [Operand(placeholder: "FACTOR", kind: .factor(only: Factors.all.changeable))],
            options: [user, stdin], required: ["--user"],
            details: "With --stdin: the current secret on the first line, the new one on the second.",
            run: { $0.change() }),
        Subcommand(
            path: ["remove"], summary: "remove a factor, or one named part of it (a finger)", operands: [factor],
            options: [user, name, finger],
            required: ["--user"], run: { $0.remove() }),
        Subcommand(
            path: ["enable"], summary: "turn a factor back on for an account (its enrollment was kept)",
            operands: [factor], options: [ownUser], run: { $0.enable() }),
        Subcommand(
            path: ["disable"],
            summary: "turn a factor off for an account without losing its enrollment (verify it first)",
            operands: [factor], options: [ownUser, stdin],
            details: """
                No policy uses a factor that is off: it is unavailable, as a sensor that is unplugged, and the \
                policy goes on to its fallback. Anyone but root is asked for the factor first (a pattern, the \
                passcode, a touch), as a phone's switch asks; keywayd refuses the change without it.
                """,
            run: { $0.disable() }),
        Subcommand(
            path: ["set"], summary: "set one of an account's switches (show-trail: the pattern's trail on the grid)",
            operands: [
                Operand(placeholder: "SWITCH", kind: .word, suggestions: switchNames),
                Operand(placeholder: "VALUE", kind: .choice(["on", "off"])),
            ],
            options: [ownUser],
            details:
                "SWITCH is one of: \(Factors.all.userSettings.map { "\($0.key) (\($0.help))" }.joined(separator: "; ")).",
            run: { $0.set() }),
        Subcommand(
            path: ["status"], summary: "enrollments, counters and lockouts",
            options: [
                optionalUser,
                .init(name: "--all", help: "every account that can log in, enrolled or not (root)"),
                .init(
                    name: "--policy", placeholder: "NAME",
                    help: "with --all: where each account stands with this policy (ready, unenrolled, refused)"),
                .init(name: "--group", placeholder: "GROUP", help: "with --all: only the members of this group"),
                .init(name: "--json", help: "with --all: one JSON object instead of lines"),
            ],
            details: """
                With --all (root): root and every account from login.defs' UID_MIN whose shell lets it log in, \
                then any other account in the store, each with the factors it has enrolled; with --policy, \
                whether the policy would let it in now (ready), let it in without a factor (unenrolled: nothing \
                enrolled, unenrolled = allow), or refuse it (refused, with what it needs), and the counts on the \
                last line. Only accounts NSS enumerates are listed.
                """,
            run: { $0.status() }),
        Subcommand(
            path: ["health"],
            summary: "ask keywayd how it is: exit 0 OK, 1 WARNING, 2 CRITICAL (for a monitoring system)",
            options: [
                .init(name: "--json", help: "one JSON object instead of lines"),
                .init(
                    name: "--pam-dir", placeholder: "DIR", help: "the PAM directory (default /etc/pam.d)",
                    completion: .files),
            ],
            details: """
                Checks keywayd answering, the store read and written, the configuration valid and the one keywayd \
                enforces, the readers configured, and a fleet's database with its synchronous standbys; then, read \
                here, the PAM stacks: a Keyway line whose failure fails the stack, naming a policy with errors (or \
                a configuration that does not load), fails every login through it, and is CRITICAL. The first \
                line is the monitoring plugins' (KEYWAY OK - ...); keywayd not answering is CRITICAL. Any user may \
                ask; keywayd computes at most one answer a second.
                """,
            run: { $0.health() }),
        Subcommand(
            path: ["metrics"],
            summary: "print keywayd's metrics in Prometheus's text format (as its textfile for node_exporter)",
            details: """
                The same text keywayd writes for node_exporter's textfile collector (keywayd --metrics). No \
                metric names an account. Any user may ask.
                """,
            run: { $0.metrics() }),
        Subcommand(
            path: ["reset"], summary: "clear failure counters and lockouts (as faillock --reset)",
            options: [
                user,
                .init(
                    name: "--factor", placeholder: "FACTOR", help: "only this factor's", completion: .words(factorNames)
                ),
            ],
            required: ["--user"], run: { $0.reset() }),
        Subcommand(
            path: ["pass", "issue"],
            summary: "give an account a temporary pass, typed in place of a factor (root; shown once)",
            options: [
                user,
                .init(
                    name: "--in-place-of", placeholder: "FACTOR",
                    help: "the factor whose prompt takes it (default totp)",
                    completion: .words(factorNames)),
                .init(name: "--for", placeholder: "DURATION", help: "how long it lasts, 1m to 30d (default 1h)"),
                .init(
                    name: "--uses", placeholder: "N", help: "how many logins it allows (1 to 10, default 1)",
                    range: 1...10),
            ],
            required: ["--user"],
            details: """
                For a person who lost the factor a policy asks (a phone): the pass is typed at that factor's prompt \
                instead. keywayd makes it (16 characters, 79 bits), keeps only its hash, spends each use once (also \
                across a fleet) and lets it lapse by the store's clock. One per account: a new one replaces the old. \
                Issuing and each use are in the audit trail.
                """,
            run: { $0.passIssue() }),
        Subcommand(
            path: ["pass", "revoke"], summary: "take an account's temporary pass back", options: [user],
            required: ["--user"], run: { $0.passRevoke() }),
        Subcommand(
            path: ["unlock"], summary: "evaluate a policy as the PAM module would, counting attempts",
            options: [
                user,
                .init(
                    name: "--policy", placeholder: "NAME",
                    help: "a built-in or configured policy (default biometrics-or-passcode)"), stdin,
            ],
            required: ["--user"], run: { $0.unlock() }),
        Subcommand(
            path: ["sensor"], summary: "drive the simulated sensor",
            operands: [Operand(placeholder: "EVENT", kind: .rest, suggestions: SensorControl.verbs)],
            options: [
                .init(
                    name: "--wait", placeholder: "SECONDS",
                    help: "wait up to this long for an authentication at the sensor",
                    range: 0...600, whole: false)
            ],
            details: """
                EVENT is one of: \(SensorControl.commandSummary). The event goes to the authentication waiting at \
                the sensor; unplug and plug also work when nobody waits.
                """,
            run: { $0.sensor() }),
        Subcommand(
            path: ["sensor", "roc"],
            summary: "the simulated sensor's false-match and false-non-match rates across thresholds",
            options: [
                .init(
                    name: "--svg", placeholder: "FILE", help: "also draw them as an SVG plot in FILE",
                    completion: .files)
            ],
            details: """
                The configured operating point ([biometric] false-match-rate in keyway.conf, or --config) is \
                marked: use it to choose that setting. The rates are the simulator's, exact by construction.
                """,
            run: { $0.sensorRoc() }),
        Subcommand(
            path: ["policy", "check"],
            summary: "check the configuration (exit 0 valid, 65 errors, 66 a named file missing)",
            run: { $0.policyCheck() }),
        Subcommand(
            path: ["policy", "edit"],
            summary: "edit keyway.conf as visudo edits sudoers: saved only when it checks clean (root)",
            details: """
                Copies the file (--config, or /etc/keyway/keyway.conf) beside itself, opens the copy in \
                $SUDO_EDITOR, $VISUAL, $EDITOR, editor or vi, and checks it with the drop-ins. Clean, it replaces \
                the file by a rename; with errors, they are shown and you edit again (e) or leave the file as it \
                was (x, exit 65).
                """,
            run: { $0.policyEdit() }),
        Subcommand(
            path: ["policy", "list"], aliases: [["policies"]],
            summary: "every policy, built-in and configured, and where it is defined", run: { $0.policyList() }),
        Subcommand(
            path: ["policy", "show"],
            summary: "the rule as a tree, the variant that applies, every setting with its origin",
            operands: [Operand(placeholder: "NAME", kind: .word)],
            options: [
                .init(
                    name: "--user", placeholder: "USER", help: "the user it applies to (their groups)",
                    completion: .users),
                .init(
                    name: "--group", placeholder: "GROUP", help: "a group the user is taken to be in",
                    completion: .groups),
                .init(name: "--remote", help: "a remote session"),
            ],
            run: { $0.policyShow() }),
        Subcommand(
            path: ["audit"], summary: "who enrolled, removed or reset what, and when", options: [optionalUser],
            run: { $0.audit() }),
        Subcommand(
            path: ["calibrate"],
            summary: "measure Argon2id here and propose hash-passes and hash-memory for a target time",
            options: [
                .init(
                    name: "--target-ms", placeholder: "N",
                    help: "milliseconds one verification should take (50 to 5000, default 250)", range: 50...5000),
                .init(
                    name: "--write",
                    help: "write the proposal to keyway.conf.d/50-calibrate.conf beside the configuration (root)"),
            ],
            details: """
                As cryptsetup benchmark does: times one Argon2id verification at one and two passes with 64, 128 \
                and 256 MiB (more while the largest still allows 3 passes, less while the smallest does not; never \
                more than a quarter of MemAvailable), derives the passes that make each take about N ms, times \
                that, and proposes the most memory at 3 passes or more (memory first). Prints the table and the [gesture] \
                and [passcode] lines; changes nothing without --write. --write (root) writes them atomically to \
                keyway.conf.d/50-calibrate.conf beside the configuration (--config FILE: FILE.d), checks that the \
                configuration still loads (otherwise puts back what was there), and reminds you to restart \
                keywayd. The cost applies to new enrollments and changes; stored hashes keep their own.
                """,
            run: { $0.calibrate() }),
        Subcommand(
            path: ["bench"],
            summary: "time Argon2id, the simulated sensor, the configuration and keywayd's round trip (--socket)",
            options: [
                .init(name: "--rounds", placeholder: "N", help: "benchmark rounds (default 20)", range: 1...100_000)
            ],
            run: { $0.bench() }),
        Subcommand(
            path: ["doctor"],
            summary: "check the PAM stacks that use Keyway for ways they could lock people out (root)",
            options: [
                .init(
                    name: "--pam-dir", placeholder: "DIR", help: "the PAM directory (default /etc/pam.d)",
                    completion: .files),
                .init(
                    name: "--sshd-config", placeholder: "FILE",
                    help: "sshd's configuration (default /etc/ssh/sshd_config, when it exists)", completion: .files),
                .init(
                    name: "--ssh-from", placeholder: "ADDRESS",
                    help: "the client address sshd's settings are asked for, per account (default 192.0.2.1)"),
            ],
            details: """
                Reads every service's auth and account stacks, following @include, include and substack, and \
                prints each stack that runs pam_keyway.so with its control and policy, then a warning with the \
                file:line, the reason and the fix for: a failure of Keyway that leaves no password to fall back \
                on (required or requisite alone, requisite above the password); a success=N that skips modules \
                other than the password; arguments the module refuses; a configuration that does not load, an \
                unknown policy, or one that can never succeed in some session; unenrolled=allow (a roll-out that \
                lets people in without Keyway); keywayd not answering, or its store failing. For the sshd stack it \
                reads sshd's configuration and its includes: sshd not using PAM or keyboard-interactive (Keyway \
                never asked), a login that can finish without keyboard-interactive, the password method running \
                the stack too, and the password still asked after the key; required after a key \
                (AuthenticationMethods publickey,keyboard-interactive) is the second factor, not a lock-out. Then \
                the roll-out: for each auth line whose failure fails its stack, the accounts that can log in \
                (status --all's) which it would refuse because they lack its policy's factors, and those \
                unenrolled = allow lets in without one; for the sshd stack, only the accounts sshd admits and \
                whose every login runs the stack, read per account with sshd -T -C (so AllowUsers, \
                PermitRootLogin and Match blocks count). Exit 0 when there is nothing to fix, 1 when there is a \
                warning, 77 when not root.
                """,
            run: { $0.doctor() }),
        Subcommand(
            path: ["store", "migrate"],
            summary: "create or upgrade a PostgreSQL store's schema, as the database's owner (root)",
            operands: [Operand(placeholder: "URI", kind: .word)],
            options: [
                .init(
                    name: "--grant", placeholder: "ROLE",
                    help: "let a host's keywayd role do what a host needs, through the schema's functions, and "
                        + "read or change no table; a comma-separated list grants each host's role"),
                .init(
                    name: "--grant-writer", placeholder: "ROLE",
                    help: "as --grant, and the tables' rows too: self-service changes on that host, or an "
                        + "administrator's role; a comma-separated list"),
            ],
            details: """
                URI is a libpq URI naming the database as a role that may change its schema (its owner), e.g. \
                postgresql://keyway_owner@db.example/keyway. Applies the missing versions in one transaction; \
                refuses a schema newer than this Keyway's, changing nothing. keywayd refuses to use a database \
                whose schema is not its own version. A role granted with --grant reads enrollments (a TOTP's \
                secret withheld: the database checks the codes), counts and settles attempts, and spends \
                single-use secrets; it cannot enroll, reset, or change the audit trail. Granting again brings a \
                role to exactly what the option gives.
                """,
            run: { $0.storeMigrate() }),
        Subcommand(
            path: ["store", "copy"],
            summary: "copy every enrollment, counter, switch and audit row from one store into an empty one (root)",
            operands: [Operand(placeholder: "SOURCE", kind: .word), Operand(placeholder: "TARGET", kind: .word)],
            details: """
                SOURCE and TARGET are each an SQLite file's path or a postgresql:// URI: moving a host's store \
                into the fleet's database is `keyway store copy /var/lib/keyway/keyway.db postgresql://…`. TARGET \
                must be empty (a database migrated first); the copy is one transaction, then read back and \
                compared with SOURCE. Stop keywayd first, or SOURCE may change meanwhile.
                """,
            run: { $0.storeCopy() }),
        Subcommand(
            path: ["completion"], summary: "print the bash completion script",
            operands: [Operand(placeholder: "SHELL", kind: .choice(["bash"]))], run: { $0.completion() }),
        Subcommand(
            path: ["help"], summary: "a command's help; --synopsis prints every command's synopsis",
            operands: [Operand(placeholder: "COMMAND", kind: .rest, optional: true)],
            options: [
                .init(name: "--synopsis", help: "every command's synopsis, one per line (as keyway(8) lists them)")
            ],
            run: { $0.help() }),
    ]

    static let factor = Operand(placeholder: "FACTOR", kind: .factor(only: nil))
    static let user = CommandLineParser.Option(
        name: "--user", placeholder: "USER", help: "the account", completion: .users)
    static let optionalUser = CommandLineParser.Option(
        name: "--user", placeholder: "USER", help: "only this account", completion: .users)
    static let ownUser = CommandLineParser.Option(
        name: "--user", placeholder: "USER", help: "the account (default: your own)", completion: .users)
    static var switchNames: [String] {
        Factors.all.userSettings.map { setting in
            Factors.all.userSetting(named: setting.name) == nil ? setting.key : setting.name
        }
    }
    static let stdin = CommandLineParser.Option(
        name: "--stdin", help: "read secrets from standard input, one per line, instead of the terminal")
    static let name = CommandLineParser.Option(
        name: "--name", placeholder: "NAME", help: "the named part: a finger (biometric; default right-index)")
    static let finger = CommandLineParser.Option(
        name: "--finger", placeholder: "NAME", help: "the same as --name, for the biometric's finger")
    static let simulateTouches = CommandLineParser.Option(
        name: "--simulate-touches",
        help: "present genuine touches in-process instead of waiting at the device (the simulated sensor)")
    static var factorNames: [String] { Factors.all.map(\.kind.rawValue) }
}
