import Foundation
import Testing

@testable import AdapterKit

/// The signature computed for the requests libcurl 7.88 signs wrong matches AWS's published
/// example (the S3 developer guide's `GET /?max-keys=2&prefix=J` of `examplebucket`), and only
/// requests with a header name that is another's prefix are signed here.
@Suite struct AWSRequestSignerTests {
    @Test func theSignatureIsAWSsOwnExample() throws {
        let signer = AWSRequestSigner(
            signature: AWSSignature(
                region: "us-east-1", accessKey: "AKIAIOSFODNN7EXAMPLE", secretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"))
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        let lines = try #require(
            signer.headers(
                method: "GET", url: "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J",
                lines: ["x-amz-content-sha256: \(empty)"], payloadHash: empty, at: Date(timeIntervalSince1970: 1_369_353_600)))
        #expect(lines.contains("x-amz-date: 20130524T000000Z"))
        #expect(
            lines.contains(
                "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
            ), "\(lines)")
    }

    @Test func onlyNamesThatArePrefixesOfOthersAreSignedHere() {
        #expect(AWSRequestSigner.libcurlMisorders(["x-amz-copy-source: /b/k", "x-amz-copy-source-range: bytes=0-9"]))
        #expect(AWSRequestSigner.libcurlMisorders(["X-Amz-Copy-Source: /b/k", "x-amz-copy-source-if-match: \"e\""]))
        #expect(!AWSRequestSigner.libcurlMisorders(["x-amz-copy-source: /b/k", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]))
        #expect(!AWSRequestSigner.libcurlMisorders(["Content-MD5: x", "Content-Type: y"]))
    }

    @Test func theHostKeepsAPortThatIsNotTheDefault() throws {
        let parts = try #require(AWSRequestSigner.URLParts("http://127.0.0.1:8333/bucket/a%20b?partNumber=1&uploadId=x"))
        #expect(parts.host == "127.0.0.1:8333")
        #expect(parts.path == "/bucket/a%20b")
        #expect(parts.query == "partNumber=1&uploadId=x")
        #expect(AWSRequestSigner.URLParts("https://s3.amazonaws.com:443/")?.host == "s3.amazonaws.com")
        #expect(AWSRequestSigner.URLParts("https://s3.amazonaws.com")?.path == "/")
    }
}
