import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine

struct ThumbnailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "thumbnail",
        abstract: "Write a square JPEG thumbnail of an image.",
        discussion:
            "The store makes it where it can (the media API's /preview); otherwise it is made from the file, which is materialized first. Thumbnails are cached in the database by content version. Works for JPEG, PNG, GIF and WebP images in every domain."
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("The image: DOMAIN:/path or a path inside a replica folder.", valueName: "path"), completion: .itemPaths)
    var path: String

    @Option(name: .long, help: ArgumentHelp("The edge length in pixels (1-4096).", valueName: "pixels"))
    var size = 120

    @Option(name: [.customShort("o"), .long], help: ArgumentHelp("The JPEG file to write ('-' for standard output).", valueName: "file"))
    var output: String

    func validate() throws {
        guard (1...4096).contains(size) else { throw ValidationError("--size must be 1 to 4096, not \(size)") }
    }

    func run() async throws {
        let manager = try global.manager()
        let location = try manager.resolve(path)
        let controller = try await manager.controller(for: location.domain)
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
