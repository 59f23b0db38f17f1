import Foundation
import ProviderCore

/// A reply after retries.
public struct HTTPReply: Sendable {
    public var head: ReplyHead
    /// The body of a memory sink, or the start of an error reply's body.
    public var body: Data
    /// The length of the sink file after a file download.
    public var fileLength: Int64
    /// How many attempts it took.
    public var attempts: Int
    /// What was asked, for messages.
    public var what: String
    /// Said after a `401`/`403`: which option gives the credentials.
    public var authenticationHint: String = "check the credentials"

    public var status: Int { head.status }
    public var isSuccess: Bool { (200..<300).contains(head.status) }

    /// The server's error text: the `error` field of a JSON body, else the body as text.
    public var errorText: String {
        if let reply = try? JSONDecoder().decode(JSONErrorBody.self, from: body), let text = reply.error ?? reply.message {
            return text
        }
        let text = String(decoding: body.prefix(500), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "no details" : text
    }

    /// Throws the error a non-2xx status means: 400 `invalidArgument`; 401/403
    /// `notAuthenticated`; 404 `noSuchItem`; 409 `filenameCollision`; 412 `versionOutOfDate`;
    /// 413 `insufficientQuota`; 429 and 5xx (after retries) `serverUnreachable`; 507
    /// `insufficientQuota`; anything else `corruptData`.
    public func check() throws(FileProviderError) {
        if isSuccess { return }
        let text = "\(what): the server answered \(status) (\(errorText))"
        switch status {
        case 400: throw FileProviderError(.invalidArgument, text)
        case 401, 403:
            throw FileProviderError(.notAuthenticated, "\(text); \(authenticationHint)")
        case 404: throw FileProviderError(.noSuchItem, text)
        case 409: throw FileProviderError(.filenameCollision, text)
        case 412: throw FileProviderError(.versionOutOfDate, text)
        case 413, 507: throw FileProviderError(.insufficientQuota, text)
        case 429, 500...599:
            throw FileProviderError(.serverUnreachable, "\(text) after \(attempts) attempt\(attempts == 1 ? "" : "s")")
        default: throw FileProviderError(.corruptData, "\(text), which was not expected")
        }
    }

    /// Decodes a JSON body.
    /// - Throws: `corruptData` when it is not the JSON expected.
    public func decode<T: Decodable>(_ type: T.Type) throws(FileProviderError) -> T {
        do {
            return try JSONDecoder().decode(type, from: body)
        } catch {
            throw FileProviderError(.corruptData, "\(what): the reply is not the JSON expected (\(error))")
        }
    }
}

/// `{"error": …}` or `{"message": …}`, the error bodies of JSON APIs.
private struct JSONErrorBody: Decodable {
    var error: String?
    var message: String?
}
