import Foundation
import KeywayCore
import KeywayGestureDrawing
import Testing

@testable import KeywayProcessFixture

/// keyway-lock on a real X server (Xvfb), driven as a person would with xdotool (a mouse drag through the dots, keys),
/// run as a throwaway user through the real libpam and keywayd; what the screen shows is read from screenshots
/// (ImageMagick's `import`, kept in build/artifacts/lock-screen) and from the lock window's `_KEYWAY_LOCK_SCREEN`
/// property (what it says, in words). Another X client (build/x-probe) tries to take the keyboard and to raise a
/// window above the lock. docs/LOCK.md.
@Suite("keyway-lock on a real X server", .serialized)
struct LockScreenTests {
    let fixture = PAMFixture()
    let user = "kwlock\(getpid() % 100_000)"
    static let lockPath = packageRoot + "/build/keyway-lock"
    static let probePath = packageRoot + "/build/x-probe"
    static let artifacts = packageRoot + "/build/artifacts/lock-screen"

    /// The colours keyway-lock draws with (Sources/keyway-lock/Painter.swift, `Colour`).
    enum Colour: UInt32 {
        case background = 0x10_1418
        case trail = 0x3D_8BFD
        case wrong = 0xE5_484D
        case right = 0x30_A46C
        case text = 0xEE_EEEE
        case errorText = 0xFF_9A9A
    }

    /// A user with the pattern 2-4-9-6 and the passcode 739155, a `keyway-lock` PAM service with `policy`, keywayd.
    func install(_ policy: String) throws -> XServer {
        try requireIsolation()
        #expect(try TestAccounts.add(user))
        try fixture.enrollPattern(user, "2-4-9-6")
        try fixture.enrollPasscode(user, "739155")
        chmod(fixture.directory, 0o755)
        let config = fixture.writeConfig("[policy lock]\nrequire = \(policy)\n")
        fixture.service("keyway-lock", "policy=lock \(config)")
        try FileManager.default.createDirectory(atPath: Self.artifacts, withIntermediateDirectories: true)
        return try XServer()
    }

    /// Installs `policy` (`install`), runs `body` with the X server, and removes everything afterwards, even when
    /// it throws.
    func withServer(_ policy: String, _ body: (XServer) throws -> Void) throws {
        var server: XServer?
        defer { uninstall(server) }
        server = try install(policy)
        if let server { try body(server) }
    }

    /// `withServer`, with keyway-lock started after `prepare`, and ended after `body` if it still runs.
    func withLock(
        _ policy: String, prepare: (XServer) throws -> Void = { _ in }, _ body: (XServer, Process) throws -> Void
    ) throws {
        try withServer(policy) { server in
            try prepare(server)
            let locker = try lock(server)
            defer { if locker.isRunning { locker.terminate() } }
            try body(server, locker)
        }
    }

    func uninstall(_ server: XServer?) {
        server?.stop()
        TestAccounts.remove(user)
        fixture.remove()
    }

    /// keyway-lock started as the user on `server`'s display; its standard error goes to a file of the fixture.
    func lock(_ server: XServer, _ options: [String] = []) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments =
            [
                "--reuid", user, "--regid", user, "--init-groups", "--", Self.lockPath, "--pam-directory",
                fixture.services, "--socket", fixture.socket,
            ] + options
        process.environment = ["DISPLAY": server.display, "PATH": "/usr/bin:/bin"]
        let log = fixture.directory + "/keyway-lock.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: log)
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        return process
    }

    var lockLog: String { (try? String(contentsOfFile: fixture.directory + "/keyway-lock.log", encoding: .utf8)) ?? "" }

    /// Waits until the lock says `text` (its `_KEYWAY_LOCK_SCREEN` property), and returns what it says. On the
    /// deadline it says what it read last and every different thing it read before, in order.
    @discardableResult
    func waitForScreen(_ server: XServer, saying text: String, seconds: Double = 30) throws -> String {
        let deadline = Date().addingTimeInterval(seconds)
        var seen: [String] = []
        repeat {
            let said = server.lockScreenText()
            if said.contains(text) { return said }
            if seen.last != said { seen.append(said) }
            usleep(50_000)
        } while Date() < deadline
        throw TerminalError(
            text: "the lock never said \"\(text)\" in \(Int(seconds)) s; it says:\n\(seen.last ?? "")\n"
                + "before that it said, in order:\n\(seen.dropLast().joined(separator: "\n--\n"))\n"
                + "its log:\n\(lockLog)\n\(server.describe())")
    }

    func exited(_ process: Process, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        return !process.isRunning
    }

    /// The locker has exited 0 within 30 s, and its window is gone.
    func expectUnlocked(_ locker: Process, _ server: XServer, _ when: String) throws {
        guard exited(locker, seconds: 30) else {
            Issue.record("still locked \(when); the lock says:\n\(server.lockScreenText())\nits log:\n\(lockLog)")
            return
        }
        #expect(locker.terminationStatus == 0, "\(when): \(lockLog)")
        let top = try run(Self.probePath, ["top"], environment: server.environment)
        #expect(!top.text.contains("keyway-lock"), "\(when): the lock window is still shown")
    }

    static let geometry = GridGeometry(width: 1024, height: 768, scale: 1)

    @Test("the right pattern drawn with the mouse unlocks (exit 0); a wrong one leaves it locked, red, and counted")
    func drawRightAndWrong() throws {
        try withLock("gesture") { server, locker in
            try waitForScreen(server, saying: "Draw your pattern")
            // A wrong pattern: still locked, the red state on the screen, one failure in `keyway status`.
            server.drag(through: [1, 2, 3, 6], geometry: Self.geometry, release: false)
            try waitForScreen(server, saying: "grid: drawing")
            let midway = try server.waitForScreenshot(Self.artifacts + "/drawing.png") {
                $0.count(.trail, near: Self.geometry.centre(of: 2)) > 50
            }
            let trail = midway.count(.trail, near: Self.geometry.centre(of: 2))
            #expect(
                trail > 50,
                "the trail is not drawn while drawing (\(trail) trail pixels at dot 2); the lock says:\n\(server.lockScreenText())"
            )
            server.release()
            try waitForScreen(server, saying: "wrong patterns shown: 1")
            let red = try server.waitForScreenshot(Self.artifacts + "/wrong.png") { $0.total(.wrong) > 500 }
            let shown = server.lockScreenText()
            #expect(
                red.total(.wrong) > 500,
                "no red on the screen after a wrong pattern (\(red.total(.wrong)) red pixels); the lock says:\n\(shown)"
            )
            #expect(locker.isRunning, "the lock ended after a wrong pattern: \(lockLog)")
            let status = try run(cliPath, ["status", "--user", user, "--socket", fixture.socket])
            #expect(
                status.text.contains("gesture: enrolled") && status.text.contains("1 consecutive failure"),
                "\(status.text)"
            )
            #expect(try fixture.vault().store.attempts(user: user)[.gesture].consecutiveFailures == 1)
            // The right one: green, and the locker exits 0.
            try waitForScreen(server, saying: "Draw your pattern")
            server.drag(through: [2, 4, 9, 6], geometry: Self.geometry)
            try expectUnlocked(locker, server, "after the right pattern")
            #expect(try fixture.vault().store.attempts(user: user)[.gesture].consecutiveFailures == 0)
        }
    }

    /// The point halfway between two dots: on the trail between them, inside no dot.
    static func between(_ a: UInt8, _ b: UInt8) -> GridGeometry.Point {
        let from = geometry.centre(of: a)
        let to = geometry.centre(of: b)
        return GridGeometry.Point(x: (from.x + to.x) / 2, y: (from.y + to.y) / 2)
    }

    @Test("the trail shows while drawing with show-trail on, and not with it off")
    func trailFollowsTheSwitch() throws {
        try withServer("gesture") { server in
            for showing in [true, false] {
                try fixture.vault().set("gesture.show-trail", to: showing, of: user, by: "test")
                let locker = try lock(server)
                defer {
                    locker.terminate()
                    locker.waitUntilExit()
                }
                try waitForScreen(server, saying: "Draw your pattern")
                server.drag(through: [1, 5, 9], geometry: Self.geometry, release: false)
                // Said once a frame with the press is drawn (Painter.draw says after drawing); with the trail on, the
                // screen is watched until the trail reaches the line between dots 1 and 5.
                try waitForScreen(server, saying: "grid: drawing")
                let name = showing ? "trail-shown.png" : "trail-hidden.png"
                let shot = try server.waitForScreenshot(Self.artifacts + "/" + name) {
                    !showing || $0.count(.trail, near: Self.between(1, 5)) > 50
                }
                server.release()
                let onTrail = shot.count(.trail, near: Self.between(1, 5))
                if showing {
                    #expect(onTrail > 50, "no trail between dots 1 and 5 with show-trail on (\(name))")
                } else {
                    #expect(shot.total(.trail) == 0, "something of the pattern shows with show-trail off (\(name))")
                }
            }
        }
    }

    @Test("five wrong patterns: the lockout said on screen, then the passcode field, which unlocks")
    func lockoutThenPasscode() throws {
        try withLock("gesture*5 or passcode") { server, locker in
            var said = ""
            // Five different wrong patterns (the same wrong one again is not counted again).
            let wrong: [[UInt8]] = [[1, 2, 3, 6], [1, 4, 7, 8], [3, 2, 1, 4], [7, 8, 9, 6], [4, 5, 6, 9]]
            for (attempt, pattern) in wrong.enumerated() {
                said = try waitForScreen(server, saying: "Draw your pattern")
                #expect(!said.contains("Passcode"), "the passcode was asked after \(attempt) wrong patterns:\n\(said)")
                server.drag(through: pattern, geometry: Self.geometry)
                // The red lasts 1.2 s, less than a look takes under load; the count of wrong patterns shown stays.
                try waitForScreen(server, saying: "wrong patterns shown: \(attempt + 1)")
            }
            said = try waitForScreen(server, saying: "Passcode")
            #expect(said.contains("Too many failed attempts; try again after "), "no lockout in words:\n\(said)")
            #expect(said.contains("(in 30 seconds)."), "the lockout does not say how long:\n\(said)")
            _ = try server.screenshot(Self.artifacts + "/passcode.png")
            server.enter("739155")
            try expectUnlocked(locker, server, "after the passcode")
        }
    }

    @Test("first of (biometric, gesture): a touch unlocks while the grid waits")
    func touchWhileTheGridWaits() throws {
        try withLock("first of (biometric, gesture)", prepare: { _ in try fixture.enrollFinger(user, "right-index") }) {
            server, locker in
            let said = try waitForScreen(server, saying: "draw your pattern")
            #expect(said.contains("Touch the sensor or draw your pattern"), "\(said)")
            _ = try server.screenshot(Self.artifacts + "/first-of.png")
            let touched = try run(
                cliPath, ["sensor", "present", user, "right-index", "--wait", "5", "--sensor", fixture.sensor])
            #expect(touched.status == 0, "\(touched.text)")
            try expectUnlocked(locker, server, "after the touch")
        }
    }

    @Test("a person's lock: name and clock; a wrong pattern, then a wrong password, each said where it was typed")
    func whoseAndWhat() throws {
        try withServer("gesture") { server in
            // The installed example's stack: the pattern, and the password after it (pam/examples/keyway-lock).
            let stack = """
                auth     [success=done default=ignore] \(modulePath) \(fixture.moduleArguments) policy=lock \
                config=\(fixture.configPath) next=password
                auth     required pam_unix.so
                account  required pam_permit.so

                """
            _ = FileManager.default.createFile(
                atPath: fixture.services + "/keyway-lock", contents: Data(stack.utf8))
            #expect(try run("/usr/sbin/usermod", ["-c", "Alice Liddell", user]).status == 0)
            #expect(try TestAccounts.setPassword(user, "Correct-horse-739"))
            let before = try run("/usr/bin/date", ["+%H:%M"]).text.trimmingCharacters(in: .whitespacesAndNewlines)
            let locker = try lock(server)
            defer { if locker.isRunning { locker.terminate() } }
            // Whose session, and the time.
            var said = try waitForScreen(server, saying: "Draw your pattern")
            let after = try run("/usr/bin/date", ["+%H:%M"]).text.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(said.contains("locked by: \(user) (Alice Liddell)"), "\(said)")
            #expect(said.contains("clock: \(before)") || said.contains("clock: \(after)"), "\(said)")
            #expect(said.contains("failed attempts: 0") && said.contains("caps lock: off"), "\(said)")
            let top = try server.screenshot(Self.artifacts + "/keyway-lock-name-clock.png")
            #expect(top.count(.text, in: 0..<130) > 200, "no clock or name drawn at the top")
            // A wrong pattern: said above the grid, and counted on screen.
            server.drag(through: [1, 2, 3, 6], geometry: Self.geometry)
            said = try waitForScreen(server, saying: "failed attempts: 1")
            said = try waitForScreen(server, saying: "Not recognized.")
            // Enter alone: the password. Its field says nothing of the pattern.
            try waitForScreen(server, saying: "Enter alone: use password")
            server.xdotool(["key", "Return"])
            said = try waitForScreen(server, saying: "Password (hidden field)")
            #expect(!said.contains("Not recognized"), "the pattern's verdict shows at the password:\n\(said)")
            // A wrong password: its own result, below the grid the next transaction shows, and counted.
            server.enter("wrong-horse")
            said = try waitForScreen(server, saying: "result: Password not accepted.")
            said = try waitForScreen(server, saying: "Draw your pattern")
            #expect(said.contains("failed attempts: 2"), "\(said)")
            #expect(!said.contains("Not recognized"), "the old verdict is still shown:\n\(said)")
            let wrong = try server.waitForScreenshot(Self.artifacts + "/keyway-lock-wrong-password.png") {
                $0.count(.errorText, in: 500..<700) > 100
            }
            #expect(wrong.count(.errorText, in: 500..<700) > 100, "the password's result is not drawn below the grid")
            // At the password again, the result is under its field; then Caps Lock, said before anything is typed.
            server.xdotool(["key", "Return"])
            said = try waitForScreen(server, saying: "Password (hidden field)")
            #expect(said.contains("result: Password not accepted."), "\(said)")
            let plain = try server.screenshot(Self.artifacts + "/password-again.png")
            #expect(plain.count(.errorText, in: 660..<768) == 0, "something is drawn in red at the bottom already")
            server.xdotool(["key", "Caps_Lock"])
            said = try waitForScreen(server, saying: "caps lock: on")
            let caps = try server.waitForScreenshot(Self.artifacts + "/keyway-lock-caps-lock.png") {
                $0.count(.errorText, in: 660..<768) > 40
            }
            #expect(caps.count(.errorText, in: 660..<768) > 40, "Caps Lock is not drawn at the bottom")
            server.xdotool(["key", "Caps_Lock"])
            try waitForScreen(server, saying: "caps lock: off")
            server.enter("Correct-horse-739")
            try expectUnlocked(locker, server, "after the password")
        }
    }

    @Test("--color and --image (tiled) as i3lock's; a bad colour or image refused before anything is locked")
    func looks() throws {
        try withServer("gesture") { server in
            for bad in [["--color", "red"], ["--image", "/nonexistent/x.png"], ["--image", "/etc/hostname"]] {
                let refused = try lock(server, bad)
                #expect(exited(refused, seconds: 15))
                #expect(refused.terminationStatus == 64, "\(bad): \(lockLog)")
                #expect(lockLog.contains("keyway-lock: \(bad[0]) \(bad[1]): "), "\(lockLog)")
                let top = try run(Self.probePath, ["top"], environment: server.environment)
                #expect(!top.text.contains("keyway-lock"), "\(bad): a lock window was shown")
            }
            let image = fixture.directory + "/tile.png"
            #expect(try run("/usr/bin/convert", ["-size", "64x64", "xc:#ff8800", image]).status == 0)
            chmod(image, 0o644)
            let locker = try lock(server, ["--color", "336699", "--image", image, "--tiling"])
            defer { if locker.isRunning { locker.terminate() } }
            try waitForScreen(server, saying: "Draw your pattern")
            let shot = try server.waitForScreenshot(Self.artifacts + "/looks.png") {
                $0.colour(x: 1000, y: 5) == 0xFF_8800
            }
            #expect(shot.colour(x: 1000, y: 5) == 0xFF_8800, "the image is not tiled over the screen")
            #expect(shot.colour(x: 30, y: 30) == 0xFF_8800)
            locker.terminate()
            locker.waitUntilExit()
            let plain = try lock(server, ["-c", "#336699"])
            defer { if plain.isRunning { plain.terminate() } }
            try waitForScreen(server, saying: "Draw your pattern")
            let coloured = try server.waitForScreenshot(Self.artifacts + "/colour.png") {
                $0.colour(x: 5, y: 5) == 0x33_6699
            }
            #expect(coloured.colour(x: 5, y: 5) == 0x33_6699, "the background is not the colour given")
        }
    }

    /// The pid of the locker's child in `role` (`--draw`, `--authenticate`), by its command line.
    func child(of locker: Process, _ role: String) -> pid_t? {
        let children = (try? run("/usr/bin/pgrep", ["-P", "\(locker.processIdentifier)"]))?.output ?? []
        // setpriv execs keyway-lock in place, so the locker is the process itself.
        for line in children {
            guard let pid = pid_t(line),
                let arguments = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline")
            else { continue }
            if String(decoding: arguments, as: UTF8.self).contains(role) { return pid }
        }
        return nil
    }

    @Test("SIGKILL of the drawing and the authentication processes: still locked, still held, and the pattern unlocks")
    func killedHelpersKeepTheLock() throws {
        try withLock("gesture") { server, locker in
            var said = try waitForScreen(server, saying: "Draw your pattern")
            for role in ["--draw", "--authenticate"] {
                let pid = try #require(child(of: locker, role), "no \(role) process under the locker")
                #expect(kill(pid, SIGKILL) == 0)
                waitUntil("\(role) started again", seen: { lockLog }) {
                    child(of: locker, role).map { $0 != pid } == true || !locker.isRunning
                }
                #expect(locker.isRunning, "the lock ended when \(role) was killed: \(lockLog)")
                let grab = try run(Self.probePath, ["grab"], environment: server.environment)
                #expect(grab.status == 1 && grab.text.contains("AlreadyGrabbed"), "\(role) killed: \(grab.text)")
                let raise = try run(Self.probePath, ["raise"], environment: server.environment)
                #expect(
                    raise.status == 1 && raise.text.contains("on top: keyway-lock"), "\(role) killed: \(raise.text)")
                if role == "--authenticate" {
                    // The new authentication process asks again: a drag before its prompt reached the drawing would
                    // answer nothing. The drawing process started after --draw was killed counts from 0: it was
                    // given the pending prompt first (1), in the same pipe, then this one (2). The killed drawing
                    // process's words stay on the window until the new one speaks, and never said 2.
                    said = try waitForScreen(server, saying: "prompts shown: 2")
                }
            }
            #expect(said.contains("Draw your pattern"), "\(said)")
            server.drag(through: [2, 4, 9, 6], geometry: Self.geometry)
            try expectUnlocked(locker, server, "after the right pattern")
        }
    }

    @Test("keys another X client sends (XSendEvent) are not the person's: the right pattern typed so does not unlock")
    func sentKeysDoNotUnlock() throws {
        try withLock("gesture") { server, locker in
            try waitForScreen(server, saying: "Draw your pattern")
            let window = try #require(server.xdotool(["search", "--name", "^keyway-lock$"])?.output.first)
            // xdotool's --window sends the keys with XSendEvent.
            server.xdotool(["type", "--window", window, "2496"])
            server.xdotool(["key", "--window", window, "Return"])
            // The server hands the lock its events in the order they came: once a key of the person's own (XTEST)
            // shows as a dot on a grid still asking, the sent keys before it were read, and submitted nothing.
            server.xdotool(["type", "1"])
            let drawing = try waitForScreen(server, saying: "grid: drawing")
            #expect(drawing.contains("Draw your pattern"), "the sent keys answered the prompt:\n\(drawing)")
            #expect(locker.isRunning, "keys another client sent unlocked the screen: \(lockLog)")
            #expect(try fixture.vault().store.attempts(user: user)[.gesture].consecutiveFailures == 0)
            server.xdotool(["key", "Escape"])
            try waitForScreen(server, saying: "grid: idle")
            // The person's own keys (XTEST: the server's events) type the dots: 2, 4, 9, 6, Enter unlocks.
            server.enter("2496")
            try expectUnlocked(locker, server, "after the pattern typed as dots")
        }
    }

    @Test("a keyboard another program holds: the lock is refused with a message and exit 69, nothing shown")
    func refusedWithoutTheGrab() throws {
        try withServer("gesture") { server in
            let holder = Process()
            holder.executableURL = URL(fileURLWithPath: Self.probePath)
            holder.arguments = ["hold", "30"]
            holder.environment = server.environment
            let output = Pipe()
            holder.standardOutput = output
            try holder.run()
            defer { if holder.isRunning { kill(holder.processIdentifier, SIGKILL) } }
            let held = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
            #expect(held.hasPrefix("held"), "\(held)")
            let locker = try lock(server)
            #expect(exited(locker, seconds: 15))
            #expect(locker.terminationStatus == 69, "\(lockLog)")
            #expect(
                lockLog.contains("could not grab the keyboard: another program holds it; the screen was not locked"),
                "\(lockLog)")
            let top = try run(Self.probePath, ["top"], environment: server.environment)
            #expect(!top.text.contains("keyway-lock"), "\(top.text)")
        }
    }

    /// A process started with `arguments`, `environment` and its output to `log`, with no signal blocked (the test
    /// runner's threads block them, and Foundation's Process passes the mask on: GLib programs then never learn that a
    /// child ended, nor answer in time); SIGKILLed by the caller.
    func start(_ executable: String, _ arguments: [String], _ environment: [String: String], log: String) throws
        -> Process
    {
        let unblocked =
            "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", unblocked, executable] + arguments
        process.environment = environment
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = FileHandle(forWritingAtPath: log)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        return process
    }

    /// keyway-lock's pid, when one runs under `parent`.
    func lockUnder(_ parent: pid_t) -> pid_t? {
        let children = (try? run("/usr/bin/pgrep", ["-P", "\(parent)", "-x", "keyway-lock"]))?.output ?? []
        return children.compactMap { pid_t($0) }.first
    }

    @Test("under xss-lock: the screen saver and the suspend lock start keyway-lock, which gives up the sleep lock")
    func underXssLock() throws {
        try withServer("gesture") { server in try underXssLock(server) }
    }

    func underXssLock(_ server: XServer) throws {
        var started: [Process] = []
        defer {
            for process in started.reversed() where process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
        // A private system bus and python3-dbusmock's logind, which xss-lock asks for the session and a sleep delay.
        let bus = fixture.directory + "/system-bus"
        let config = """
            <busconfig><type>custom</type><listen>unix:path=\(bus)</listen><auth>EXTERNAL</auth>
            <policy context="default"><allow user="*"/><allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
            """
        _ = FileManager.default.createFile(atPath: fixture.directory + "/bus.conf", contents: Data(config.utf8))
        var environment = server.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=\(bus)"
        started.append(
            try start(
                "/usr/bin/dbus-daemon", ["--config-file=\(fixture.directory)/bus.conf", "--nofork"], environment,
                log: fixture.directory + "/bus.log"))
        waitUntil("the private bus", seen: { "no \(bus)" }) { FileManager.default.fileExists(atPath: bus) }
        let mockLog = fixture.directory + "/logind.log"
        started.append(
            try start(
                "/usr/bin/python3", ["-m", "dbusmock", "--template", "logind", "-l", mockLog], environment,
                log: fixture.directory + "/logind.err"))
        let gdbus = ["call", "--system", "-d", "org.freedesktop.login1", "-o", "/org/freedesktop/login1"]
        _ = try run(
            "/usr/bin/gdbus", ["wait", "--system", "--timeout", "10", "org.freedesktop.login1"],
            environment: environment)
        _ = try run(
            "/usr/bin/gdbus", gdbus + ["-m", "org.freedesktop.DBus.Mock.AddSession", "c1", "seat0", "0", user, "true"],
            environment: environment)
        let added = try run(
            "/usr/bin/gdbus",
            gdbus + [
                "-m", "org.freedesktop.DBus.Mock.AddMethod", "org.freedesktop.login1.Manager", "GetSessionByPID", "u",
                "o", "ret = '/org/freedesktop/login1/session/c1'",
            ], environment: environment)
        #expect(added.status == 0, "logind's mock took no GetSessionByPID: \(added.text)")
        let xssLock = try start(
            "/usr/bin/setpriv",
            [
                "--reuid", user, "--regid", user, "--init-groups", "--", "/usr/bin/xss-lock", "--verbose",
                "--transfer-sleep-lock",
                "--", Self.lockPath, "--pam-directory", fixture.services, "--socket", fixture.socket,
            ], environment, log: fixture.directory + "/keyway-lock.log")
        started.append(xssLock)
        // xss-lock must have its session before the first activation (it asserts it has one), and hold the sleep
        // delay lock it hands over: it asks logind for both, and the mock logs each call.
        var calls = ""
        waitUntil("xss-lock's session and sleep delay lock", seen: { calls }) {
            calls = (try? String(contentsOfFile: mockLog, encoding: .utf8)) ?? ""
            return calls.contains("GetSessionByPID") && calls.contains("Inhibit")
        }

        // The screen saver activates: keyway-lock locks; the right pattern ends it, and xss-lock goes on.
        _ = try run("/usr/bin/xset", ["s", "activate"], environment: environment)
        do { try waitForScreen(server, saying: "Draw your pattern") } catch {
            let logs = ["bus.log", "logind.err"].map {
                (try? String(contentsOfFile: fixture.directory + "/" + $0, encoding: .utf8)) ?? ""
            }
            Issue.record("xss-lock running: \(xssLock.isRunning); the bus and logind said: \(logs)")
            throw error
        }
        let first = try #require(lockUnder(xssLock.processIdentifier), "xss-lock started no keyway-lock")
        server.drag(through: [2, 4, 9, 6], geometry: Self.geometry)
        waitUntil("the first lock's end after the right pattern", seen: { lockLog }) { kill(first, 0) != 0 }
        #expect(xssLock.isRunning, "xss-lock ended with the lock: \(lockLog)")
        _ = try run("/usr/bin/xset", ["s", "reset"], environment: environment)

        // Before suspend (logind's PrepareForSleep): locked, and the sleep delay lock xss-lock handed over is
        // closed once the lock is shown, so the machine may go to sleep.
        _ = try run(
            "/usr/bin/gdbus",
            gdbus + [
                "-m", "org.freedesktop.DBus.Mock.EmitSignal", "org.freedesktop.login1.Manager", "PrepareForSleep", "b",
                "[<true>]",
            ], environment: environment)
        try waitForScreen(server, saying: "Draw your pattern")
        let second = try #require(lockUnder(xssLock.processIdentifier), "no keyway-lock before suspend")
        let inherited = String(
            decoding: FileManager.default.contents(atPath: "/proc/\(second)/environ") ?? Data(), as: UTF8.self
        ).split(separator: "\0").first { $0.hasPrefix("XSS_SLEEP_LOCK_FD=") }
        let descriptor = try #require(inherited?.split(separator: "=").last, "xss-lock handed over no sleep lock")
        waitUntil("the sleep lock given up while locked", seen: { "descriptor \(descriptor) still open" }) {
            !FileManager.default.fileExists(atPath: "/proc/\(second)/fd/\(descriptor)")
        }
        server.drag(through: [2, 4, 9, 6], geometry: Self.geometry)
        waitUntil("the second lock's end after the right pattern", seen: { lockLog }) { kill(second, 0) != 0 }
    }
}

/// An Xvfb server of this test's own, on a display number no other server uses.
///
/// `-noreset`: without it the server resets when its last client disconnects, and drops every connection still being
/// set up at that moment. The test's own short-lived clients (xdotool, xprop, x-probe, import) disconnect all the time
/// while keyway-lock connects; one reset at the wrong moment and keyway-lock exits "cannot open the X display", and
/// the lock never says anything. `-displayfd`: Xvfb picks a display number free in the whole machine (abstract
/// sockets are shared with test runs in other mount namespaces, whose /tmp this one cannot see) and writes it once
/// it accepts connections: ready is what Xvfb says, not a socket file and a pause.
final class XServer {
    let display: String
    private let process: Process
    let log: String

    init() throws {
        log = LockScreenTests.artifacts + "/xvfb-\(getpid()).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/Xvfb")
        // -ac: the test's throwaway user may connect; -dpi 96: scale 1; no TCP.
        process.arguments = [
            "-displayfd", "1", "-noreset", "-screen", "0", "1024x768x24", "-dpi", "96", "-nolisten", "tcp", "-ac",
        ]
        let ready = Pipe()
        process.standardOutput = ready
        process.standardError = FileHandle(forWritingAtPath: log)
        do {
            spawning.lock()  // no other child inherits the pipe's write end (PAMFixture.swift, `spawning`)
            defer { spawning.unlock() }
            try process.run()
        }
        let reader = ready.fileHandleForReading.fileDescriptor
        var said = ""
        let deadline = Date().addingTimeInterval(30)
        while !said.contains("\n") {
            var fds = pollfd(fd: reader, events: Int16(POLLIN), revents: 0)
            let left = Int32(deadline.timeIntervalSinceNow * 1000)
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = left > 0 && poll(&fds, 1, left) > 0 ? read(reader, &buffer, 32) : -1
            guard count > 0 else {
                let ended = process.isRunning ? "did not say it was ready within 30 s" : "ended"
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                process.waitUntilExit()
                let errors = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw TerminalError(text: "Xvfb \(ended); it said \"\(said)\" and logged:\n\(errors)")
            }
            said += String(decoding: buffer[0..<count], as: UTF8.self)
        }
        display = ":" + said.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// What the test knows of this server, for a message: its display, whether it runs, and what it logged.
    func describe() -> String {
        let errors = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return "Xvfb on \(display) \(process.isRunning ? "runs" : "has ended"); it logged:\n\(errors)"
    }

    /// Ends the server with SIGKILL (the test runner's threads block SIGTERM, and a child started by Foundation
    /// inherits that mask) and removes the lock and socket files it leaves then.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        let number = display.dropFirst()
        unlink("/tmp/.X\(number)-lock")
        unlink("/tmp/.X11-unix/X\(number)")
    }

    var environment: [String: String] { ["DISPLAY": display, "PATH": "/usr/bin:/bin"] }

    /// `xdotool` with `arguments` on this display.
    @discardableResult
    func xdotool(_ arguments: [String]) -> Run? {
        try? run("/usr/bin/xdotool", arguments, environment: environment)
    }

    /// Presses the button at the first dot's centre and moves through the others' centres in small steps, as a hand
    /// drags; releases at the end unless told not to.
    func drag(through dots: [UInt8], geometry: GridGeometry, release: Bool = true) {
        let points = dots.map { geometry.centre(of: $0) }
        guard let first = points.first else { return }
        var arguments = ["mousemove", "\(Int(first.x))", "\(Int(first.y))", "mousedown", "1"]
        for (from, to) in zip(points, points.dropFirst()) {
            for step in 1...6 {
                let x = from.x + (to.x - from.x) * Double(step) / 6
                let y = from.y + (to.y - from.y) * Double(step) / 6
                arguments += ["mousemove", "\(Int(x))", "\(Int(y))", "sleep", "0.02"]
            }
        }
        xdotool(arguments)
        usleep(300_000)
        if release { self.release() }
    }

    func release() { xdotool(["mouseup", "1"]) }

    /// Types `text` as keys (the server's own events, through XTEST), then Enter.
    func enter(_ text: String) {
        xdotool(["type", "--delay", "20", text])
        xdotool(["key", "Return"])
    }

    /// The lock window's `_KEYWAY_LOCK_SCREEN` property: what the lock says now, in words.
    func lockScreenText() -> String {
        guard let found = xdotool(["search", "--name", "^keyway-lock$"]) else { return "(xdotool did not run)" }
        guard let id = found.output.first else {
            return "(no window named keyway-lock on \(display); xdotool exit \(found.status))"
        }
        guard let property = try? run("/usr/bin/xprop", ["-id", id, "_KEYWAY_LOCK_SCREEN"], environment: environment)
        else { return "" }
        return property.text.replacingOccurrences(of: "\\n", with: "\n")
    }

    /// A screenshot of the whole screen, kept at `path` (PNG), and its pixels.
    func screenshot(_ path: String) throws -> Screenshot {
        _ = try run("/usr/bin/import", ["-display", display, "-window", "root", path], environment: environment)
        let raw = path + ".rgb"
        defer { unlink(raw) }
        _ = try run("/usr/bin/convert", [path, "-depth", "8", "rgb:" + raw])
        guard let data = FileManager.default.contents(atPath: raw), data.count == 1024 * 768 * 3 else {
            throw TerminalError(text: "the screenshot \(path) could not be read")
        }
        return Screenshot(pixels: [UInt8](data), width: 1024)
    }

    /// Screenshots until `condition` holds (at most `seconds`); returns the last.
    func waitForScreenshot(_ path: String, seconds: Double = 30, _ condition: (Screenshot) -> Bool) throws -> Screenshot
    {
        let deadline = Date().addingTimeInterval(seconds)
        var shot = try screenshot(path)
        while !condition(shot) && Date() < deadline {
            usleep(100_000)
            shot = try screenshot(path)
        }
        return shot
    }
}

/// The pixels of a screenshot, as RGB bytes.
struct Screenshot {
    let pixels: [UInt8]
    let width: Int

    func colour(x: Int, y: Int) -> UInt32 {
        let index = (y * width + x) * 3
        return UInt32(pixels[index]) << 16 | UInt32(pixels[index + 1]) << 8 | UInt32(pixels[index + 2])
    }

    /// Pixels of exactly `colour` on the whole screen.
    func total(_ colour: LockScreenTests.Colour) -> Int {
        stride(from: 0, to: pixels.count, by: 3).reduce(0) { count, index in
            let value = UInt32(pixels[index]) << 16 | UInt32(pixels[index + 1]) << 8 | UInt32(pixels[index + 2])
            return value == colour.rawValue ? count + 1 : count
        }
    }

    /// Pixels of exactly `colour` in the rows `rows`.
    func count(_ wanted: LockScreenTests.Colour, in rows: Range<Int>) -> Int {
        var found = 0
        for y in rows {
            for x in 0..<width where colour(x: x, y: y) == wanted.rawValue { found += 1 }
        }
        return found
    }

    /// Pixels of exactly `colour` within 20 pixels of `point`.
    func count(_ wanted: LockScreenTests.Colour, near point: GridGeometry.Point) -> Int {
        var found = 0
        for y in max(0, Int(point.y) - 20)..<min(768, Int(point.y) + 20) {
            for x in max(0, Int(point.x) - 20)..<min(width, Int(point.x) + 20)
            where colour(x: x, y: y) == wanted.rawValue {
                found += 1
            }
        }
        return found
    }
}
