/// Which bytes of a partially present file to fetch for a read (progressive hydration): the
/// aligned chunks that cover the read and are neither present nor on their way, and, while a
/// program reads in order, a read-ahead window that doubles with each read in sequence (as
/// the kernel's own read-ahead does), so a sequential reader finds its next bytes fetched or
/// on their way. A read elsewhere in the file starts the window again.
struct ChunkPlan: Sendable {
    /// The alignment of fetches: a read of one byte fetches this much around it.
    static let unit: Int64 = 256 << 10
    /// The read-ahead after the second read in sequence; it doubles up to ``largestWindow``.
    static let firstWindow: Int64 = 1 << 20
    static let largestWindow: Int64 = 64 << 20
    /// The most one backend call fetches; longer runs are split.
    static let largestCall: Int64 = 64 << 20

    /// Where the last read ended, and the read-ahead it earned.
    private(set) var expected: Int64 = -1
    private(set) var window: Int64 = 0
    /// The end of what the sequence asked for so far (read and read-ahead).
    private(set) var horizon: Int64 = 0
    /// A read that ends past this point should be planned even when its bytes are present: the
    /// reader has consumed half of the read-ahead, and the next window should be on its way
    /// before the reader gets there (as the kernel's asynchronous read-ahead marker).
    private(set) var trigger: Int64 = .max

    init() {}

    /// The runs to fetch for a read of `range` of a file of `size` bytes, given the ranges that
    /// are present or being fetched (`covered`, any order): what the read needs (`demand`) and
    /// what to fetch ahead of it (`ahead`). Updates the sequence state.
    mutating func plan(read range: Range<Int64>, size: Int64, covered: [Range<Int64>]) -> (
        demand: [Range<Int64>], ahead: [Range<Int64>]
    ) {
        let size = max(0, size)
        let lower = min(max(0, range.lowerBound), size)
        let upper = min(max(lower, range.upperBound), size)
        // A first read at the start is taken as the start of a sequence: most programs that
        // open a file read it from the start (players, `head`, `cat`), and waiting for a
        // second read to fetch ahead costs one more round trip to the store.
        // In sequence: from where the last planned read ended up to what was fetched ahead of it
        // (reads of present bytes in between are not planned).
        let sequential =
            (expected >= 0 && lower >= expected - Self.unit && lower <= max(expected, horizon) + Self.unit)
            || (expected < 0 && lower == 0)
        expected = upper
        guard lower < upper else { return ([], []) }
        let start = lower / Self.unit * Self.unit
        let end = Self.alignedUp(upper, size: size)
        let demand = Self.split(Self.gaps(in: start..<end, excluding: covered))
        guard sequential, end < size else {
            window = 0
            horizon = end
            trigger = .max
            return (demand, [])
        }
        // The window grows, and reaches further, only when the reader passed the trigger (or
        // the read-ahead so far): a reader planned for another reason (its bytes still on
        // their way) does not make it grow again.
        if window > 0 && upper <= trigger && end <= horizon { return (demand, []) }
        let starting = window == 0
        window = starting ? Self.firstWindow : min(window * 2, Self.largestWindow)
        let from = max(end, horizon)
        let aheadEnd = Self.alignedUp(min(size, from + window), size: size)
        let ahead = from < aheadEnd ? Self.split(Self.gaps(in: end..<aheadEnd, excluding: covered + demand)) : []
        horizon = max(end, aheadEnd)
        trigger = horizon >= size ? .max : horizon - window / 2
        // The first window of a sequence is fetched with the read, in one call: a second call
        // at once may have to wait for a second connection to the store (an SSH handshake costs
        // more than the window's bytes), and the reader needs those bytes next anyway.
        if starting, let last = demand.last, ahead.first?.lowerBound == last.upperBound {
            return (Self.split(Self.gaps(in: start..<aheadEnd, excluding: covered)), [])
        }
        return (demand, ahead)
    }

    /// The runs of a file of `size` bytes not in `covered`: what completing it takes.
    static func missing(size: Int64, covered: [Range<Int64>]) -> [Range<Int64>] {
        split(gaps(in: 0..<max(0, size), excluding: covered))
    }

    /// `offset` rounded up to the unit, at most `size`.
    static func alignedUp(_ offset: Int64, size: Int64) -> Int64 {
        let (rounded, overflow) = offset.addingReportingOverflow(unit - 1)
        return overflow ? size : min(size, rounded / unit * unit)
    }

    /// The parts of `range` that no range of `excluding` covers, in order.
    static func gaps(in range: Range<Int64>, excluding: [Range<Int64>]) -> [Range<Int64>] {
        var result: [Range<Int64>] = []
        var position = range.lowerBound
        for covered in excluding.sorted(by: { $0.lowerBound < $1.lowerBound }) where covered.upperBound > position {
            if covered.lowerBound >= range.upperBound { break }
            if covered.lowerBound > position { result.append(position..<covered.lowerBound) }
            position = max(position, covered.upperBound)
            if position >= range.upperBound { break }
        }
        if position < range.upperBound { result.append(position..<range.upperBound) }
        return result
    }

    /// Runs cut into pieces of at most ``largestCall`` bytes.
    static func split(_ runs: [Range<Int64>]) -> [Range<Int64>] {
        var result: [Range<Int64>] = []
        for run in runs {
            var start = run.lowerBound
            while start < run.upperBound {
                let end = min(run.upperBound, start + largestCall)
                result.append(start..<end)
                start = end
            }
        }
        return result
    }

    /// Whether a read of `range` should be planned although its bytes are present (see
    /// ``trigger``).
    func wantsPlan(read range: Range<Int64>) -> Bool { range.upperBound > trigger }

    /// Whether `covered` (sorted, merged) holds every byte of `range`.
    static func contains(_ covered: [Range<Int64>], _ range: Range<Int64>) -> Bool {
        range.isEmpty || covered.contains { $0.lowerBound <= range.lowerBound && range.upperBound <= $0.upperBound }
    }
}
