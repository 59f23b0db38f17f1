import Foundation
import ProviderCore

/// Requests signed with AWS Signature Version 4 by libcurl itself (`CURLOPT_AWS_SIGV4`), for
/// S3 and the stores that speak its protocol.
///
/// The access key and secret key are libcurl's user name and password; a session token goes in
/// an `x-amz-security-token` header. A body streamed from a file is signed as
/// `UNSIGNED-PAYLOAD` (`x-amz-content-sha256`), so it is never read twice; a body in memory
/// and an empty one are hashed here and the hash sent as `x-amz-content-sha256` (libcurl 7.88
/// signs the hash but does not send it). libcurl 7.88 takes the query string as it is into
/// the signature: the caller sends its fields sorted by name and fully percent-encoded
/// (``HTTPClient/canonicalQuery(_:)``).
public struct AWSSignature: Sendable {
    /// The region the requests are signed for (`us-east-1`).
    public var region: String
    /// The service (`s3`).
    public var service: String
    public var accessKey: String
    public var secretKey: String
    /// A temporary credential's session token, or `nil`.
    public var sessionToken: String?

    public init(region: String, service: String = "s3", accessKey: String, secretKey: String, sessionToken: String? = nil) {
        self.region = region
        self.service = service
        self.accessKey = accessKey
        self.secretKey = secretKey
        self.sessionToken = sessionToken
    }

    /// libcurl's provider string: `aws:amz:REGION:SERVICE`.
    var provider: String { "aws:amz:\(region):\(service)" }

    /// The `x-amz-content-sha256` of a body in memory: its SHA-256 in lower-case hex.
    static func payloadHash(_ body: Data) -> String {
        var digest = SHA256Digest()
        body.withUnsafeBytes { digest.update($0) }
        return digest.finish()
    }
}

extension HTTPClient {
    /// A query string as AWS Signature Version 4 signs it: `?` and the fields sorted by name
    /// (then value), names and values percent-encoded except for unreserved characters (`/` is
    /// `%2F`); empty for no fields. An endpoint built with it needs no `query`.
    public static func canonicalQuery(_ fields: [(String, String)]) -> String {
        if fields.isEmpty { return "" }
        let encoded = fields.map { (percentEncode($0.0, keepSlash: false), percentEncode($0.1, keepSlash: false)) }
        let sorted = encoded.sorted { $0.0 == $1.0 ? $0.1 < $1.1 : $0.0 < $1.0 }
        return "?" + sorted.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }
}
