import AdapterKit
import Foundation
import ProviderCore
import Testing

@testable import SFTPAdapter

/// ``RangeWriter`` against a scripted server: acknowledgments in any order, failures, hostile
/// replies, a local file that shrinks.
@Suite("SFTP range writer")
struct RangeWriterTests {
    static let chunk = 64 * 1024
    static let file = ChannelFile(handle: ScriptedServer.handle, path: "/staging")

    static func write(
        _ range: Range<Int64>, to server: ScriptedServer, available: Int? = nil
    ) -> FileProviderError? {
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: RangeWriter.headerSize(file) + chunk, alignment: 16)
        defer { buffer.deallocate() }
        do throws(FileProviderError) {
            try RangeWriter.write(
                file, range, chunk: chunk, through: buffer, over: server, cancellation: CancellationFlag(),
                stop: { false },
                fill: { part, offset throws(FileProviderError) in
                    if let available, Int(offset) + part.count > available {
                        throw FileProviderError(.localIOFailure, "the local file became shorter")
                    }
                    part.copyBytes(from: server.content[Int(offset)..<(Int(offset) + part.count)])
                })
        } catch {
            return error
        }
        return nil
    }

    @Test func everyByteArrivesAtItsOffsetWithFourWritesInFlight() {
        let server = ScriptedServer(content: RangeReaderTests.content(900_001), behaviour: .inOrder)
        #expect(Self.write(100_000..<900_001, to: server) == nil)
        #expect(Array(server.received[100_000...]) == Array(server.content[100_000...]))
        #expect(!server.received[0..<100_000].contains { $0 != 0 }, "nothing before the range is sent")
        #expect(server.mostOutstanding == SFTPChannel.writesInFlight)
        #expect(server.outstanding.isEmpty, "returns only once every write is acknowledged")
    }

    @Test func acknowledgmentsInAnyOrderAreAccepted() {
        let server = ScriptedServer(content: RangeReaderTests.content(500_000), behaviour: .newestFirstAndShort)
        #expect(Self.write(0..<500_000, to: server) == nil)
        #expect(server.received == server.content)
    }

    @Test func aFailedWriteIsItsError() {
        // SSH_FX_FAILURE is how OpenSSH reports a full disk; the caller then asks for the space.
        let server = ScriptedServer(content: RangeReaderTests.content(400_000), behaviour: .status(4))
        let error = Self.write(0..<400_000, to: server)
        #expect(error?.code == .cannotSynchronize, "\(String(describing: error))")
        #expect(error?.message.contains("/staging") == true)
    }

    @Test func anAcknowledgmentOfARequestNeverSentIsRefused() {
        let server = ScriptedServer(content: RangeReaderTests.content(300_000), behaviour: .unknownID)
        #expect(Self.write(0..<300_000, to: server)?.code == .serverUnreachable)
    }

    @Test func aLocalFileThatShrinksStopsTheUploadWithItsError() {
        let server = ScriptedServer(content: RangeReaderTests.content(600_000), behaviour: .inOrder)
        let error = Self.write(0..<600_000, to: server, available: 200_000)
        #expect(error?.code == .localIOFailure)
        #expect(!server.forgotten.isEmpty, "the acknowledgments still on their way are dropped when they come")
    }
}
