import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine

struct ThumbnailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "thumbnail",
        abstract: "Write a square JPEG thumbnail of an image, or put a file manager's thumbnail of it in place.",
        discussion: """
            The store makes it where it can (the media API's /preview); otherwise it is made \
            from the file, which is materialized first. Thumbnails are cached in the database by \
            content version. Works for JPEG, PNG, GIF and WebP images in every domain.

            --freedesktop normal|large writes the thumbnail where file managers (Nautilus, \
            Dolphin, Thunar) look, as the freedesktop.org thumbnail standard says: a PNG of at \
            most 128 or 256 pixels in $XDG_CACHE_HOME/thumbnails/normal or large (default \
            ~/.cache), named after the MD5 of the file's URI, with Thumb::URI and Thumb::MTime. \
            It is made from the store's thumbnail, or the downloaded file: the file is never \
            downloaded for it (a file not downloaded in a store that makes no thumbnails is an \
            error), so a file manager previews files that are not downloaded.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("The image: DOMAIN:/path or a path inside a replica folder.", valueName: "path"), completion: .itemPaths)
    var path: String

    @Option(name: .long, help: ArgumentHelp("The edge length in pixels (1-4096).", valueName: "pixels"))
    var size = 120

    @Option(name: [.customShort("o"), .long], help: ArgumentHelp("The JPEG file to write ('-' for standard output).", valueName: "file"))
    var output: String?

    @Option(
        help: ArgumentHelp("Write the file manager's thumbnail (freedesktop.org cache) of this size instead.", valueName: "normal|large"))
    var freedesktop: String?

    func validate() throws {
        guard (1...4096).contains(size) else { throw ValidationError("--size must be 1 to 4096, not \(size)") }
        if (output == nil) == (freedesktop == nil) { throw ValidationError("give either -o FILE or --freedesktop normal|large") }
        if let freedesktop, freedesktop != "normal" && freedesktop != "large" {
            throw ValidationError("--freedesktop takes normal (128 pixels) or large (256), not '\(freedesktop)'")
        }
    }

    func run() async throws {
        let manager = try global.manager()
        let location = try manager.resolve(path)
        let controller = try await manager.controller(for: location.domain)
        if let freedesktop {
            let environment = ProcessInfo.processInfo.environment
            let cacheHome =
                environment["XDG_CACHE_HOME"].flatMap { $0.hasPrefix("/") ? URL(fileURLWithPath: $0) : nil }
                ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache")
            let written: String
            do {
                written =
                    try await controller.freedesktopThumbnails(
                        at: location.path, sizes: [freedesktop == "large" ? .large : .normal], cacheHome: cacheHome
                    ).first ?? ""
            } catch {
                await manager.close()
                throw error
            }
            await manager.close()
            print("wrote \(Output.name(written))")
            return
        }
        guard let output else { return }
        let data: Data
        do {
            data = try await controller.thumbnail(at: location.path, size: size)
        } catch {
            await manager.close()
            throw error
        }
        await manager.close()
        if output == "-" {
            FileHandle.standardOutput.write(data)
            return
        }
        do {
            try data.write(to: URL(fileURLWithPath: output), options: .atomic)
        } catch {
            throw FileProviderError(.localIOFailure, "cannot write \(output): \(error.localizedDescription)")
        }
        print("wrote \(output) (\(size)×\(size) JPEG, \(data.count) bytes)")
    }
}
