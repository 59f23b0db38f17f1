import Foundation
import ProviderCore

extension HTTPRequest {
    /// Sends this `GET` of a whole file, resumed at its sink's offset
    /// (``ReplySink/file(path:offset:)``), with `send`. A `416` means the offset is past the
    /// end (the file is shorter now): the request is sent again for the whole file, from byte
    /// 0. Returns the last reply, for the caller to check. MediaAPI and WebDAV share it.
    ///
    /// - Throws: what `send` throws.
    package func sendResuming(with send: (HTTPRequest) async throws(FileProviderError) -> HTTPReply) async throws(FileProviderError)
        -> HTTPReply
    {
        let reply = try await send(self)
        guard reply.status == 416, case .file(let path, _) = sink else { return reply }
        var whole = self
        whole.sink = .file(path: path, offset: 0)
        return try await send(whole)
    }
}
