import Foundation
import Hummingbird

/// Writes one line per request to standard error, `request GET /preview?path=…` (the method and
/// the URI as sent), before the request is handled: what `--verbose` promises, in a form tests
/// count (`MediaServer.requestCount(_:)`: how often a client asked an endpoint).
struct RequestLines<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        FileHandle.standardError.write(Data("request \(request.method.rawValue) \(request.uri)\n".utf8))
        return try await next(request, context)
    }
}
