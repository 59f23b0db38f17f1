import AdapterKit
import Foundation
import ProviderCore

extension SFTPBackend {
    /// Fetches a batch of files on one connection, in three pipelined round trips for the
    /// whole batch where the server allows large reads (``PipelinedFetch``) instead of six per
    /// file, each file as ``fetchContents(for:version:to:offset:progress:)`` would: the same
    /// checks, the same errors. Resumed transfers (an offset) and servers without
    /// `limits@openssh.com` go one by one on the same connection.
    ///
    /// Each outcome is what ``fetchContents(for:version:to:offset:progress:)`` throws or
    /// returns for that file; once the task is cancelled, the files not started get
    /// `cancelled`. A connection that breaks fails the files not finished with
    /// `serverUnreachable`.
    public func fetchContents(_ requests: [ContentRequest], progress: BatchProgressHandler?) async -> [Result<
        Item, FileProviderError
    >] {
        if requests.isEmpty { return [] }
        let flag = CancellationFlag()
        // The engine's sinks for the bytes written (task-local: taken here).
        let sinks = requests.map { ContentSink.for($0.destination) }
        let started = DispatchTime.now().uptimeNanoseconds
        let results: [Result<Item, FileProviderError>]
        do {
            results = try await withConnection(flag) { connection throws(FileProviderError) in
                try self.fetchBatch(requests, sinks: sinks, progress: progress, cancellation: flag, on: connection)
            }
        } catch {
            results = requests.map { _ in .failure(error) }
        }
        if SFTPRequestLog.isEnabled {
            let seconds = RequestLogText.seconds(since: started)
            for (request, result) in zip(requests, results) {
                let path = (try? SFTPPath(request.identifier))?.display ?? request.identifier.rawValue
                switch result {
                case .success(let item):
                    SFTPRequestLog.log(
                        "GET", path, endpoint: pool.target.name, seconds: seconds, error: nil, bytes: item.size)
                case .failure(let error):
                    SFTPRequestLog.log("GET", path, endpoint: pool.target.name, seconds: seconds, error: error, bytes: nil)
                }
            }
        }
        return results
    }

    /// The batch on `connection`: pipelined where it can be, else one file after another.
    /// - Throws: `serverUnreachable` when the connection broke (the pool runs the batch once
    ///   more on a new connection when nothing had reached the server).
    private func fetchBatch(
        _ requests: [ContentRequest], sinks: [ContentSink?], progress: BatchProgressHandler?,
        cancellation: CancellationFlag, on connection: SFTPConnection
    ) throws(FileProviderError) -> [Result<Item, FileProviderError>] {
        var results = [Result<Item, FileProviderError>?](repeating: nil, count: requests.count)
        var pipelined: [PipelinedFetch.File] = []
        var oneByOne: [Int] = []
        let channel = try connection.extensionChannel()
        let chunk = try channel?.transferLimits(on: connection)?.read
        for (index, request) in requests.enumerated() {
            do throws(FileProviderError) {
                let path = try SFTPPath(request.identifier)
                if path.isRoot { throw FileProviderError(.invalidArgument, "the root is a folder; it has no contents") }
                if channel == nil || chunk == nil || request.offset > 0 {
                    oneByOne.append(index)
                } else {
                    pipelined.append(
                        PipelinedFetch.File(
                            index: index, path: path, remote: path.remote(under: connection.rootPath),
                            version: request.version, destination: request.destination.path, sink: sinks[index]))
                }
            } catch {
                results[index] = .failure(error)
            }
        }
        if let channel, let chunk, !pipelined.isEmpty {
            let fetch = PipelinedFetch(
                backend: self, channel: channel, connection: connection, chunk: chunk, cancellation: cancellation,
                progress: progress)
            for (index, outcome) in try fetch.run(pipelined) {
                switch outcome {
                case .done(let item): results[index] = .success(item)
                case .failed(let error): results[index] = .failure(error)
                // A short reply: the rest is read the ordinary way.
                case .incomplete: oneByOne.append(index)
                }
            }
        }
        for index in oneByOne {
            let request = requests[index]
            do throws(FileProviderError) {
                try cancellation.check()
                var fileProgress: ProgressHandler?
                if let progress { fileProgress = { completed, total in progress(index, completed, total) } }
                results[index] = .success(
                    try download(
                        try SFTPPath(request.identifier), version: request.version, to: request.destination.path,
                        offset: request.offset, progress: fileProgress, cancellation: cancellation, sink: sinks[index],
                        on: connection))
            } catch {
                if connection.isDead && error.code == .serverUnreachable { throw error }
                results[index] = .failure(error)
            }
        }
        return results.map { $0 ?? .failure(FileProviderError(.cancelled, "cancelled")) }
    }
}
