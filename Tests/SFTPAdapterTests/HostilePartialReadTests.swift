import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// Ranged reads against ``HostileSFTPServer`` (paramiko answering anything), through libssh2
/// (user `hostile`) and over the adapter's own channel (user `limits`, whose server offers
/// `limits@openssh.com`): a file that sends fewer bytes than its size, one that answers every
/// read with more bytes than asked, a connection reset in the middle, impossible sizes. Nothing
/// traps and nothing is written outside the range.
@Suite("SFTP ranged reads against a hostile server", .timeLimit(.minutes(5)))
struct HostilePartialReadTests {
    /// A destination of 2 MiB filled with a pattern, and that pattern.
    static func destination() throws -> (URL, Data) {
        let url = try TestServer.scratch().appendingPathComponent("destination")
        var state: UInt32 = 7
        let pattern = Data(
            (0..<(2 << 20)).map { _ in
                state = state &* 1_664_525 &+ 1_013_904_223
                return UInt8(truncatingIfNeeded: state >> 24)
            })
        try pattern.write(to: url)
        return (url, pattern)
    }

    /// Whether `url` still holds `pattern` outside `range`.
    static func untouchedOutside(_ range: Range<Int64>, _ url: URL, _ pattern: Data) throws -> Bool {
        let now = try Data(contentsOf: url)
        let lower = Int(range.lowerBound)
        let upper = Int(min(range.upperBound, Int64(pattern.count)))
        return now.count == pattern.count && now[..<lower] == pattern[..<lower] && now[upper...] == pattern[upper...]
    }

    static func read(
        _ backend: SFTPBackend, _ name: String, _ range: Range<Int64>, version: ItemVersion? = nil, into url: URL
    ) async throws -> PartialContents {
        let identifier = ItemIdentifier(name)
        var version = version
        if version == nil { version = try await backend.item(for: identifier).version }
        return try await backend.fetchPartialContents(for: identifier, version: version!, range: range, into: url)
    }

    @Test(arguments: ["hostile", "limits"])
    func liesAreErrorsAndNothingIsWrittenOutsideTheRange(_ user: String) async throws {
        try await HostileSFTPServer.withStarted { server in
            let configuration = try SFTPBackend.descriptor.validate(server.options(user: user).merging(["timeout": "10"]) { $1 })
            let backend = try SFTPBackend(configuration: configuration)
            let (url, pattern) = try Self.destination()
            defer { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }

            // The user decides the path the reads take.
            let limit = try await backend.withConnection { connection throws(FileProviderError) -> Int? in
                try connection.extensionChannel()?.transferLimits(on: connection)?.read
            }
            #expect(limit == (user == "limits" ? 64 * 1024 : nil))

            // An honest file, for reference.
            let good = try await Self.read(backend, "good.txt", 1..<4, into: url)
            #expect(good.range == 1..<4)
            #expect(try Data(contentsOf: url)[1..<4] == Data("ell".utf8))
            #expect(try Self.untouchedOutside(1..<4, url, pattern))
            try pattern.write(to: url)

            // Says 100 bytes, sends 40: a read past the 40 is corruptData, the 40 are fine.
            for range: Range<Int64> in [0..<100, 50..<60, 30..<70] {
                let error = await #expect(throws: FileProviderError.self, "short.bin \(range)") {
                    try await Self.read(backend, "short.bin", range, into: url)
                }
                #expect(error?.code == .corruptData, "short.bin \(range): \(String(describing: error))")
                #expect(try Self.untouchedOutside(range, url, pattern), "short.bin \(range)")
                try pattern.write(to: url)
            }
            let prefix = try await Self.read(backend, "short.bin", 0..<40, into: url)
            #expect(prefix.range == 0..<40)
            #expect(try Data(contentsOf: url)[0..<40] == Data(repeating: UInt8(ascii: "s"), count: 40))
            #expect(try Self.untouchedOutside(0..<40, url, pattern))
            try pattern.write(to: url)

            // Every read answered with 20 bytes more than asked: a reply longer than asked is
            // corruptData (and the connection is dropped). libssh2 asks for more than the
            // range (up to four times a read ahead), so where the surplus still fits what it
            // asked for, it takes only the range's bytes. Either way, not a byte past the range.
            for range: Range<Int64> in [0..<10, 2..<5] {
                do {
                    let result = try await Self.read(backend, "long.bin", range, into: url)
                    #expect(user == "hostile", "a reply longer than asked was taken over the channel")
                    #expect(result.range == range)
                    #expect(try Data(contentsOf: url)[range.lowerBound..<range.upperBound].allSatisfy { $0 == UInt8(ascii: "l") })
                } catch let error as FileProviderError {
                    #expect(error.code == .corruptData, "long.bin \(range): \(error)")
                }
                #expect(try Self.untouchedOutside(range, url, pattern), "long.bin \(range)")
                try pattern.write(to: url)
            }

            // The connection reset after 256 KiB of a 1 MiB read: serverUnreachable, nothing
            // outside the range written, and the next read works on a new connection.
            let error = await #expect(throws: FileProviderError.self) {
                try await Self.read(backend, "reset.bin", 4096..<(1 << 20), into: url)
            }
            #expect(error?.code == .serverUnreachable, "\(String(describing: error))")
            #expect(try Self.untouchedOutside(4096..<(1 << 20), url, pattern))
            try pattern.write(to: url)
            let again = try await Self.read(backend, "good.txt", 0..<5, into: url)
            #expect(again.range == 0..<5)
            #expect(try Data(contentsOf: url)[0..<5] == Data("hello".utf8))

            // Impossible sizes and a folder.
            let any = ItemVersion(content: Data("any".utf8), metadata: Data())
            for name in ["huge.bin", "big.bin"] {
                let error = await #expect(throws: FileProviderError.self) {
                    try await Self.read(backend, name, 0..<10, version: any, into: url)
                }
                #expect(error?.code == .corruptData, "\(name): \(String(describing: error))")
            }
            let folder = await #expect(throws: FileProviderError.self) {
                try await Self.read(backend, "loop", 0..<10, version: any, into: url)
            }
            #expect(folder?.code == .invalidArgument, "\(String(describing: folder))")
            await backend.close()
        }
    }
}
