import KeywayGesture
import KeywayGestureDrawing
import Testing

/// The drawn pattern's model, driven as a pointer would drive it: presses, moves and releases at pixel positions.
@Suite("the drawn pattern")
struct PatternTraceTests {
    let geometry = GridGeometry(width: 1024, height: 768)

    /// A drag through the centres of `dots`, one motion event per dot (the way xdotool drives it).
    func drag(_ dots: [UInt8], in trace: inout PatternTrace) -> [UInt8]? {
        trace.began(at: geometry.centre(of: dots[0]))
        for dot in dots.dropFirst() { trace.moved(to: geometry.centre(of: dot)) }
        return trace.ended()
    }

    @Test("the grid is centred, square, inside the surface, and keeps its size in logical points at any scale")
    func geometryLaidOut() {
        for (width, height, scale) in [(1024.0, 768.0, 1.0), (3840, 2160, 2), (320, 480, 1), (800, 1280, 1.5)] {
            let grid = GridGeometry(width: width, height: height, scale: scale)
            let corners = [grid.centre(of: 1), grid.centre(of: 9)]
            #expect(corners.allSatisfy { $0.x > 0 && $0.x < width && $0.y > 0 && $0.y < height })
            #expect(grid.centre(of: 5).x == width / 2)
            #expect(
                abs((grid.centre(of: 3).x - grid.centre(of: 1).x) - (grid.centre(of: 7).y - grid.centre(of: 1).y))
                    < 1e-9)
            #expect(grid.spacing <= 160 * scale && grid.hitRadius < grid.spacing / 2 && grid.dotRadius < grid.hitRadius)
        }
    }

    @Test("a point selects the dot whose circle holds it, and none between dots")
    func hitTesting() {
        let five = geometry.centre(of: 5)
        #expect(geometry.dot(at: five) == 5)
        #expect(geometry.dot(at: .init(x: five.x + geometry.hitRadius - 1, y: five.y)) == 5)
        #expect(geometry.dot(at: .init(x: five.x + geometry.hitRadius + 1, y: five.y)) == nil)
        #expect(geometry.dot(at: .init(x: five.x + geometry.spacing / 2, y: five.y)) == nil)
        #expect(geometry.dot(at: .init(x: 0, y: 0)) == nil)
    }

    @Test("a drag through dot centres gives those dots; a dot passed over is picked up, a knight's move picks none")
    func dragging() {
        var trace = PatternTrace(geometry: geometry)
        // 9 → 3 runs straight over 6, which is picked up, as the phone does and as Pattern normalizes "2-4-9-3".
        #expect(drag([2, 4, 9, 3], in: &trace) == [2, 4, 9, 6, 3])
        #expect(trace.state == .submitted)
        #expect(drag([1, 3], in: &trace) == [1, 2, 3])  // one motion event from 1 to 3: 2 is picked up
        #expect(drag([1, 9, 7], in: &trace) == [1, 5, 9, 8, 7])
        #expect(drag([1, 6], in: &trace) == [1, 6])  // a knight's move passes between dots
        #expect(drag([5, 1, 5, 9], in: &trace) == [5, 1, 9])  // a dot is never chosen twice
    }

    @Test("a curved drag picks up the dots it enters, in order, and the trail follows the pointer")
    func curved() {
        var trace = PatternTrace(geometry: geometry)
        let one = geometry.centre(of: 1)
        trace.began(at: .init(x: one.x - geometry.spacing / 2, y: one.y))  // beside the grid: nothing yet
        #expect(trace.chosen.isEmpty && trace.state == .drawing)
        trace.moved(to: one)
        trace.moved(to: .init(x: geometry.centre(of: 4).x + 5, y: geometry.centre(of: 4).y + 3))
        let pointer = GridGeometry.Point(
            x: geometry.centre(of: 8).x - 10, y: geometry.centre(of: 8).y - geometry.spacing / 2)
        trace.moved(to: pointer)
        #expect(trace.chosen == [1, 4])
        let trail = trace.trail(showTrail: true)
        #expect(trail.count == 2 && trail.last?.to == pointer)
        #expect(trace.trail(showTrail: false).isEmpty)  // show-trail off: nothing drawn while drawing
        trace.moved(to: geometry.centre(of: 8))
        #expect(trace.ended() == [1, 4, 8])
        #expect(trace.trail(showTrail: false).isEmpty)
    }

    @Test("a tap beside the grid submits nothing; keys 1–9 choose dots for people who cannot draw")
    func tapsAndKeys() {
        var trace = PatternTrace(geometry: geometry)
        trace.began(at: .init(x: 5, y: 5))
        #expect(trace.ended() == nil && trace.state == .idle)
        for key in [1, 3, 0, 10, 9] as [UInt8] { trace.typed(key) }
        #expect(trace.chosen == [1, 2, 3, 6, 9])  // 0 and 10 are no dots; 1 → 3 and 3 → 9 pass over 2 and 6
        #expect(trace.ended() == [1, 2, 3, 6, 9])
    }

    @Test("the verdict: wrong is shown with the trail even when hidden, and shakes then rests; right is green")
    func verdicts() {
        var trace = PatternTrace(geometry: geometry)
        _ = drag([7, 5, 3], in: &trace)
        trace.judged(right: false)
        #expect(trace.state == .wrong)
        #expect(trace.trail(showTrail: false).count == 2)
        let offsets = stride(from: 0, through: 400, by: 25).map { trace.shakeOffset(afterMilliseconds: $0) }
        #expect(offsets.first == 0 && offsets.last == 0)
        #expect(offsets.contains { $0 > geometry.spacing / 8 } && offsets.contains { $0 < -geometry.spacing / 8 })
        #expect(offsets.allSatisfy { abs($0) <= geometry.spacing / 4 })
        trace.clear()
        #expect(trace.state == .idle && trace.chosen.isEmpty && trace.shakeOffset(afterMilliseconds: 100) == 0)
        _ = drag([2, 4, 9, 3], in: &trace)
        trace.judged(right: true)
        #expect(trace.state == .right && trace.shakeOffset(afterMilliseconds: 100) == 0)
        trace.judged(right: false)  // a verdict counts once
        #expect(trace.state == .right)
    }

    @Test("every pattern of 4 to 6 dots, dragged through its dots' centres, is chosen exactly as Pattern has it")
    func everyPatternDrawn() {
        var trace = PatternTrace(geometry: GridGeometry(width: 1920, height: 1080, scale: 1))
        var count = 0
        var differing: [Pattern] = []
        Pattern.forEach(lengths: 4...6) { pattern in
            count += 1
            let grid = trace.geometry
            trace.began(at: grid.centre(of: pattern.dots[0]))
            for dot in pattern.dots.dropFirst() { trace.moved(to: grid.centre(of: dot)) }
            if trace.ended() != pattern.dots && differing.count < 5 { differing.append(pattern) }
        }
        #expect(count == 1_624 + 7_152 + 26_016)  // the 4-, 5- and 6-dot patterns (all 389,112 take 14 s here)
        #expect(differing.isEmpty, "\(differing)")
    }
}
