import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The ordinary user the tests run programs as (CI runs as root; FUSE and the default mode are
/// about what an ordinary user gets): `fpk-fuse`, a system user without a home, made with
/// `useradd` by whichever test needs it first.
public enum TestUser {
    public static let name = "fpk-fuse"

    /// Makes the user when missing (another test of the process may make it at the same time);
    /// returns its uid and gid. Blocking (runs `useradd`): call it off the cooperative pool.
    /// - Throws: when `useradd` fails and no such user exists after it.
    public static func ensure() throws -> (uid: uid_t, gid: gid_t) {
        if getpwnam(name) == nil {
            let made = try ChildProcess.capture(
                "/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
            if made.ending != .exited(0) && getpwnam(name) == nil {
                throw MediaServerError(message: "useradd \(name): \(String(decoding: made.errorOutput, as: UTF8.self))")
            }
        }
        guard let entry = getpwnam(name) else { throw MediaServerError(message: "useradd made no \(name)") }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }
}
