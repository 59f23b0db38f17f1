import Foundation
import ProviderCore

/// AWS Signature Version 4 computed here, for the requests libcurl 7.88 signs wrong: it sorts
/// the signed headers as whole `name:value` lines, so a header whose name is another's prefix
/// (`x-amz-copy-source` and `x-amz-copy-source-range`, S3's `UploadPartCopy`) comes after it
/// instead of before, and the store refuses the signature (SignatureDoesNotMatch; curl sorts
/// by name since 8.x). Every other request is signed by libcurl.
struct AWSRequestSigner: Sendable {
    let signature: AWSSignature

    /// Whether libcurl 7.88 would misorder these header lines: two `x-amz-` names, one a
    /// prefix of the other.
    static func libcurlMisorders(_ lines: [String]) -> Bool {
        let names = lines.compactMap { line -> String? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            return name.hasPrefix("x-amz-") ? name : nil
        }
        return names.contains { name in names.contains { $0 != name && $0.hasPrefix(name) } }
    }

    /// The header lines to add to a request to `url` with `method`, headers `lines` and a body
    /// whose `x-amz-content-sha256` is `payloadHash`: `x-amz-date`, `Authorization` and, when
    /// `lines` lack it, `x-amz-content-sha256`. Signed: `host` and the `x-amz-` headers. `nil`
    /// when the URL has no host.
    func headers(method: String, url: String, lines: [String], payloadHash: String, at date: Date = Date()) -> [String]? {
        guard let parts = URLParts(url) else { return nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let stamp = formatter.string(from: date)
        let day = String(stamp.prefix(8))
        var signed: [(String, String)] = [("host", parts.host), ("x-amz-date", stamp)]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            guard name.hasPrefix("x-amz-") else { continue }
            let value = line[line.index(after: colon)...].split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
            signed.append((name, value))
        }
        if !signed.contains(where: { $0.0 == "x-amz-content-sha256" }) { signed.append(("x-amz-content-sha256", payloadHash)) }
        signed.sort { $0.0 < $1.0 }
        let names = signed.map(\.0).joined(separator: ";")
        let canonical = [
            method, parts.path, parts.query, signed.map { "\($0.0):\($0.1)\n" }.joined(), names, payloadHash,
        ].joined(separator: "\n")
        let scope = "\(day)/\(signature.region)/\(signature.service)/aws4_request"
        let toSign = "AWS4-HMAC-SHA256\n\(stamp)\n\(scope)\n\(Data(Self.sha256(Array(canonical.utf8))).hexString)"
        var key = Self.hmac(Array("AWS4\(signature.secretKey)".utf8), Array(day.utf8))
        for part in [signature.region, signature.service, "aws4_request"] { key = Self.hmac(key, Array(part.utf8)) }
        let proof = Data(Self.hmac(key, Array(toSign.utf8))).hexString
        var result = [
            "x-amz-date: \(stamp)",
            "Authorization: AWS4-HMAC-SHA256 Credential=\(signature.accessKey)/\(scope), SignedHeaders=\(names), Signature=\(proof)",
        ]
        if !lines.contains(where: { $0.lowercased().hasPrefix("x-amz-content-sha256:") }) {
            result.append("x-amz-content-sha256: \(payloadHash)")
        }
        return result
    }

    /// The host (with a port that is not the scheme's default), the path and the query of a
    /// URL exactly as they are sent.
    struct URLParts {
        var host: String
        var path: String
        var query: String

        init?(_ url: String) {
            guard let schemeEnd = url.range(of: "://") else { return nil }
            let rest = url[schemeEnd.upperBound...]
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            var host = String(rest[..<authorityEnd])
            if let at = host.lastIndex(of: "@") { host = String(host[host.index(after: at)...]) }
            let scheme = url[..<schemeEnd.lowerBound].lowercased()
            if (scheme == "http" && host.hasSuffix(":80")) || (scheme == "https" && host.hasSuffix(":443")) {
                host = String(host[..<host.lastIndex(of: ":")!])
            }
            guard !host.isEmpty else { return nil }
            self.host = host
            let target = rest[authorityEnd...]
            let queryStart = target.firstIndex(of: "?") ?? target.endIndex
            path = target[..<queryStart].isEmpty ? "/" : String(target[..<queryStart])
            query = queryStart < target.endIndex ? String(target[target.index(after: queryStart)...]) : ""
        }
    }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = SHA256Digest()
        bytes.withUnsafeBytes { digest.update($0) }
        return digest.finishBytes()
    }

    /// HMAC-SHA256 (RFC 2104).
    static func hmac(_ key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var block = key.count > 64 ? sha256(key) : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        let inner = sha256(block.map { $0 ^ 0x36 } + message)
        return sha256(block.map { $0 ^ 0x5c } + inner)
    }
}
