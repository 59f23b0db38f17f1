import AdapterKit
import Foundation
import ProviderCore
import Testing

@testable import SFTPAdapter

/// ``RangeReader`` against a scripted server: whole, short, reordered and hostile replies.
@Suite("SFTP range reader")
struct RangeReaderTests {
    static let chunk = 64 * 1024

    static func content(_ count: Int) -> [UInt8] {
        var state: UInt32 = 0x9E37_79B9
        return (0..<count).map { _ in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        }
    }

    /// What a read of `range` wrote, whether every `advanced` report covered only bytes
    /// written without a gap, and the total it reported.
    struct Outcome {
        var bytes: [UInt8]
        var written: [Bool]
        var reported: Int64 = 0
        var reportsWereGapFree = true
    }

    static func read(
        _ range: Range<Int64>, from server: ScriptedServer, stop: @escaping () -> Bool = { false },
        trailing: TrailingRequests? = nil
    ) -> (Outcome, FileProviderError?) {
        let size = server.content.count
        var outcome = Outcome(bytes: [UInt8](repeating: 0, count: size), written: [Bool](repeating: false, count: size))
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        do throws(FileProviderError) {
            try RangeReader.read(
                ChannelFile(handle: ScriptedServer.handle, path: "/f"), range, chunk: chunk, into: buffer,
                over: server, cancellation: CancellationFlag(), stop: stop,
                write: { piece, offset in
                    for (index, byte) in piece.enumerated() {
                        outcome.bytes[Int(offset) + index] = byte
                        outcome.written[Int(offset) + index] = true
                    }
                },
                advanced: { count in
                    let start = Int(range.lowerBound + outcome.reported)
                    if !outcome.written[start..<(start + Int(count))].allSatisfy({ $0 }) { outcome.reportsWereGapFree = false }
                    outcome.reported += count
                }, trailing: trailing)
        } catch {
            return (outcome, error)
        }
        return (outcome, nil)
    }

    @Test func wholeRepliesInOrderGiveTheRangeWithAMebibyteInFlight() {
        let server = ScriptedServer(content: Self.content(1_000_123), behaviour: .inOrder)
        let range: Range<Int64> = 70_000..<1_000_123
        let (outcome, error) = Self.read(range, from: server)
        #expect(error == nil)
        #expect(Array(outcome.bytes[70_000...]) == Array(server.content[70_000...]))
        #expect(!outcome.written[0..<70_000].contains(true), "nothing before the range is written")
        #expect(outcome.reported == range.upperBound - range.lowerBound)
        #expect(outcome.reportsWereGapFree)
        // 1 MiB in flight: 16 reads of 64 KiB, or as many as the range has.
        let reads = Int((range.upperBound - range.lowerBound + Int64(Self.chunk) - 1) / Int64(Self.chunk))
        #expect(SFTPChannel.readsInFlight(for: Self.chunk) == 16)
        #expect(server.mostOutstanding == min(16, reads))
        #expect(server.forgotten.isEmpty)
    }

    @Test func shortRepliesInAnyOrderAreCompletedAndReportedWithoutGaps() {
        let server = ScriptedServer(content: Self.content(777_777), behaviour: .newestFirstAndShort)
        let (outcome, error) = Self.read(0..<777_777, from: server)
        #expect(error == nil)
        #expect(outcome.bytes == server.content)
        #expect(outcome.reported == 777_777)
        #expect(outcome.reportsWereGapFree)
    }

    @Test func aFileThatEndsEarlyIsAnOutdatedVersionAndKeepsItsPrefix() {
        let server = ScriptedServer(content: Self.content(500_000), behaviour: .endsAt(300_000))
        let (outcome, error) = Self.read(0..<500_000, from: server)
        #expect(error?.code == .versionNoLongerAvailable)
        #expect(outcome.reported <= 300_000)
        #expect(outcome.reportsWereGapFree)
        #expect(Array(outcome.bytes[0..<Int(outcome.reported)]) == Array(server.content[0..<Int(outcome.reported)]))
    }

    @Test(arguments: [
        ScriptedServer.Behaviour.longerThanAsked, .lengthsDisagree, .unknownID,
    ])
    func hostileRepliesAreRefused(_ behaviour: ScriptedServer.Behaviour) {
        let server = ScriptedServer(content: Self.content(300_000), behaviour: behaviour)
        let (outcome, error) = Self.read(0..<300_000, from: server)
        #expect(error?.code == .serverUnreachable, "\(String(describing: error))")
        #expect(outcome.reported == 0)
    }

    /// An FSTAT of the handle, as the check after a ranged read sends it.
    static func trailing(_ server: ScriptedServer) -> TrailingRequests {
        var packets = PacketWriter()
        let id = packets.append(SFTPChannel.Packet.fileStatus, id: server.nextID(), [ScriptedServer.handle])
        return TrailingRequests(packets: packets.bytes, ids: [id])
    }

    @Test func trailingRequestsGoWithTheLastReads() {
        // In order: answered after the last read, so the caller reads the reply.
        let inOrder = ScriptedServer(content: Self.content(300_000), behaviour: .inOrder)
        let first = Self.trailing(inOrder)
        let (outcome, error) = Self.read(0..<300_000, from: inOrder, trailing: first)
        #expect(error == nil)
        #expect(outcome.bytes == inOrder.content)
        #expect(first.sent && !first.readAfter)
        #expect(first.unanswered == first.ids)
        #expect(inOrder.outstanding.map(\.id) == first.ids, "only the trailing request is left to answer")

        // Newest first and short: its reply arrives among the reads and is kept; the rest of a
        // short reply went out after it.
        let reordered = ScriptedServer(content: Self.content(300_000), behaviour: .newestFirstAndShort)
        let second = Self.trailing(reordered)
        let (again, secondError) = Self.read(0..<300_000, from: reordered, trailing: second)
        #expect(secondError == nil)
        #expect(again.bytes == reordered.content)
        #expect(second.replies[second.ids[0]]?.type == SFTPChannel.Packet.status)
        #expect(second.unanswered.isEmpty && second.readAfter)

        // A read that fails drops the trailing reply that is still to come.
        let short = ScriptedServer(content: Self.content(300_000), behaviour: .endsAt(100_000))
        let third = Self.trailing(short)
        let (_, thirdError) = Self.read(0..<300_000, from: short, trailing: third)
        #expect(thirdError?.code == .versionNoLongerAvailable)
        #expect(third.ids.allSatisfy { short.forgotten.contains($0) || third.replies[$0] != nil })
    }

    @Test func aStatusReplyIsItsError() {
        let server = ScriptedServer(content: Self.content(200_000), behaviour: .status(3))
        let (_, error) = Self.read(0..<200_000, from: server)
        #expect(error?.code == .permissionDenied)
        #expect(error?.message.contains("/f") == true)
    }

    @Test func aStoppedReadLeavesItsRepliesToBeDroppedByTheNextOne() {
        let server = ScriptedServer(content: Self.content(600_000), behaviour: .inOrder)
        var replies = 0
        let (first, error) = Self.read(0..<300_000, from: server) {
            replies += 1
            return replies > 2
        }
        #expect(error == nil)
        #expect(first.reported > 0 && first.reported < 300_000)
        #expect(!server.forgotten.isEmpty)
        // The next read on the same channel skips the stale replies and gets its own.
        let (second, secondError) = Self.read(300_000..<600_000, from: server)
        #expect(secondError == nil)
        #expect(Array(second.bytes[300_000...]) == Array(server.content[300_000...]))
        #expect(second.reportsWereGapFree)
        #expect(server.forgotten.isEmpty)
    }
}
