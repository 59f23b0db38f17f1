import Foundation
import ProviderCore
import Testing

@testable import SFTPAdapter

/// Plays the server's part for ``RangeReader``: answers the READ requests it was sent from
/// `content`, in the order and sizes its behaviour says.
final class ScriptedServer: SFTPStream {
    enum Behaviour {
        /// Every read in full, oldest first (what OpenSSH does).
        case inOrder
        /// Newest request first, and at most half of what was asked each time.
        case newestFirstAndShort
        /// The file is only this long: reads at or past it get SSH_FX_EOF.
        case endsAt(Int)
        /// One byte more than asked.
        case longerThanAsked
        /// The reply's data length disagrees with the packet's length.
        case lengthsDisagree
        /// The reply carries an id that was never sent.
        case unknownID
        /// A status with this code instead of data.
        case status(UInt32)
    }

    let content: [UInt8]
    var behaviour: Behaviour
    /// Requests sent and not answered yet.
    private(set) var outstanding: [(id: UInt32, offset: Int64, length: Int)] = []
    /// The most requests that were outstanding at once.
    private(set) var mostOutstanding = 0
    private(set) var forgotten: Set<UInt32> = []
    private var lastID: UInt32 = 0
    private var output: [UInt8] = []

    init(content: [UInt8], behaviour: Behaviour) {
        self.content = content
        self.behaviour = behaviour
    }

    func nextID() -> UInt32 {
        lastID += 1
        return lastID
    }

    func send(_ packet: [UInt8]) throws(FileProviderError) {
        var reader = SFTPReader(packet)
        while !reader.isAtEnd {
            _ = try reader.u32()
            #expect(try reader.byte() == SFTPChannel.Packet.read)
            let id = try reader.u32()
            #expect(try reader.string() == Self.handle)
            let offset = Int64(try reader.u64())
            let length = Int(try reader.u32())
            outstanding.append((id, offset, length))
        }
        mostOutstanding = max(mostOutstanding, outstanding.count)
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(FileProviderError) {
        while output.count < buffer.count {
            guard !outstanding.isEmpty else {
                throw FileProviderError(.serverUnreachable, "the reader waits for a reply to nothing")
            }
            answer()
        }
        buffer.copyBytes(from: output[0..<buffer.count])
        output.removeFirst(buffer.count)
    }

    func forget(_ ids: [UInt32]) { forgotten.formUnion(ids) }

    func isForgotten(_ id: UInt32) -> Bool { forgotten.remove(id) != nil }

    static let handle: [UInt8] = Array("h1".utf8)

    private func answer() {
        var request: (id: UInt32, offset: Int64, length: Int)
        if case .newestFirstAndShort = behaviour {
            request = outstanding.removeLast()
        } else {
            request = outstanding.removeFirst()
        }
        var end = content.count
        if case .endsAt(let length) = behaviour { end = length }
        let offset = Int(request.offset)
        if case .status(let code) = behaviour {
            return reply(SFTPChannel.Packet.status, request.id, u32(code) + u32(0) + u32(0))
        }
        guard offset < end else {
            return reply(SFTPChannel.Packet.status, request.id, u32(SFTPChannel.endOfFile) + u32(0) + u32(0))
        }
        var count = min(request.length, end - offset)
        if case .newestFirstAndShort = behaviour, count > 1 { count /= 2 }
        var data = Array(content[offset..<min(content.count, offset + count)])
        switch behaviour {
        case .longerThanAsked:
            data.append(0)
        case .lengthsDisagree:
            // Says one byte more than it sends: the packet length tells.
            return reply(SFTPChannel.Packet.data, request.id, u32(UInt32(data.count + 1)) + data)
        case .unknownID:
            request.id += 1000
        default: break
        }
        reply(SFTPChannel.Packet.data, request.id, u32(UInt32(data.count)) + data)
    }

    private func reply(_ type: UInt8, _ id: UInt32, _ body: [UInt8]) {
        output += u32(UInt32(5 + body.count)) + [type] + u32(id) + body
    }

    private func u32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }
}

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
        _ range: Range<Int64>, from server: ScriptedServer, stop: @escaping () -> Bool = { false }
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
                })
        } catch {
            return (outcome, error)
        }
        return (outcome, nil)
    }

    @Test func wholeRepliesInOrderGiveTheRangeWithFourReadsInFlight() {
        let server = ScriptedServer(content: Self.content(1_000_123), behaviour: .inOrder)
        let range: Range<Int64> = 70_000..<1_000_123
        let (outcome, error) = Self.read(range, from: server)
        #expect(error == nil)
        #expect(Array(outcome.bytes[70_000...]) == Array(server.content[70_000...]))
        #expect(!outcome.written[0..<70_000].contains(true), "nothing before the range is written")
        #expect(outcome.reported == range.upperBound - range.lowerBound)
        #expect(outcome.reportsWereGapFree)
        #expect(server.mostOutstanding == SFTPChannel.readsInFlight)
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
