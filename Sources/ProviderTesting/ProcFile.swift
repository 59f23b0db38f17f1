import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The whole text of a `/proc` file, read until the end, or `nil` when it cannot be read.
/// `String(contentsOfFile:)` stops after the first read of such a file (the kernel reports its
/// size as 0 and gives at most a page per read), so a mount table longer than 4 KiB lost its
/// last mounts: the newest, those a test had just made. Blocking.
public func readProcFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0 { return nil }
    defer { close(fd) }
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 16_384)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        if count < 0 { return nil }
        if count == 0 { break }
        data.append(contentsOf: buffer[0..<count])
    }
    return String(decoding: data, as: UTF8.self)
}
