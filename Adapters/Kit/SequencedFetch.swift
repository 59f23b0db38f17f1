import Foundation
import ProviderCore

/// A batch download of small files (``Backend/fetchContents(_:progress:)``) whose `GET`s go as
/// one sequence on one connection (``HTTPClient/sendSequence(_:cancellation:)``), with no
/// hand-off between threads per file. A file whose request needs more than one answer (a retry
/// after a failed connection, a `429` or `5xx`, a resumed transfer, a `416` of a destination that
/// held more than the file has now) is fetched alone afterwards, as a single download is.
/// The MediaAPI, S3 and WebDAV adapters share it.
package enum SequencedFetch {
    /// Fetches `requests` and returns each file's outcome in their order.
    /// - Parameters:
    ///   - prepare: the request of a file not resumed (offset 0) and what `finish` needs of it;
    ///     `nil` for a file to fetch alone.
    ///   - finish: the file a final reply brought, or the error it means (as the single
    ///     download would have thrown it).
    ///   - backend: whose single download (``Backend/fetchContents(for:version:to:offset:progress:)``)
    ///     fetches a file alone.
    package static func fetch<Context>(
        _ requests: [ContentRequest], progress: BatchProgressHandler?, client: HTTPClient, backend: some Backend,
        prepare: (ContentRequest, ProgressHandler?) async -> (HTTPRequest, Context)?,
        finish: (HTTPReply, Context, ContentRequest) async throws(FileProviderError) -> Item
    ) async -> [Result<Item, FileProviderError>] {
        func fileProgress(_ index: Int) -> ProgressHandler? {
            guard let progress else { return nil }
            return { completed, total in progress(index, completed, total) }
        }
        var results = [Result<Item, FileProviderError>?](repeating: nil, count: requests.count)
        var sequence: [(index: Int, request: HTTPRequest, context: Context)] = []
        for (index, wanted) in requests.enumerated() where wanted.offset <= 0 {
            if let (request, context) = await prepare(wanted, fileProgress(index)) { sequence.append((index, request, context)) }
        }
        let flag = CancellationFlag()
        let sent = sequence.map(\.request)
        let replies = (try? await withCancellationFlag(flag) { await client.sendSequence(sent, cancellation: flag) }) ?? []
        for (entry, reply) in zip(sequence, replies) {
            guard let reply, reply.status != 416 else { continue }
            do throws(FileProviderError) {
                results[entry.index] = .success(try await finish(reply, entry.context, requests[entry.index]))
            } catch {
                results[entry.index] = .failure(error)
            }
        }
        for (index, wanted) in requests.enumerated() where results[index] == nil {
            if Task.isCancelled {
                results[index] = .failure(FileProviderError(.cancelled, "cancelled"))
                continue
            }
            do throws(FileProviderError) {
                results[index] = .success(
                    try await backend.fetchContents(
                        for: wanted.identifier, version: wanted.version, to: wanted.destination, offset: wanted.offset,
                        progress: fileProgress(index)))
            } catch {
                results[index] = .failure(error)
            }
        }
        return results.map { $0 ?? .failure(FileProviderError(.cancelled, "cancelled")) }
    }
}
