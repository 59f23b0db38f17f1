import ProviderCore

/// A download whose bytes do not have the hash the store gave for them: never placed, fetched
/// once more, then reported (`corruptData`, the record's error that `why` shows, a warning in
/// the log).
enum HashMismatch {
    /// The words that tell this `corruptData` from the others.
    static let phrase = "does not match the store's hash"

    /// The error for a download of `path` that hashed to `found` where the store said `expected`.
    static func error(path: String, algorithm: String, found: String, expected: String) -> FileProviderError {
        FileProviderError(
            .corruptData,
            "the download of \(path) \(phrase) (\(algorithm) \(found), the store says \(expected)); nothing was placed: the store's copy may be damaged, try again or check it there"
        )
    }

    /// Whether `error` is a download that did not match the store's hash: the engine's check
    /// (``error(path:algorithm:found:expected:)``), or an adapter's of a hash the store sent in
    /// a reply's header (S3's `x-amz-checksum-sha256` and MD5 ETag, WebDAV's `OC-Checksum`),
    /// which say `the download of … does not match …` too.
    static func isMismatch(_ error: FileProviderError) -> Bool {
        error.code == .corruptData && error.message.hasPrefix("the download of ") && error.message.contains(" does not match ")
    }
}
