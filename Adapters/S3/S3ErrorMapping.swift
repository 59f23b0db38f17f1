import AdapterKit
import Foundation
import ProviderCore

/// What S3's error replies mean, with Apple's names: the XML `Code` decides where there is
/// one, the status otherwise.
enum S3ErrorMapping {
    /// Throws the error a reply that is not a success means.
    ///
    /// - Throws: `notAuthenticated` for `403` and the codes of a refused signature or key
    ///   (`AccessDenied`, `InvalidAccessKeyId`, `SignatureDoesNotMatch`, `ExpiredToken`,
    ///   `RequestTimeTooSkewed`: the clock is off), with the reason; `noSuchItem` for
    ///   `NoSuchKey`, `NoSuchBucket` (the message says to check `--bucket`) and `404`;
    ///   `versionOutOfDate` for `412` (`PreconditionFailed`); `serverUnreachable` for `SlowDown`,
    ///   `503` and other `5xx` after the client's retries; `permissionDenied` for an archived
    ///   object (`InvalidObjectState`: restore it first); `insufficientQuota` for
    ///   `QuotaExceeded`, `EntityTooLarge`, `413` and `507`; `corruptData` for `BadDigest` (the
    ///   upload was damaged on the way); what ``HTTPReply/check()`` throws for anything else.
    static func check(_ reply: HTTPReply, bucket: String) throws(FileProviderError) {
        if reply.isSuccess { return }
        let body = S3ErrorBody.parse(reply.body)
        let code = body.code ?? ""
        let reason = [body.code, body.message].compactMap { $0 }.joined(separator: ": ")
        let said = reason.isEmpty ? "the server answered \(reply.status)" : "the server answered \(reply.status) (\(reason))"
        let text = "\(reply.what): \(said)"
        switch code {
        case "NoSuchBucket":
            throw FileProviderError(
                .noSuchItem, "\(text); the bucket '\(bucket)' does not exist: check --bucket (and --endpoint, --region)")
        case "NoSuchKey": throw FileProviderError(.noSuchItem, text)
        case "RequestTimeTooSkewed":
            throw FileProviderError(.notAuthenticated, "\(text); this machine's clock is off: set it right (timedatectl, NTP)")
        case "ExpiredToken", "TokenRefreshRequired":
            throw FileProviderError(.notAuthenticated, "\(text); the session token has expired: get new credentials")
        case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "AuthorizationHeaderMalformed":
            throw FileProviderError(.notAuthenticated, "\(text); \(reply.authenticationHint)")
        case "InvalidObjectState":
            throw FileProviderError(
                .permissionDenied, "\(text); the object is archived (GLACIER or DEEP_ARCHIVE): restore it first (aws s3api restore-object)")
        case "SlowDown", "ServiceUnavailable", "InternalError":
            throw FileProviderError(.serverUnreachable, "\(text) after \(reply.attempts) attempt\(reply.attempts == 1 ? "" : "s")")
        case "QuotaExceeded", "EntityTooLarge":
            throw FileProviderError(.insufficientQuota, text)
        case "BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch":
            throw FileProviderError(.corruptData, "\(text); the upload was damaged on the way")
        case "PreconditionFailed":
            throw FileProviderError(.versionOutOfDate, text)
        default: break
        }
        switch reply.status {
        case 401, 403: throw FileProviderError(.notAuthenticated, "\(text); \(reply.authenticationHint)")
        case 404: throw FileProviderError(.noSuchItem, text)
        case 412: throw FileProviderError(.versionOutOfDate, text)
        case 413, 507: throw FileProviderError(.insufficientQuota, text)
        case 429, 500...599:
            throw FileProviderError(.serverUnreachable, "\(text) after \(reply.attempts) attempt\(reply.attempts == 1 ? "" : "s")")
        default: try reply.check()
        }
    }
}
