import CLibCrypto

/// OpenSSL's libcrypto as the process shares it: the engine's SHA-256 (``FastSHA256``),
/// libssh2's ciphers and libcurl's TLS all run on it.
public enum CryptoLibrary {
    /// Initializes libcrypto so that it is never torn down while the process exits. Call it
    /// first in `main`, before anything uses libcrypto (libssh2, libcurl, the engine's hashes):
    /// only libcrypto's first initialization decides.
    ///
    /// By default libcrypto frees its locks and tables in an `atexit` handler. `exit` runs that
    /// handler while other threads may still be in a transfer (an SFTP connection's thread
    /// decrypting a packet, a hash of a download): their next call into libcrypto then took a
    /// freed lock, and `serve` died of a segmentation fault as it stopped (exit status 11
    /// instead of 0). The system reclaims that memory anyway when the process ends.
    ///
    /// Returns `false` when libcrypto could not be initialized (it then initializes itself at
    /// first use, as before).
    @discardableResult
    public static func keepUntilExit() -> Bool {
        OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil) == 1
    }
}
