import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// TCP ports on 127.0.0.1 for the servers tests start.
///
/// The kernel's choice for a port-0 bind is free at that moment only: two servers started by
/// parallel tests could get the same number, and the second's readiness check would then talk
/// to the first (an SFTP test saw a "changed" host key that way). A port handed out once is
/// never handed out again by this process.
public enum FreePort {
    private static let handedOut = Mutex<Set<Int>>([])

    /// A port that was free a moment ago and that no earlier call returned.
    ///
    /// - Throws: ``SSHServerError`` when no socket can be made or bound, or when a hundred
    ///   tries all gave ports already handed out.
    public static func next() throws -> Int {
        for _ in 0..<100 {
            let port = try bindAny()
            let isNew = handedOut.withLock { $0.insert(port).inserted }
            if isNew { return port }
        }
        throw SSHServerError(message: "no TCP port on 127.0.0.1 was free that was not handed out already")
    }

    /// Binds port 0 on 127.0.0.1 and returns the port the kernel chose, closing the socket.
    private static func bindAny() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SSHServerError(message: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Int32 in
                guard bind(fd, raw, length) == 0 else { return -1 }
                return getsockname(fd, raw, &length)
            }
        }
        guard bound == 0 else { throw SSHServerError(message: "bind: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
