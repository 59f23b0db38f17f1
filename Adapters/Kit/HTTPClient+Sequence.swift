import Foundation
import ProviderCore

extension HTTPClient {
    /// Sends `requests` one after another on one connection, in one job on its thread: the
    /// small files of a batch download, with no wait for a connection and no hand-off between
    /// threads per file (``send(_:cancellation:)`` has both for each request).
    ///
    /// Returns, in the order of `requests`, the reply to each request answered with a final
    /// status (any but `429` and a `5xx` other than `507`), whatever it is: check it as a reply of
    /// ``send(_:cancellation:)``. From the first request that was not (its connection failed,
    /// or the server answered `429` or `5xx`), the sequence stops and that request and those
    /// after it get `nil`, as do those not sent once `cancellation` is set or the task is
    /// cancelled: send each of them with ``send(_:cancellation:)``, which retries, resumes and
    /// throws. A `429` or `503` holds the client's other requests back as it does there.
    public func sendSequence(_ requests: [HTTPRequest], cancellation: CancellationFlag) async -> [HTTPReply?] {
        var replies = [HTTPReply?](repeating: nil, count: requests.count)
        if requests.isEmpty || cancellation.isCancelled || Task.isCancelled { return replies }
        let settings = self.settings
        let prepared = requests.map { request in
            (
                request: request, url: settings.baseURL + request.endpoint + Self.encodeQuery(request.query),
                sinks: TransferSinks(for: request)
            )
        }
        await pacer.wait()
        let connection = await pool.acquire()
        if pacer.isHolding {
            pool.release(connection)
            return replies
        }
        let outcomes =
            (try? await connection.executor.run { () -> [(Attempt, Double)] in
                var outcomes: [(Attempt, Double)] = []
                for item in prepared {
                    if cancellation.isCancelled { break }
                    let started = DispatchTime.now().uptimeNanoseconds
                    let outcome = connection.perform(
                        item.request, url: item.url, settings: settings, resumeAt: item.request.sink.resumeOffset,
                        cancellation: cancellation, sinks: item.sinks)
                    outcomes.append((outcome, RequestLogText.seconds(since: started)))
                    guard case .reply(let head, _, _) = outcome, !Self.isRetryable(head.status) else { break }
                }
                return outcomes
            }) ?? []
        pool.release(connection)
        for (index, (outcome, seconds)) in outcomes.enumerated() {
            replies[index] = finalReply(outcome, of: prepared[index].request, url: prepared[index].url, seconds: seconds)
        }
        return replies
    }

    /// The reply to a request sent in one job with others, on its only attempt: logged, and a
    /// `429` or `503` holds the client's other requests back; `nil` when it needs a retry (its
    /// connection failed, `429`, a `5xx` but `507`), which a send of its own makes.
    func finalReply(_ outcome: Attempt, of request: HTTPRequest, url: String, seconds: Double) -> HTTPReply? {
        HTTPRequestLog.log(request, url: url, settings: settings, outcome: outcome, seconds: seconds, attempt: 1)
        guard case .reply(let head, let body, let length) = outcome else { return nil }
        if head.status == 429 || head.status == 503 {
            pacer.hold(seconds: backoffDelay(attempt: 1, retryAfter: head["retry-after"]))
        }
        guard !Self.isRetryable(head.status) else { return nil }
        var reply = HTTPReply(head: head, body: body, fileLength: length, attempts: 1, what: "\(request.method) \(request.endpoint)")
        reply.authenticationHint = settings.authenticationHint
        return reply
    }
}
