import CX11Cairo
import Glibc

/// How the lock screen looks, as i3lock's options set it: a background colour (`--color RRGGBB`), a PNG image
/// (`--image FILE`) drawn from the top left corner or repeated over the screen (`--tiling`). The locking process
/// checks them before it locks and hands them to each drawing process as the same options.
struct Looks {
    /// The background, 0xRRGGBB.
    var background: UInt32 = 0x10_1418
    /// A PNG drawn over the background.
    var image: String?
    /// The image repeated over the whole screen.
    var tiling = false

    /// Six hexadecimal digits (a leading `#` allowed) as a colour; nil for anything else.
    static func colour(_ text: String) -> UInt32? {
        let digits = text.hasPrefix("#") ? String(text.dropFirst()) : text
        guard digits.count == 6, digits.allSatisfy({ $0.isHexDigit }) else { return nil }
        return UInt32(digits, radix: 16)
    }

    /// Why `path` cannot be drawn (not readable, not a PNG), or nil when it can.
    static func imageProblem(_ path: String) -> String? {
        guard access(path, R_OK) == 0 else { return "cannot be read (\(String(cString: strerror(errno))))" }
        guard let surface = cairo_image_surface_create_from_png(path) else { return "cannot be read as a PNG" }
        defer { cairo_surface_destroy(surface) }
        let status = cairo_surface_status(surface)
        guard status == CAIRO_STATUS_SUCCESS else {
            return "cannot be read as a PNG (\(String(cString: cairo_status_to_string(status))))"
        }
        return nil
    }

    /// The options that make these looks, for a drawing process.
    var arguments: [String] {
        let hex = String(background, radix: 16)
        var out = ["--color", String(repeating: "0", count: max(0, 6 - hex.count)) + hex]
        if let image { out += ["--image", image] }
        if tiling { out.append("--tiling") }
        return out
    }
}
