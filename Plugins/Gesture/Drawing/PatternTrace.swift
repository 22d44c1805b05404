import KeywayGesture

/// The phone's way of entering a pattern, as a model that knows no window system: nine dots laid out for a surface,
/// a trail that follows the pointer from dot to dot, and the states a drawing goes through. A front end (X11 today,
/// a Wayland `ext-session-lock-v1` surface later) feeds it pointer and key events and draws what it says; the rules of
/// a pattern are `Pattern`'s, the same the module and the terminal grid use (issue 45; docs/ARCHITECTURE.md §2).
public struct PatternTrace: Sendable, Equatable {
    /// Where a drawing stands.
    public enum State: Sendable, Equatable {
        /// Nothing drawn yet, or the last verdict cleared.
        case idle
        /// The pointer is down (or keys are being typed) and dots are being chosen.
        case drawing
        /// Drawing ended; the dots wait for a verdict.
        case submitted
        /// The verdict: the pattern was not the right one (drawn red, shaking).
        case wrong
        /// The verdict: the pattern was right (drawn green).
        case right
    }

    /// One straight line of the trail.
    public struct Segment: Sendable, Equatable {
        public var from: GridGeometry.Point
        public var to: GridGeometry.Point
    }

    /// Where the dots are.
    public let geometry: GridGeometry
    /// The chosen dots in order, dots passed over included; never a dot twice.
    public private(set) var chosen: [UInt8] = []
    /// Where the pointer is while drawing.
    public private(set) var pointer: GridGeometry.Point?
    public private(set) var state = State.idle

    public init(geometry: GridGeometry) { self.geometry = geometry }

    /// The pointer went down (a press, a touch): a new drawing starts, at the dot under it if any.
    public mutating func began(at point: GridGeometry.Point) {
        chosen = []
        state = .drawing
        pointer = point
        if let dot = geometry.dot(at: point) { choose(dot) }
    }

    /// The pointer moved to `point`: every dot whose circle the straight move from the last position entered is
    /// chosen, in the order the move reached them (a fast move that skips motion events still picks them up).
    public mutating func moved(to point: GridGeometry.Point) {
        guard state == .drawing, let last = pointer else { return }
        for dot in geometry.dots(along: last, point) { choose(dot) }
        pointer = point
    }

    /// The pointer went up: the dots chosen, for a verdict, or nil when none was (a tap beside the grid).
    public mutating func ended() -> [UInt8]? {
        guard state == .drawing else { return nil }
        pointer = nil
        guard !chosen.isEmpty else {
            state = .idle
            return nil
        }
        state = .submitted
        return chosen
    }

    /// A dot typed on the keyboard (1–9), for people who cannot draw: chosen as if the pointer went there.
    public mutating func typed(_ dot: UInt8) {
        guard (1...9).contains(dot) else { return }
        if state != .drawing {
            chosen = []
            state = .drawing
            pointer = nil
        }
        choose(dot)
    }

    /// The verdict on the submitted dots.
    public mutating func judged(right: Bool) {
        guard state == .submitted else { return }
        state = right ? .right : .wrong
    }

    /// Back to an empty grid (after the wrong state has been shown).
    public mutating func clear() {
        chosen = []
        pointer = nil
        state = .idle
    }

    /// The lines to draw: between the chosen dots, and from the last one to the pointer while drawing. None while
    /// drawing with the trail hidden (`show-trail = false`), nor for a submitted pattern then; a front end then lights
    /// no chosen dot either (keyway-lock does not), so the screen shows nothing of the pattern until the verdict.
    public func trail(showTrail: Bool) -> [Segment] {
        guard showTrail || state == .wrong || state == .right else { return [] }
        let points = chosen.map { geometry.centre(of: $0) }
        var segments = zip(points, points.dropFirst()).map { Segment(from: $0, to: $1) }
        if state == .drawing, let last = points.last, let pointer { segments.append(Segment(from: last, to: pointer)) }
        return segments
    }

    /// How far the grid is pushed sideways `milliseconds` after a wrong pattern was shown: a damped shake of a
    /// quarter of the spacing that is over after `shakeMilliseconds`.
    public func shakeOffset(afterMilliseconds milliseconds: Int) -> Double {
        guard state == .wrong, milliseconds >= 0, milliseconds < Self.shakeMilliseconds else { return 0 }
        let progress = Double(milliseconds) / Double(Self.shakeMilliseconds)
        // A triangle wave of four swings that starts at 0 (plain arithmetic: no libm), damped to 0 at the end.
        let phase = progress * 4 + 0.25
        let wave = 1 - 4 * abs(phase - Double(Int(phase)) - 0.5)
        return wave * (1 - progress) * geometry.spacing / 4
    }

    /// How long the shake of a wrong pattern lasts.
    public static let shakeMilliseconds = 400

    /// Chooses `dot` by the finger rule (`Pattern.choose`: a dot passed over is picked up, none twice).
    private mutating func choose(_ dot: UInt8) { Pattern.choose(dot, after: &chosen) }
}
