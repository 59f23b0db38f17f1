import CGD
import Foundation
import ProviderCore

/// Square JPEG thumbnails of JPEG, PNG, GIF and WebP images, made with libgd.
///
/// Every function here is blocking CPU work and runs on the caller's thread: call it from a
/// ``ProviderCore/BlockingExecutor`` (the engine does) or from a thread of your own, never in a
/// loop on Swift's cooperative pool.
public enum Thumbnailer {
    /// The default edge length, as the media API's `/preview`.
    public static let defaultSize = 120
    /// The largest edge length accepted.
    public static let maximumSize = 4096
    /// The largest source image accepted, in bytes.
    public static let maximumSourceBytes = 256 << 20

    /// The image formats libgd decodes here.
    public enum Format: String, Sendable {
        case jpeg, png, gif, webp
    }

    /// The format of an image from its first bytes, or `nil` when it is none of the four.
    public static func format(of data: Data) -> Format? {
        let bytes = [UInt8](data.prefix(12))
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return .jpeg }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if bytes.starts(with: Array("GIF8".utf8)) { return .gif }
        if bytes.count >= 12 && bytes.starts(with: Array("RIFF".utf8)) && Array(bytes[8..<12]) == Array("WEBP".utf8) {
            return .webp
        }
        return nil
    }

    /// Makes a `size`×`size` JPEG from an image: the centre square of the image, scaled (up or
    /// down) to `size`, transparent parts on white.
    ///
    /// - Throws: `notSupported` when `data` is not a JPEG, PNG, GIF or WebP image libgd can
    ///   decode; `invalidArgument` when `size` is not within 1...``maximumSize``;
    ///   `localIOFailure` when libgd cannot encode the result.
    public static func jpeg(from data: Data, size: Int = defaultSize, quality: Int = 85) throws(FileProviderError) -> Data {
        guard (1...maximumSize).contains(size) else {
            throw FileProviderError(.invalidArgument, "a thumbnail size must be 1 to \(maximumSize) pixels, not \(size)")
        }
        let source = try decode(data)
        defer { fp_gd_destroy(source) }
        let width = fp_gd_width(source)
        let height = fp_gd_height(source)
        let side = min(width, height)
        guard side > 0, let target = fp_gd_create_truecolor(Int32(size), Int32(size)) else {
            throw FileProviderError(.notSupported, "the image has no pixels")
        }
        defer { fp_gd_destroy(target) }
        fp_gd_filled_rectangle(target, 0, 0, Int32(size - 1), Int32(size - 1), fp_gd_truecolor(255, 255, 255))
        fp_gd_alpha_blending(target, 1)
        fp_gd_copy_resampled(
            target, source, 0, 0, (width - side) / 2, (height - side) / 2, Int32(size), Int32(size), side, side)
        return try encodeJPEG(target, quality: quality)
    }

    /// A PNG of an image (JPEG, PNG, GIF or WebP) scaled down to fit `fitting` pixels a side,
    /// keeping its proportions (never scaled up), transparent parts on white.
    ///
    /// - Throws: `notSupported` when `data` is not an image libgd can decode; `invalidArgument`
    ///   when `fitting` is not within 1...``maximumSize``; `localIOFailure` when libgd cannot
    ///   encode the result.
    public static func png(from data: Data, fitting: Int) throws(FileProviderError) -> Data {
        guard (1...maximumSize).contains(fitting) else {
            throw FileProviderError(.invalidArgument, "a thumbnail size must be 1 to \(maximumSize) pixels, not \(fitting)")
        }
        let source = try decode(data)
        defer { fp_gd_destroy(source) }
        let width = Int(fp_gd_width(source))
        let height = Int(fp_gd_height(source))
        guard width > 0, height > 0 else { throw FileProviderError(.notSupported, "the image has no pixels") }
        let scale = min(1, Double(fitting) / Double(max(width, height)))
        let (targetWidth, targetHeight) = (max(1, Int((Double(width) * scale).rounded())), max(1, Int((Double(height) * scale).rounded())))
        guard let target = fp_gd_create_truecolor(Int32(targetWidth), Int32(targetHeight)) else {
            throw FileProviderError(.localIOFailure, "libgd could not make a \(targetWidth)×\(targetHeight) image")
        }
        defer { fp_gd_destroy(target) }
        // Transparent parts on white, as the JPEG thumbnails.
        fp_gd_filled_rectangle(target, 0, 0, Int32(targetWidth - 1), Int32(targetHeight - 1), fp_gd_truecolor(255, 255, 255))
        fp_gd_alpha_blending(target, 1)
        fp_gd_copy_resampled(
            target, source, 0, 0, 0, 0, Int32(targetWidth), Int32(targetHeight), Int32(width), Int32(height))
        var count: Int32 = 0
        guard let bytes = fp_gd_png(target, &count), count > 0 else {
            throw FileProviderError(.localIOFailure, "libgd could not encode a PNG")
        }
        defer { fp_gd_free(bytes) }
        return Data(bytes: bytes, count: Int(count))
    }

    /// Makes a thumbnail of the image file at `path` (see ``jpeg(from:size:quality:)``).
    ///
    /// - Throws: `noSuchItem` when the file does not exist; `localIOFailure` when it cannot be
    ///   read; `notSupported` when it is larger than ``maximumSourceBytes`` or not an image;
    ///   `invalidArgument` for a bad `size`.
    public static func jpeg(fromFileAt path: String, size: Int = defaultSize, quality: Int = 85)
        throws(FileProviderError) -> Data
    {
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            throw FileProviderError(.noSuchItem, "no file at \(path)")
        }
        if let bytes = attributes[.size] as? Int, bytes > maximumSourceBytes {
            throw FileProviderError(
                .notSupported, "\(path) is \(bytes) bytes; thumbnails are made of images up to \(maximumSourceBytes) bytes")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw FileProviderError(.localIOFailure, "cannot read \(path): \(error.localizedDescription)")
        }
        return try jpeg(from: data, size: size, quality: quality)
    }

    /// The width and height of an image, or `nil` when it cannot be decoded.
    public static func dimensions(of data: Data) -> (width: Int, height: Int)? {
        guard let image = try? decode(data) else { return nil }
        defer { fp_gd_destroy(image) }
        return (Int(fp_gd_width(image)), Int(fp_gd_height(image)))
    }

    /// A sample image for tests, demos and benchmarks: a `width`×`height` gradient with a
    /// pattern that depends on `seed`, as PNG or JPEG.
    ///
    /// - Throws: `invalidArgument` for a size outside 1...4096 or a format other than PNG or
    ///   JPEG; `localIOFailure` when libgd cannot encode it.
    public static func sampleImage(width: Int, height: Int, seed: Int = 0, format: Format = .png)
        throws(FileProviderError) -> Data
    {
        guard (1...maximumSize).contains(width), (1...maximumSize).contains(height) else {
            throw FileProviderError(.invalidArgument, "a sample image is 1 to \(maximumSize) pixels wide and high")
        }
        try loadLibGD()
        guard let image = fp_gd_create_truecolor(Int32(width), Int32(height)) else {
            throw FileProviderError(.localIOFailure, "libgd could not allocate an image")
        }
        defer { fp_gd_destroy(image) }
        let shift = Int32(truncatingIfNeeded: seed &* 37)
        for y in 0..<Int32(height) {
            for x in 0..<Int32(width) {
                let red = (x &* 255 / Int32(max(1, width - 1)) &+ shift) & 0xFF
                let green = (y &* 255 / Int32(max(1, height - 1))) & 0xFF
                let blue = ((x / 8 + y / 8 + shift) % 2 == 0) ? Int32(200) : Int32(40)
                fp_gd_set_pixel(image, x, y, fp_gd_truecolor(red, green, blue))
            }
        }
        switch format {
        case .png:
            var count: Int32 = 0
            guard let bytes = fp_gd_png(image, &count), count > 0 else {
                throw FileProviderError(.localIOFailure, "libgd could not encode a PNG")
            }
            defer { fp_gd_free(bytes) }
            return Data(bytes: bytes, count: Int(count))
        case .jpeg:
            return try encodeJPEG(image, quality: 90)
        case .gif, .webp:
            throw FileProviderError(.invalidArgument, "sample images are PNG or JPEG")
        }
    }

    // MARK: libgd

    /// Loads libgd on first use (it is not linked: see `Sources/CGD`).
    /// - Throws: `notSupported` naming the reason and the package to install when it cannot be
    ///   loaded.
    private static func loadLibGD() throws(FileProviderError) {
        if let reason = fp_gd_load_error() {
            throw FileProviderError(
                .notSupported,
                "thumbnails need libgd, which cannot be loaded (\(String(cString: reason))); install it: apt-get install libgd3")
        }
    }

    private static func decode(_ data: Data) throws(FileProviderError) -> gdImagePtr {
        guard let format = format(of: data) else {
            throw FileProviderError(.notSupported, "not a JPEG, PNG, GIF or WebP image")
        }
        guard data.count <= maximumSourceBytes else {
            throw FileProviderError(.notSupported, "the image is \(data.count) bytes; the limit is \(maximumSourceBytes)")
        }
        try loadLibGD()
        var bytes = data
        let count = Int32(bytes.count)
        let image: gdImagePtr? = bytes.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return nil }
            switch format {
            case .jpeg: return fp_gd_from_jpeg(count, base)
            case .png: return fp_gd_from_png(count, base)
            case .gif: return fp_gd_from_gif(count, base)
            case .webp: return fp_gd_from_webp(count, base)
            }
        }
        guard let image else {
            throw FileProviderError(.notSupported, "the \(format.rawValue) image could not be decoded")
        }
        return image
    }

    private static func encodeJPEG(_ image: gdImagePtr, quality: Int) throws(FileProviderError) -> Data {
        var count: Int32 = 0
        guard let bytes = fp_gd_jpeg(image, &count, Int32(max(1, min(100, quality)))), count > 0 else {
            throw FileProviderError(.localIOFailure, "libgd could not encode a JPEG")
        }
        defer { fp_gd_free(bytes) }
        return Data(bytes: bytes, count: Int(count))
    }
}
