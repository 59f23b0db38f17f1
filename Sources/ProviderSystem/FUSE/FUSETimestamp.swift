#if canImport(Glibc)
    import Glibc
#endif

/// A time of a file's attributes, to the nanosecond (as `stat` has it: `make`, `git` and `tar`
/// compare nanoseconds).
public struct FUSETimestamp: Sendable, Hashable, Comparable {
    /// Seconds since 1970-01-01 UTC.
    public var seconds: Int64
    /// 0 ..< 1,000,000,000.
    public var nanoseconds: Int64

    public init(seconds: Int64, nanoseconds: Int64 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public init(_ time: Glibc.timespec) {
        seconds = Int64(time.tv_sec)
        nanoseconds = Int64(time.tv_nsec)
    }

    /// The time now (`CLOCK_REALTIME`).
    public static func now() -> FUSETimestamp {
        var time = Glibc.timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return FUSETimestamp(time)
    }

    public var timespec: Glibc.timespec { Glibc.timespec(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds)) }

    public static func < (a: FUSETimestamp, b: FUSETimestamp) -> Bool {
        (a.seconds, a.nanoseconds) < (b.seconds, b.nanoseconds)
    }
}
