import CLibSSH2
import Foundation
import ProviderCore

/// Maps SFTP status codes to errors; separate so it can be tested without a server.
enum SFTPStatus {
    /// The error for an SFTP status code after `operation` on `path`.
    static func error(_ status: UInt, operation: String, path: String) -> FileProviderError {
        let text = "\(operation) \(path)"
        switch status {
        case UInt(LIBSSH2_FX_NO_SUCH_FILE), UInt(LIBSSH2_FX_NO_SUCH_PATH):
            return FileProviderError(.noSuchItem, "\(text): no such file")
        case UInt(LIBSSH2_FX_PERMISSION_DENIED), UInt(LIBSSH2_FX_WRITE_PROTECT):
            return FileProviderError(.permissionDenied, "\(text): permission denied by the server")
        case UInt(LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM), UInt(LIBSSH2_FX_QUOTA_EXCEEDED):
            return FileProviderError(.insufficientQuota, "\(text): the server is out of space")
        case UInt(LIBSSH2_FX_FILE_ALREADY_EXISTS):
            return FileProviderError(.filenameCollision, "\(text): it already exists")
        case UInt(LIBSSH2_FX_DIR_NOT_EMPTY):
            return FileProviderError(.directoryNotEmpty, "\(text): the folder is not empty")
        case UInt(LIBSSH2_FX_NOT_A_DIRECTORY):
            return FileProviderError(.noSuchItem, "\(text): a component is not a folder")
        case UInt(LIBSSH2_FX_INVALID_FILENAME):
            return FileProviderError(.invalidFilename, "\(text): the server refused the name")
        case UInt(LIBSSH2_FX_OP_UNSUPPORTED):
            return FileProviderError(.notSupported, "\(text): the server does not support this")
        case UInt(LIBSSH2_FX_NO_CONNECTION), UInt(LIBSSH2_FX_CONNECTION_LOST):
            return FileProviderError(.serverUnreachable, "\(text): the connection was lost")
        case UInt(LIBSSH2_FX_BAD_MESSAGE):
            return FileProviderError(.invalidArgument, "\(text): the server rejected the request")
        default:
            return FileProviderError(
                .cannotSynchronize, "\(text): the server reported a failure (SFTP status \(status))")
        }
    }
}
