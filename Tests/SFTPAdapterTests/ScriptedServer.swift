import Foundation
import ProviderCore
import Testing

@testable import SFTPAdapter

/// Plays the server's part for ``RangeReader`` and ``RangeWriter``: answers the READ requests
/// it was sent from `content`, in the order and sizes its behaviour says, and keeps what WRITE
/// requests carried (answering each with a status). An FSTAT (a trailing request) is answered
/// with an OK status, in its turn.
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
    /// What WRITE requests carried, at their offsets.
    private(set) var received: [UInt8]
    private var lastID: UInt32 = 0
    private var output: [UInt8] = []

    init(content: [UInt8], behaviour: Behaviour) {
        self.content = content
        self.behaviour = behaviour
        received = [UInt8](repeating: 0, count: content.count)
    }

    func nextID() -> UInt32 {
        lastID += 1
        return lastID
    }

    func send(_ packet: [UInt8]) throws(FileProviderError) {
        var reader = SFTPReader(packet)
        while !reader.isAtEnd {
            _ = try reader.u32()
            let type = try reader.byte()
            let id = try reader.u32()
            #expect(try reader.string() == Self.handle)
            if type == SFTPChannel.Packet.fileStatus {
                outstanding.append((id, -1, 0))
                continue
            }
            let offset = Int64(try reader.u64())
            if type == SFTPChannel.Packet.write {
                writing = true
                let data = try reader.string()
                if Int(offset) + data.count <= received.count {
                    received.replaceSubrange(Int(offset)..<(Int(offset) + data.count), with: data)
                } else {
                    Issue.record("a write of \(data.count) bytes at \(offset) goes past \(received.count)")
                }
                outstanding.append((id, offset, data.count))
            } else {
                #expect(type == SFTPChannel.Packet.read)
                outstanding.append((id, offset, Int(try reader.u32())))
            }
        }
        mostOutstanding = max(mostOutstanding, outstanding.count)
    }

    func send(_ bytes: UnsafeRawBufferPointer) throws(FileProviderError) { try send(Array(bytes)) }

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
    /// Whether the requests are writes (answered with a status) rather than reads.
    private(set) var writing = false

    private func answer() {
        var request: (id: UInt32, offset: Int64, length: Int)
        if case .newestFirstAndShort = behaviour {
            request = outstanding.removeLast()
        } else {
            request = outstanding.removeFirst()
        }
        if request.offset == -1 {
            return reply(SFTPChannel.Packet.status, request.id, u32(0) + u32(0) + u32(0))
        }
        if writing {
            var code: UInt32 = 0
            if case .status(let failure) = behaviour { code = failure }
            if case .unknownID = behaviour { request.id += 1000 }
            return reply(SFTPChannel.Packet.status, request.id, u32(code) + u32(0) + u32(0))
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
