import CX11Cairo
import Glibc
import KeywayPlatform

// keyway-lock: the X11 lock screen (keyway-lock(1), docs/LOCK.md). One program in three roles: with no role option
// it is the locking process, which starts itself again with --draw and --authenticate for the other two.

/// The command line: the options, and which of the three processes this is.
enum Command {
    static let usage = """
        usage: keyway-lock [-c|--color RRGGBB] [-i|--image FILE.png] [-t|--tiling] [--service NAME]
                           [--pam-directory DIR] [--socket PATH]
        Locks the X display until the person who locked it authenticates through PAM (the keyway-lock service).
        """

    enum Role { case lock, draw(Window), authenticate }

    static func parse(_ given: [String]) -> (Role, Locker.Options) {
        var arguments = given[...]
        var options = Locker.Options()
        var role = Role.lock
        func value(after option: String) -> String {
            guard let next = arguments.popFirst() else { refuse("\(option) needs a value") }
            return next
        }
        while let option = arguments.popFirst() {
            switch option {
            case "--service": options.service = value(after: option)
            case "--pam-directory": options.pamDirectory = value(after: option)
            case "--socket": options.socket = value(after: option)
            case "-c", "--color":
                let given = value(after: option)
                guard let colour = Looks.colour(given) else {
                    refuse("\(option) \(given): give six hexadecimal digits, RRGGBB (as i3lock takes them)")
                }
                options.looks.background = colour
            case "-i", "--image":
                let path = value(after: option)
                if let problem = Looks.imageProblem(path) { refuse("\(option) \(path): \(problem)") }
                options.looks.image = path
            case "-t", "--tiling": options.looks.tiling = true
            case "--authenticate": role = .authenticate
            case "--draw":
                guard let window = Window(value(after: option)) else { refuse("--draw needs a window number") }
                role = .draw(window)
            case "--help", "-h":
                print(usage)
                exit(0)
            default: refuse("unknown option \(option)")
            }
        }
        return (role, options)
    }

    static func refuse(_ why: String) -> Never {
        complain(why + "\n" + usage)
        exit(ExitStatus.usage)
    }
}

// Signals blocked by whoever started this process (a test runner's thread, a session manager) are unblocked: a lock
// screen that cannot be stopped by SIGTERM, or whose drawing process cannot be, is not what anyone asked for.
var unblocked = sigset_t()
sigemptyset(&unblocked)
sigprocmask(SIG_SETMASK, &unblocked, nil)

// The drawing and authentication processes are started as /proc/self/exe, which the kernel would name "exe": named
// as the program, for ps, pgrep and the log.
if let comm = fopen("/proc/self/comm", "w") {
    fputs("keyway-lock", comm)
    fclose(comm)
}

let (role, options) = Command.parse(Array(CommandLine.arguments.dropFirst()))
switch role {
case .authenticate: Authentication.run(service: options.service, directory: options.pamDirectory)
case .draw(let window): Painter.run(window: window, socket: options.socket, looks: options.looks)
case .lock: Locker.run(options)
}
