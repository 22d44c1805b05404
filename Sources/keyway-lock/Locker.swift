import CX11Cairo
import Glibc
import KeywayPlatform

/// The locking process: the one that holds the lock, and does nothing else (docs/LOCK.md). It grabs the keyboard and
/// the pointer before anything is shown, maps a window over the whole screen that the window manager does not manage,
/// keeps it above every other window and as large as the screen, refreshes the grabs every second, and passes the
/// person's input to the drawing process and the conversation between the drawing and the authentication processes.
/// Either of those may die (a crash, SIGKILL): it is started again and the screen stays locked. The lock ends, and this
/// process exits 0, only when the authentication process exits 0, which it does only after PAM_SUCCESS.
final class Locker {
    struct Options {
        var service = "keyway-lock"
        var pamDirectory: String?
        var socket: String?
        var looks = Looks()
    }

    private let display: OpaquePointer
    private let root: Window
    private var window: Window = 0
    private let options: Options
    private var drawer: Child?
    private var authenticator: Child?
    /// What a drawing process started later must be told: the prompt waiting for an answer, and the messages since.
    private var pendingPrompt: Line?
    private var recent: [Line] = []
    /// When each role may be started again, so a role that dies at once is not restarted in a tight loop.
    private var restarts: [String: [Int64]] = [:]
    private var lastRefresh: Int64 = 0
    /// Caps Lock as last told to the drawing process.
    private var capsLock: Bool?
    /// The drawing process's last count of failed attempts, for one started after it (`failed N`).
    private var failed: Line?

    private init(display: OpaquePointer, options: Options) {
        self.display = display
        self.root = XDefaultRootWindow(display)
        self.options = options
    }

    /// Locks the screen until PAM says the person is who locked it. Returns only by exiting.
    static func run(_ options: Options) -> Never {
        BrokenPipe.ignoreSignal()
        guard let display = XOpenDisplay(nil) else {
            fail(
                "cannot open the X display \(String(cString: getenv("DISPLAY") ?? strdup("(DISPLAY is not set)")))",
                ExitStatus.unavailable)
        }
        // Xlib's default handler of a protocol error exits the process, which would unlock the screen: errors are
        // logged and lived with (a window raised as it was destroyed is not a reason to unlock).
        _ = XSetErrorHandler { _, event in
            if let event {
                let code = event.pointee.error_code
                let request = event.pointee.request_code
                complain("X error \(code) on request \(request) (ignored; the screen stays locked)")
            }
            return 0
        }
        let locker = Locker(display: display, options: options)
        if let refused = locker.grab(attempts: 40) {
            XCloseDisplay(display)
            fail(refused + "; the screen was not locked", ExitStatus.unavailable)
        }
        locker.cover()
        // xss-lock --transfer-sleep-lock hands over logind's sleep delay lock: closed once the lock is shown, so the
        // machine suspends with the screen already locked (and no child inherits it).
        if let given = getenv("XSS_SLEEP_LOCK_FD"), let descriptor = Int32(String(cString: given)), descriptor > 2 {
            close(descriptor)
        }
        locker.loop()
    }

    private static func fail(_ message: String, _ status: Int32) -> Never {
        complain("\(message)")
        exit(status)
    }

    /// Takes (or refreshes) the keyboard and pointer grabs on the root window: every key and pointer event comes to
    /// this client, whatever window is under the pointer. nil on success, else why not.
    private func grab(attempts: Int) -> String? {
        var keyboard: Int32 = 0
        var pointer: Int32 = 0
        for attempt in 0..<attempts {
            keyboard = XGrabKeyboard(display, root, 0, GrabModeAsync, GrabModeAsync, UInt(CurrentTime))
            let mask = UInt32(ButtonPressMask | ButtonReleaseMask | PointerMotionMask)
            pointer = XGrabPointer(display, root, 0, mask, GrabModeAsync, GrabModeAsync, 0, 0, UInt(CurrentTime))
            if keyboard == GrabSuccess && pointer == GrabSuccess { return nil }
            if attempt + 1 < attempts { usleep(50_000) }
        }
        func why(_ status: Int32) -> String {
            switch status {
            case AlreadyGrabbed: "another program holds it"
            case GrabFrozen: "another program froze it"
            case GrabNotViewable: "the root window is not viewable"
            case GrabInvalidTime: "the grab came too late"
            default: "X answered \(status)"
            }
        }
        if keyboard != GrabSuccess { return "could not grab the keyboard: \(why(keyboard))" }
        return "could not grab the pointer: \(why(pointer))"
    }

    private var screenSize: (UInt32, UInt32) {
        var attributes = XWindowAttributes()
        XGetWindowAttributes(display, root, &attributes)
        return (UInt32(max(1, attributes.width)), UInt32(max(1, attributes.height)))
    }

    /// The window over the whole screen, above every other; shown only once the grabs are held.
    private func cover() {
        let (width, height) = screenSize
        var attributes = XSetWindowAttributes()
        attributes.override_redirect = 1
        attributes.background_pixel = UInt(options.looks.background)
        attributes.event_mask = Int(ExposureMask | VisibilityChangeMask)
        window = XCreateWindow(
            display, root, 0, 0, width, height, 0, Int32(CopyFromParent), UInt32(InputOutput), nil,
            UInt(CWOverrideRedirect | CWBackPixel | CWEventMask), &attributes)
        XStoreName(display, window, "keyway-lock")
        // Other windows mapped, moved or raised (to put this one back on top), and the screen's size.
        XSelectInput(display, root, Int(SubstructureNotifyMask | StructureNotifyMask))
        XMapRaised(display, window)
        // Started by a screen saver's activation (xss-lock), the server's own saver window still hides the screen:
        // ended as a key press would end it, so the lock is what is seen.
        XResetScreenSaver(display)
        XSync(display, 0)
    }

    private func loop() -> Never {
        let connection = XConnectionNumber(display)
        while true {
            handleEvents()
            reap()
            startMissing()
            let now = MonotonicClock.milliseconds()
            if now - lastRefresh >= 1000 {
                lastRefresh = now
                if let failed = grab(attempts: 1) { complain("\(failed) (will try again)") }
                checkCapsLock()
                XRaiseWindow(display, window)
                XFlush(display)
            }
            var fds = [pollfd(fd: connection, events: Int16(POLLIN), revents: 0)]
            for child in [drawer, authenticator].compactMap({ $0 }) {
                fds.append(pollfd(fd: child.output.descriptor, events: Int16(POLLIN), revents: 0))
            }
            XFlush(display)
            _ = poll(&fds, nfds_t(fds.count), XPending(display) > 0 ? 0 : 200)
            if let drawer, fds.contains(where: { $0.fd == drawer.output.descriptor && $0.revents != 0 }) {
                for line in drawer.output.drain() {
                    if line.verb == .failed { failed = line }
                    guard line.verb == .answer else { continue }
                    if let authenticator { send(line, to: authenticator.input) }
                    pendingPrompt = nil
                    recent = []
                }
            }
            if let authenticator, fds.contains(where: { $0.fd == authenticator.output.descriptor && $0.revents != 0 }) {
                for line in authenticator.output.drain() { relay(line) }
            }
        }
    }

    /// A line from the authentication process, passed on to the drawing and remembered for a new drawing process.
    private func relay(_ line: Line) {
        switch line.verb {
        case .prompt:
            pendingPrompt = line
        case .woken, .result:
            pendingPrompt = nil
        default:
            recent = Array((recent + [line]).suffix(4))
        }
        if let drawer { send(line, to: drawer.input) }
    }

    private func handleEvents() {
        var event = XEvent()
        while XPending(display) > 0 {
            XNextEvent(display, &event)
            // Input another client made up (XSendEvent) is not the person's: only the server's own events count.
            let isInput = [ButtonPress, ButtonRelease, MotionNotify, KeyPress, KeyRelease].contains(event.type)
            if isInput && event.xany.send_event != 0 { continue }
            switch event.type {
            case ButtonPress where event.xbutton.button == 1:
                toDrawer(Line(.down, "\(event.xbutton.x_root) \(event.xbutton.y_root)"))
            case ButtonRelease where event.xbutton.button == 1:
                toDrawer(Line(.up, "\(event.xbutton.x_root) \(event.xbutton.y_root)"))
            case MotionNotify:
                toDrawer(Line(.move, "\(event.xmotion.x_root) \(event.xmotion.y_root)"))
            case KeyPress:
                key(&event.xkey)
                checkCapsLock()
            case KeyRelease:
                checkCapsLock()
            case MapNotify where event.xmap.window != window, VisibilityNotify:
                XRaiseWindow(display, window)
            case ConfigureNotify:
                if event.xconfigure.window == root {
                    XMoveResizeWindow(
                        display, window, 0, 0, UInt32(max(1, event.xconfigure.width)),
                        UInt32(max(1, event.xconfigure.height)))
                } else if event.xconfigure.window != window {
                    XRaiseWindow(display, window)
                }
            default:
                break
            }
        }
    }

    /// A key: Enter, Backspace and Escape by name, anything else as the characters the server's keymap makes of it.
    private func key(_ event: inout XKeyEvent) {
        var buffer = [CChar](repeating: 0, count: 32)
        var symbol: KeySym = 0
        let count = XLookupString(&event, &buffer, Int32(buffer.count - 1), &symbol, nil)
        switch Int32(symbol) {
        case XK_Return, XK_KP_Enter: toDrawer(Line(.key, "Return"))
        case XK_BackSpace: toDrawer(Line(.key, "BackSpace"))
        case XK_Escape: toDrawer(Line(.key, "Escape"))
        default:
            guard count > 0 else { return }
            let text = String(decoding: buffer[0..<Int(count)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) {
                toDrawer(Line(.text, text))
            }
        }
    }

    /// Tells the drawing process when Caps Lock goes on or off (the lock modifier in the server's state).
    private func checkCapsLock() {
        var rootReturn: Window = 0
        var childReturn: Window = 0
        var x: Int32 = 0
        var y: Int32 = 0
        var windowX: Int32 = 0
        var windowY: Int32 = 0
        var mask: UInt32 = 0
        guard
            XQueryPointer(display, root, &rootReturn, &childReturn, &x, &y, &windowX, &windowY, &mask) != 0
        else { return }
        let on = mask & UInt32(LockMask) != 0
        guard on != capsLock else { return }
        capsLock = on
        toDrawer(Line(.caps, on ? "on" : "off"))
    }

    private func toDrawer(_ line: Line) {
        if let drawer { send(line, to: drawer.input) }
    }

    /// Collects children that ended: the authentication process's exit 0 ends the lock; anything else is restarted.
    private func reap() {
        var status: Int32 = 0
        while true {
            let pid = waitpid(-1, &status, WNOHANG)
            guard pid > 0 else { return }
            if let drawer, pid == drawer.pid {
                drawer.closePipes()
                self.drawer = nil
                complain("the drawing process ended (\(describe(status))); starting it again")
            } else if let authenticator, pid == authenticator.pid {
                for line in authenticator.output.drain() { relay(line) }
                authenticator.closePipes()
                self.authenticator = nil
                if exited(status) == 0 { unlock() }
                toDrawer(Line(.restarted))
                pendingPrompt = nil
                if exited(status) != 1 {
                    complain("the authentication process ended (\(describe(status))); starting it again")
                }
            }
        }
    }

    private func exited(_ status: Int32) -> Int32? {
        status & 0x7F == 0 ? (status >> 8) & 0xFF : nil
    }

    private func describe(_ status: Int32) -> String {
        if let code = exited(status) { return "exit \(code)" }
        return "signal \(status & 0x7F)"
    }

    /// Starts the roles that are not running, at most five times in ten seconds each.
    private func startMissing() {
        if drawer == nil, mayStart("draw") {
            var arguments = ["--draw", "\(window)"] + options.looks.arguments
            if let socket = options.socket { arguments += ["--socket", socket] }
            drawer = Child.start(arguments)
            if let drawer {
                let state = (failed.map { [$0] } ?? []) + (capsLock.map { [Line(.caps, $0 ? "on" : "off")] } ?? [])
                for line in state + recent + (pendingPrompt.map { [$0] } ?? []) { send(line, to: drawer.input) }
            }
        }
        if authenticator == nil, mayStart("authenticate") {
            var arguments = ["--authenticate", "--service", options.service]
            if let directory = options.pamDirectory { arguments += ["--pam-directory", directory] }
            authenticator = Child.start(arguments)
        }
    }

    private func mayStart(_ role: String) -> Bool {
        let now = MonotonicClock.milliseconds()
        let lately = (restarts[role] ?? []).filter { now - $0 < 10_000 }
        guard lately.count < 5 else {
            restarts[role] = lately
            return false
        }
        restarts[role] = lately + [now]
        return true
    }

    /// PAM_SUCCESS: the drawing shows the right pattern for a moment, then the grabs and the window go.
    private func unlock() -> Never {
        toDrawer(Line(.right))
        let shown = MonotonicClock.milliseconds()
        var event = XEvent()
        while MonotonicClock.milliseconds() - shown < 300 {
            while XPending(display) > 0 { XNextEvent(display, &event) }
            usleep(20_000)
        }
        XUngrabKeyboard(display, UInt(CurrentTime))
        XUngrabPointer(display, UInt(CurrentTime))
        XDestroyWindow(display, window)
        XSync(display, 0)
        if let drawer {
            kill(drawer.pid, SIGTERM)
            var status: Int32 = 0
            var waited = 0
            while waitpid(drawer.pid, &status, WNOHANG) == 0 && waited < 50 {
                usleep(10_000)
                waited += 1
            }
            if waited == 50 {
                kill(drawer.pid, SIGKILL)
                waitpid(drawer.pid, &status, 0)
            }
        }
        XCloseDisplay(display)
        exit(0)
    }
}
