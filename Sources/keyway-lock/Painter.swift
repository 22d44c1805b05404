import CX11Cairo
import Glibc
import KeywayCore
import KeywayGesture
import KeywayGestureDrawing
import KeywayPlatform
import KeywayRuntime

/// The drawing process: it draws on the locking process's window through a connection of its own, from what the
/// locking process passes it (the person's input, the PAM conversation), and answers prompts. It holds no grab and
/// decides nothing: if it dies, the locking process starts another and the screen stays locked (docs/LOCK.md).
final class Painter {
    private let display: OpaquePointer
    private let window: Window
    private var surface: OpaquePointer
    private var width: Double
    private var height: Double
    private let scale: Double
    private let showTrail: Bool
    private let looks: Looks
    /// The background image, when `looks` names one.
    private let image: OpaquePointer?
    /// Whose session is locked: the login name, and the full name from the account's GECOS field if it has one.
    private let owner: String
    private var trace: PatternTrace
    private var asking = Asking.nothing
    private var field: [Character] = []
    /// What PAM said since the person last answered: the verdict of that answer, and what explains the next prompt
    /// (a lockout). An answer clears them, so a field never shows what was said of the grid, nor the grid of a field.
    private var messages: [(text: String, isError: Bool)] = []
    /// The last field answered, until its verdict or the next prompt: a failure then is that field's.
    private var answeredField: String?
    /// A field's own result, shown under that field when it is asked again and below the grid meanwhile.
    private var fieldResult: (label: String, text: String)?
    /// Failed attempts since the lock began (wrong patterns and fields not accepted), as the screen counts them.
    private var failures = 0
    /// Whether Caps Lock is on (the locking process says).
    private var capsLock = false
    /// When the wrong pattern was shown, for the shake and for clearing it.
    private var judgedAt: Int64 = 0
    /// How many wrong patterns this drawing process has shown. The red lasts 1.2 s; the count stays, so a reader of
    /// `words` that looks less often than that (a test under load) still learns that the verdict was shown.
    private var wrongShown = 0
    /// How many prompts this drawing process was given: a reader tells a new prompt from the one before it.
    private var promptsShown = 0
    private let input = LineReader(0)

    /// What the person is asked now.
    enum Asking: Equatable {
        /// Nothing: starting, or checking what was entered.
        case nothing
        /// The pattern, on the grid (a marked prompt with `factor=gesture`).
        case grid(id: String, invitation: String?, fallback: String?)
        /// A line of text (the passcode, the password, a code): `echo` false shows dots.
        case field(id: String, label: String, echo: Bool)
    }

    private init(display: OpaquePointer, window: Window, showTrail: Bool, looks: Looks) {
        self.display = display
        self.window = window
        self.showTrail = showTrail
        self.looks = looks
        image = looks.image.flatMap { path in
            guard let surface = cairo_image_surface_create_from_png(path) else { return nil }
            guard cairo_surface_status(surface) == CAIRO_STATUS_SUCCESS else {
                cairo_surface_destroy(surface)
                return nil
            }
            return surface
        }
        owner = Self.owner()
        var attributes = XWindowAttributes()
        XGetWindowAttributes(display, window, &attributes)
        width = Double(max(1, attributes.width))
        height = Double(max(1, attributes.height))
        surface = cairo_xlib_surface_create(
            display, window, attributes.visual, attributes.width, attributes.height)
        // 96 dots per inch is scale 1; a screen of twice that density draws the grid twice as large (capped by the
        // screen's size in GridGeometry).
        let millimetres = Double(max(1, XDisplayWidthMM(display, XDefaultScreen(display))))
        let dpi = Double(XDisplayWidth(display, XDefaultScreen(display))) / (millimetres / 25.4)
        scale = dpi >= 144 ? 2 : 1
        trace = PatternTrace(geometry: GridGeometry(width: width, height: height, scale: scale))
        XSelectInput(display, window, Int(ExposureMask | StructureNotifyMask))
    }

    /// "alice (Alice Liddell)", or the login name alone.
    private static func owner() -> String {
        guard let account = getpwuid(getuid()), let name = account.pointee.pw_name else { return "uid \(getuid())" }
        let login = String(cString: name)
        let gecos = account.pointee.pw_gecos.map { String(cString: $0) } ?? ""
        let full = gecos.split(separator: ",", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        return full.isEmpty || full == login ? login : "\(login) (\(full))"
    }

    /// The time now, as the clock shows it ("14:02").
    private var clock: String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        let hours = parts.tm_hour < 10 ? "0\(parts.tm_hour)" : "\(parts.tm_hour)"
        let minutes = parts.tm_min < 10 ? "0\(parts.tm_min)" : "\(parts.tm_min)"
        return "\(hours):\(minutes)"
    }

    static func run(window: Window, socket: String?, looks: Looks) -> Never {
        BrokenPipe.ignoreSignal()
        guard let display = XOpenDisplay(nil) else {
            complain("the drawing process cannot open the X display")
            exit(ExitStatus.unavailable)
        }
        _ = XSetErrorHandler { _, _ in 0 }
        let painter = Painter(
            display: display, window: window, showTrail: Self.showTrail(socket: socket), looks: looks)
        painter.loop()
    }

    /// The user's `show-trail` switch, as keywayd has it (on when keywayd cannot say).
    private static func showTrail(socket: String?) -> Bool {
        guard let account = getpwuid(getuid()), let name = account.pointee.pw_name else { return true }
        let vault = DaemonVault(
            socketPath: socket ?? DaemonVault.defaultSocket, via: "keyway-lock", timeoutMilliseconds: 2000)
        guard let status = try? vault.status(of: String(cString: name)).first else { return true }
        return status.value(of: GestureAuthenticator.showTrailSetting)
    }

    private func loop() -> Never {
        let connection = XConnectionNumber(display)
        draw()
        while true {
            var event = XEvent()
            while XPending(display) > 0 {
                XNextEvent(display, &event)
                if event.type == ConfigureNotify && event.xconfigure.window == window {
                    resize(Double(event.xconfigure.width), Double(event.xconfigure.height))
                }
            }
            var fds = [
                pollfd(fd: 0, events: Int16(POLLIN), revents: 0),
                pollfd(fd: connection, events: Int16(POLLIN), revents: 0),
            ]
            let animating = trace.state == .wrong
            _ = poll(&fds, 2, animating ? 16 : 1000)
            if fds[0].revents != 0 {
                for line in input.drain() { handle(line) }
                if input.ended { exit(0) }
            }
            if trace.state == .wrong && MonotonicClock.milliseconds() - judgedAt > 1200 { trace.clear() }
            draw()
        }
    }

    private func resize(_ newWidth: Double, _ newHeight: Double) {
        guard newWidth != width || newHeight != height else { return }
        width = max(1, newWidth)
        height = max(1, newHeight)
        cairo_xlib_surface_set_size(surface, Int32(width), Int32(height))
        trace = PatternTrace(geometry: GridGeometry(width: width, height: height, scale: scale))
    }

    // MARK: What comes in

    private func handle(_ line: Line) {
        switch line.verb {
        case .down, .move, .up: pointer(line)
        case .key: key(line.payload)
        case .text: typed(line.payload)
        case .prompt: prompt(line)
        case .info, .error:
            let message = PromptMark.read(line.payload)
            if message.mark?.explains != nil { return }  // the numbered grid: this screen draws the grid
            judgeWrongIfWaiting()
            if line.verb == .error, let field = answeredField { fieldFailed(field, message.text) }
            messages = Array((messages + [(message.text, line.verb == .error)]).suffix(3))
        case .caps:
            capsLock = line.payload == "on"
        case .failed:
            failures = Int(line.payload) ?? failures
        case .woken:
            asking = .nothing
        case .result:
            if line.payload == "success" {
                trace.judged(right: true)
            } else {
                judgeWrongIfWaiting()
                if let field = answeredField { fieldFailed(field, nil) }
                // A new transaction follows: what was said in this one is over, but a field's result.
                messages = []
                asking = .nothing
            }
        case .right:
            trace.judged(right: true)
        case .restarted:
            asking = .nothing
        case .answer:
            break  // the drawing process's own verb: never sent to it
        }
    }

    private func judgeWrongIfWaiting() {
        guard trace.state == .submitted else { return }
        trace.judged(right: false)
        judgedAt = MonotonicClock.milliseconds()
        wrongShown += 1
        counted()
    }

    /// The field `label` was not accepted: said under it (PAM's words, or that it was not accepted), and counted.
    private func fieldFailed(_ label: String, _ said: String?) {
        answeredField = nil
        fieldResult = (label, said ?? "\(label) not accepted.")
        counted()
    }

    /// One more failed attempt, told to the locking process too, for a drawing process started after this one.
    private func counted() {
        failures += 1
        send(Line(.failed, "\(failures)"), to: 1)
    }

    private func prompt(_ line: Line) {
        let (id, rest) = line.split
        let parts = rest.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
        let echo = parts.first == "shown"
        let prompt = PromptMark.read(parts.count > 1 ? String(parts[1]) : "")
        judgeWrongIfWaiting()
        answeredField = nil
        field = []
        promptsShown += 1
        if let mark = prompt.mark, mark.factor == FactorKind.gesture.rawValue {
            asking = .grid(id: id, invitation: mark.invitation, fallback: mark.fallback)
        } else {
            // A prompt that carries messages held back (PAM_SILENT) has them on lines above it.
            var lines = prompt.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let label = lines.popLast() ?? ""
            for held in lines where !held.isEmpty { messages = Array((messages + [(held, true)]).suffix(3)) }
            asking = .field(id: id, label: label, echo: echo)
        }
    }

    private func pointer(_ line: Line) {
        guard case .grid = asking else { return }
        let numbers = line.payload.split(separator: " ").compactMap { Double($0) }
        guard numbers.count == 2 else { return }
        let point = GridGeometry.Point(x: numbers[0], y: numbers[1])
        switch line.verb {
        case .down:
            if trace.state == .wrong || trace.state == .right { trace.clear() }
            guard trace.state == .idle || trace.state == .drawing else { return }
            messages = []
            trace.began(at: point)
        case .move:
            trace.moved(to: point)
        default:
            trace.moved(to: point)
            if let dots = trace.ended() { submit(dots) }
        }
    }

    private func key(_ name: String) {
        switch asking {
        case .grid(let id, _, let fallback):
            switch name {
            case "Return":
                if trace.state == .drawing, let dots = trace.ended() {
                    submit(dots)
                } else if fallback != nil, trace.state != .submitted {
                    answer(id, "")
                }
            case "Escape", "BackSpace":
                if trace.state == .drawing { trace.clear() }
            default: break
            }
        case .field(let id, _, _):
            switch name {
            case "Return": answer(id, String(field))
            case "BackSpace": if !field.isEmpty { field.removeLast() }
            case "Escape": field = []
            default: break
            }
        case .nothing:
            break
        }
    }

    private func typed(_ text: String) {
        switch asking {
        case .grid:
            for character in text {
                guard let digit = character.wholeNumberValue, (1...9).contains(digit) else { continue }
                if trace.state == .wrong || trace.state == .right { trace.clear() }
                guard trace.state == .idle || trace.state == .drawing else { return }
                trace.typed(UInt8(digit))
            }
        case .field:
            if field.count < 256 { field += Array(text) }
        case .nothing:
            break
        }
    }

    /// The pattern drawn, as the module reads it ("2-4-9-3").
    private func submit(_ dots: [UInt8]) {
        guard case .grid(let id, _, _) = asking else { return }
        answer(id, dots.map { "\($0)" }.joined(separator: "-"))
    }

    private func answer(_ id: String, _ text: String) {
        send(Line(.answer, "\(id) \(text)"), to: 1)
        messages = []
        if case .field(_, let label, _) = asking {
            field = []
            answeredField = heading(of: label)
            if fieldResult?.label == answeredField { fieldResult = nil }
        }
        asking = .nothing
    }

    // MARK: Drawing

    struct Colour {
        var red: Double, green: Double, blue: Double
        init(_ hex: UInt32) {
            red = Double((hex >> 16) & 0xFF) / 255
            green = Double((hex >> 8) & 0xFF) / 255
            blue = Double(hex & 0xFF) / 255
        }
        /// Keep in step with the test's reading of screenshots (Tests/PAMTests/LockScreenTests.swift).
        static let background = Colour(0x10_1418)
        static let dot = Colour(0xC8_CDD2)
        static let trail = Colour(0x3D_8BFD)
        static let wrong = Colour(0xE5_484D)
        static let right = Colour(0x30_A46C)
        static let text = Colour(0xEE_EEEE)
        static let errorText = Colour(0xFF_9A9A)
        static let box = Colour(0x2A_3038)
    }

    private func set(_ cr: OpaquePointer, _ colour: Colour) {
        cairo_set_source_rgb(cr, colour.red, colour.green, colour.blue)
    }

    /// What the screen says, in words: kept in the lock window's `_KEYWAY_LOCK_SCREEN` property (UTF-8 lines: what
    /// is asked, the messages, the state of the grid), for tests and for assistive tools that read properties.
    private var words: String {
        var lines: [String]
        switch asking {
        case .grid(_, _, let fallback):
            lines = [heading]
            if let fallback { lines.append("Enter alone: \(fallback.lowercased())") }
        case .field(_, _, let echo):
            lines = ["\(heading) (\(echo ? "shown" : "hidden") field)"]
        case .nothing:
            lines = [heading]
        }
        lines += messages.map { $0.text }
        if let resultLine { lines.append("result: \(resultLine)") }
        lines.append("locked by: \(owner)")
        lines.append("clock: \(clock)")
        lines.append("failed attempts: \(failures)")
        lines.append("caps lock: \(capsLock ? "on" : "off")")
        lines.append("grid: \(trace.state)")
        lines.append("wrong patterns shown: \(wrongShown)")
        lines.append("prompts shown: \(promptsShown)")
        return lines.joined(separator: "\n")
    }
    private var said = ""

    /// What is asked, as the screen heads it and `words` says it: the grid's invitation, a field's label without its
    /// ": ", or that a verdict is awaited.
    private var heading: String {
        switch asking {
        case .grid(_, let invitation, _): invitation.map { "\($0) or draw your pattern" } ?? "Draw your pattern"
        case .field(_, let label, _): heading(of: label)
        case .nothing: trace.state == .idle ? "Checking…" : "Checking the pattern…"
        }
    }

    /// A field's label without its ": " ("Password").
    private func heading(of label: String) -> String {
        label.hasSuffix(": ") ? String(label.dropLast(2)) : label.hasSuffix(":") ? String(label.dropLast()) : label
    }

    /// A field's own result as the grid shows it.
    private var resultLine: String? {
        guard let fieldResult else { return nil }
        return fieldResult.text.hasPrefix(fieldResult.label)
            ? fieldResult.text : "\(fieldResult.label): \(fieldResult.text)"
    }

    private func publishWords() {
        let text = words
        guard text != said else { return }
        said = text
        let property = XInternAtom(display, "_KEYWAY_LOCK_SCREEN", 0)
        let type = XInternAtom(display, "UTF8_STRING", 0)
        let bytes = Array(text.utf8)
        bytes.withUnsafeBufferPointer {
            _ = XChangeProperty(display, window, property, type, 8, PropModeReplace, $0.baseAddress, Int32($0.count))
        }
    }

    private func draw() {
        // The words are said after the frame they describe is drawn, on the same connection: the X server runs one
        // client's requests in order, so whoever reads the words finds that frame already on the screen.
        defer {
            publishWords()
            XFlush(display)
        }
        guard let cr = cairo_create(surface) else { return }
        defer {
            cairo_destroy(cr)
            cairo_surface_flush(surface)
        }
        cairo_push_group(cr)
        set(cr, Colour(looks.background))
        cairo_paint(cr)
        if let image {
            cairo_set_source_surface(cr, image, 0, 0)
            if looks.tiling, let pattern = cairo_get_source(cr) {
                cairo_pattern_set_extend(pattern, CAIRO_EXTEND_REPEAT)
            }
            cairo_paint(cr)
        }
        let geometry = trace.geometry
        let gridTop = geometry.middle.y - geometry.spacing - geometry.hitRadius
        cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL)
        let size = 18 * scale
        cairo_set_font_size(cr, size)
        // Whose session, and the time: at the top, above everything asked.
        set(cr, .text)
        cairo_set_font_size(cr, size * 2.6)
        centred(cr, clock, y: size * 4)
        cairo_set_font_size(cr, size)
        centred(cr, "Locked by \(owner)", y: size * 5.8)
        // What stays true whatever is asked: Caps Lock, and the failed attempts so far, at the bottom.
        var bottom = height - size * 2
        if failures > 0 {
            set(cr, .text)
            centred(cr, failures == 1 ? "1 failed attempt" : "\(failures) failed attempts", y: bottom)
            bottom -= size * 1.6
        }
        if capsLock {
            set(cr, .errorText)
            centred(cr, "Caps Lock is on", y: bottom)
        }
        var y = gridTop - size * 2.2
        if case .field = asking { y = geometry.middle.y - size * 4 }
        let underField: String? = {
            guard case .field(_, let label, _) = asking, let fieldResult, fieldResult.label == heading(of: label)
            else { return nil }
            return fieldResult.text
        }()
        for message in messages.reversed() where message.text != underField {
            set(cr, message.isError ? .errorText : .text)
            centred(cr, message.text, y: y)
            y -= size * 1.5
        }
        switch asking {
        case .grid(_, _, let fallback):
            set(cr, .text)
            cairo_set_font_size(cr, size * 1.3)
            centred(cr, heading, y: y - size * 0.4)
            cairo_set_font_size(cr, size * 0.8)
            let hint =
                "or type the dots 1-9 and press Enter" + (fallback.map { " · Enter alone: \($0.lowercased())" } ?? "")
            let hintY = geometry.middle.y + geometry.spacing + geometry.hitRadius + size * 2
            centred(cr, hint, y: hintY)
            if let resultLine {
                set(cr, .errorText)
                cairo_set_font_size(cr, size)
                centred(cr, resultLine, y: hintY + size * 1.8)
            }
            grid(cr)
        case .field(_, _, let echo):
            set(cr, .text)
            cairo_set_font_size(cr, size * 1.3)
            centred(cr, heading, y: geometry.middle.y - size * 2)
            set(cr, .box)
            let boxWidth = min(width * 0.8, 420 * scale)
            cairo_rectangle(cr, (width - boxWidth) / 2, geometry.middle.y - size, boxWidth, size * 2.2)
            cairo_fill(cr)
            set(cr, .text)
            cairo_set_font_size(cr, size)
            let typed = echo ? String(field) : String(repeating: "•", count: field.count)
            centred(cr, typed, y: geometry.middle.y + size * 0.5)
            if let underField {
                set(cr, .errorText)
                centred(cr, underField, y: geometry.middle.y + size * 3)
            }
        case .nothing:
            if trace.state == .idle {
                set(cr, .text)
                centred(cr, heading, y: geometry.middle.y)
            } else {
                grid(cr)
            }
        }
        cairo_pop_group_to_source(cr)
        cairo_paint(cr)
    }

    private func centred(_ cr: OpaquePointer, _ text: String, y: Double) {
        var extents = cairo_text_extents_t()
        cairo_text_extents(cr, text, &extents)
        cairo_move_to(cr, (width - extents.width) / 2 - extents.x_bearing, y)
        cairo_show_text(cr, text)
    }

    /// The nine dots, the trail and the chosen dots, in the colour of the state, pushed sideways while a wrong
    /// pattern shakes.
    private func grid(_ cr: OpaquePointer) {
        let geometry = trace.geometry
        let shake = trace.shakeOffset(afterMilliseconds: Int(MonotonicClock.milliseconds() - judgedAt))
        let lit: Colour =
            switch trace.state {
            case .wrong: .wrong
            case .right: .right
            case .idle, .drawing, .submitted: .trail
            }
        cairo_save(cr)
        cairo_translate(cr, shake, 0)
        set(cr, lit)
        cairo_set_line_width(cr, max(3, geometry.dotRadius * 0.8))
        cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND)
        cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND)
        for segment in trace.trail(showTrail: showTrail) {
            cairo_move_to(cr, segment.from.x, segment.from.y)
            cairo_line_to(cr, segment.to.x, segment.to.y)
        }
        cairo_stroke(cr)
        let chosen = Set(trace.chosen)
        for dot in UInt8(1)...9 {
            let centre = geometry.centre(of: dot)
            let isLit = chosen.contains(dot) && (showTrail || trace.state == .wrong || trace.state == .right)
            set(cr, isLit ? lit : .dot)
            cairo_new_sub_path(cr)
            cairo_arc(cr, centre.x, centre.y, geometry.dotRadius * (isLit ? 1.6 : 1), 0, 2 * Double.pi)
            cairo_fill(cr)
        }
        cairo_restore(cr)
    }
}
