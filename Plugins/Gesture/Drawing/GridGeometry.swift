/// Where the nine dots of a pattern grid are on a surface, and which dot a point or a straight move touches. Sizes are
/// in the surface's pixels; `scale` is how many of them make one logical point (2 on a HiDPI screen), so the grid
/// keeps its physical size and a finger's reach whatever the screen.
public struct GridGeometry: Sendable, Equatable {
    /// A position on the surface.
    public struct Point: Sendable, Equatable {
        public var x: Double
        public var y: Double

        public init(x: Double, y: Double) {
            self.x = x
            self.y = y
        }
    }

    /// The surface's size and scale.
    public let width: Double
    public let height: Double
    public let scale: Double
    /// The distance between neighbouring dots' centres.
    public let spacing: Double
    /// The radius a dot is drawn with.
    public let dotRadius: Double
    /// The radius of the circle around a dot that selects it when the pointer enters it (a finger's width: larger
    /// than the drawn dot, smaller than half the spacing, so no point is in two circles).
    public let hitRadius: Double
    /// The centre of dot 5.
    public let middle: Point

    /// The grid for a surface of `width` × `height` pixels at `scale`: as wide as 60% of the shorter side, at most
    /// 320 logical points, centred a little below the middle (the prompt is above it).
    public init(width: Double, height: Double, scale: Double = 1) {
        self.width = max(width, 1)
        self.height = max(height, 1)
        self.scale = max(scale, 1)
        let side = min(min(self.width, self.height) * 0.6, 320 * self.scale)
        spacing = side / 2
        dotRadius = max(spacing * 0.08, 3 * self.scale)
        hitRadius = spacing * 0.35
        middle = Point(x: self.width / 2, y: self.height * 0.55)
    }

    /// Where `dot` (1–9, row by row) is drawn.
    public func centre(of dot: UInt8) -> Point {
        let index = Int(dot) - 1
        return Point(
            x: middle.x + Double(index % 3 - 1) * spacing, y: middle.y + Double(index / 3 - 1) * spacing)
    }

    /// The dot whose circle holds `point`, if any.
    public func dot(at point: Point) -> UInt8? {
        (1...9).first { Self.distanceSquared(centre(of: UInt8($0)), point) <= hitRadius * hitRadius }.map(UInt8.init)
    }

    /// The dots whose circles a straight move from `start` to `end` enters, in the order it enters them.
    public func dots(along start: Point, _ end: Point) -> [UInt8] {
        let dx = end.x - start.x
        let dy = end.y - start.y
        let lengthSquared = dx * dx + dy * dy
        var entered: [(along: Double, dot: UInt8)] = []
        for dot in UInt8(1)...9 {
            let centre = centre(of: dot)
            // The point of the move nearest the centre, as a fraction of the move.
            let t =
                lengthSquared == 0
                ? 0 : min(max(((centre.x - start.x) * dx + (centre.y - start.y) * dy) / lengthSquared, 0), 1)
            let nearest = Point(x: start.x + t * dx, y: start.y + t * dy)
            if Self.distanceSquared(nearest, centre) <= hitRadius * hitRadius { entered.append((t, dot)) }
        }
        return entered.sorted { $0.along < $1.along }.map { $0.dot }
    }

    private static func distanceSquared(_ a: Point, _ b: Point) -> Double {
        (a.x - b.x) * (a.x - b.x) + (a.y - b.y) * (a.y - b.y)
    }
}
