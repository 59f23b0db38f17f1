import CLibCrypto
import ProviderCore

/// An OpenSSL `EVP_MD_CTX`, freed with the digest that owns it. Used by one thread at a time.
private final class DigestContext: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ type: OpaquePointer?) {
        guard let pointer = EVP_MD_CTX_new() else { fatalError("libcrypto could not allocate a digest context") }
        self.pointer = pointer
        EVP_DigestInit_ex(pointer, type, nil)
    }

    deinit { EVP_MD_CTX_free(pointer) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        if bytes.isEmpty { return }
        EVP_DigestUpdate(pointer, bytes.baseAddress, bytes.count)
    }

    func finish(count: Int) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: count)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(pointer, &digest, &length)
        return digest
    }
}

/// SHA-256 from OpenSSL's libcrypto (already loaded by libcurl), as a `ContentDigest`: with
/// the CPU's SHA extensions 2.1 GB/s here (`openssl speed -evp sha256`). ProviderCore's
/// `SHA256Digest` (Swift, a block at a time) is for small inputs: with its `MD5Digest` it
/// cost an S3 upload of 1 GiB 5.5 CPU-s more than these two (Docs/Performance.md, S3). What
/// adapters hash the bodies they send with (S3's `x-amz-checksum-sha256` of a file or a part).
/// A copy shares its context: hash with one value, on one thread at a time.
public struct LibCryptoSHA256: ContentDigest {
    private let context = DigestContext(EVP_sha256())

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) { context.update(bytes) }

    /// The digest's 32 bytes.
    public mutating func finishBytes() -> [UInt8] { context.finish(count: 32) }
}

/// MD5 from OpenSSL's libcrypto, as a `ContentDigest`: 0.88 GB/s here (`openssl speed -evp
/// md5`). What adapters compute `Content-MD5` and check ETags with. A copy shares its context:
/// hash with one value, on one thread at a time.
public struct LibCryptoMD5: ContentDigest {
    private let context = DigestContext(EVP_md5())

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) { context.update(bytes) }

    /// The digest's 16 bytes.
    public mutating func finishBytes() -> [UInt8] { context.finish(count: 16) }
}
