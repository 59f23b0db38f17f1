import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

/// The schedule of a ranged transfer (SFTP's, and the HTTP adapters' `RangedDownload`): ranges
/// handed out in order, the prefix written without a gap followed.
@Suite("Range schedule")
struct RangeScheduleTests {
    /// Runs `body` on a thread of its own (it blocks) and waits for it without blocking.
    static func onThread(_ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread {
                body()
                continuation.resume()
            }.start()
        }
    }

    @Test func rangesAreHandedOutInOrderAndCoverTheTransfer() {
        let schedule = RangeSchedule(from: 5, to: 30, rangeSize: 10)
        var ranges: [Range<Int64>] = []
        while let range = schedule.take() { ranges.append(range) }
        #expect(ranges == [5..<15, 15..<25, 25..<30])
        #expect(RangeSchedule(from: 7, to: 7, rangeSize: 10).take() == nil)
    }

    @Test func thePrefixGrowsOnlyWithoutGaps() {
        let reports = Recorder<String>()
        let schedule = RangeSchedule(from: 0, to: 30, rangeSize: 10) { prefix, rangesCompleted in
            reports.add("\(prefix)\(rangesCompleted ? "|" : "")")
        }
        let first = schedule.take()!
        let second = schedule.take()!
        let third = schedule.take()!
        // The later ranges finish first: nothing is reported until the first one has bytes.
        schedule.wrote(10, in: second)
        schedule.wrote(4, in: third)
        #expect(schedule.writtenPrefix == 0)
        schedule.wrote(3, in: first)
        #expect(schedule.writtenPrefix == 3)
        schedule.wrote(7, in: first)
        #expect(schedule.writtenPrefix == 24)
        schedule.wrote(6, in: third)
        #expect(schedule.writtenPrefix == 30)
        #expect(reports.values == ["3", "24|", "30|"])
        #expect(schedule.take() == nil)
    }

    @Test func reportsComeInOrderFromManyThreads() async {
        let reports = Recorder<Int64>()
        let schedule = RangeSchedule(from: 0, to: 64 * 1000, rangeSize: 1000) { prefix, _ in reports.add(prefix) }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    await Self.onThread {
                        while let range = schedule.take() {
                            for _ in 0..<10 { schedule.wrote(100, in: range) }
                        }
                    }
                }
            }
        }
        #expect(schedule.writtenPrefix == 64 * 1000)
        #expect(reports.values == reports.values.sorted() && Set(reports.values).count == reports.values.count)
        #expect(reports.values.last == Int64(64 * 1000))
    }

    @Test func aFailureStopsTheHandOut() {
        let schedule = RangeSchedule(from: 0, to: 40, rangeSize: 10)
        let first = schedule.take()!
        schedule.wrote(5, in: first)
        schedule.fail(FileProviderError(.serverUnreachable, "gone"))
        schedule.fail(FileProviderError(.cancelled, "later errors are not kept"))
        #expect(schedule.take() == nil)
        #expect(schedule.error?.code == .serverUnreachable)
        #expect(schedule.writtenPrefix == 5)
    }

    /// A transfer that reports where it is (an HTTP range's progress) rather than how much it
    /// just wrote: the same offset twice, or a smaller one, adds nothing.
    @Test func positionsReportedTwiceCountOnce() {
        let reports = Recorder<Int64>()
        let schedule = RangeSchedule(from: 100, to: 130, rangeSize: 10) { prefix, _ in reports.add(prefix) }
        let first = schedule.take()!
        let second = schedule.take()!
        schedule.wrote(upTo: 115, in: second)
        schedule.wrote(upTo: 115, in: second)
        schedule.wrote(upTo: 104, in: first)
        schedule.wrote(upTo: 104, in: first)
        schedule.wrote(upTo: 102, in: first)
        #expect(schedule.writtenPrefix == 104)
        schedule.wrote(upTo: 110, in: first)
        #expect(schedule.writtenPrefix == 115)
        // Past the range's end counts as its end.
        schedule.wrote(upTo: 500, in: second)
        #expect(schedule.writtenPrefix == 120)
        #expect(reports.values == [104, 115, 120])
    }
}
