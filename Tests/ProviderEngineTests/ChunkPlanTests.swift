import Testing

@testable import ProviderEngine

/// ``ChunkPlan``: which bytes a read of a partially present file fetches.
@Suite struct ChunkPlanTests {
    let unit = ChunkPlan.unit
    let size: Int64 = 1 << 30

    @Test func aFirstReadElsewhereThanTheStartFetchesNothingAhead() {
        var plan = ChunkPlan()
        let (_, ahead) = plan.plan(read: (size / 3)..<(size / 3 + 4096), size: size, covered: [])
        #expect(ahead.isEmpty)
        var fromStart = ChunkPlan()
        let (demand, first) = fromStart.plan(read: 0..<4096, size: size, covered: [])
        // The first window comes with the read, in one call.
        #expect(first.isEmpty)
        #expect(demand == [0..<(ChunkPlan.unit + ChunkPlan.firstWindow)])
    }

    @Test func aReadFetchesTheAlignedChunksThatCoverItAndNothingPresent() {
        var plan = ChunkPlan()
        let middle = size / 2 + 1000
        let (demand, ahead) = plan.plan(read: middle..<(middle + (1 << 20)), size: size, covered: [])
        #expect(ahead.isEmpty)
        #expect(demand.first?.lowerBound == middle / unit * unit)
        #expect(demand.last?.upperBound == ChunkPlan.alignedUp(middle + (1 << 20), size: size))
        #expect(demand.reduce(0) { $0 + $1.count } <= 16 << 20)
        // Present bytes are not fetched again.
        var again = ChunkPlan()
        let present = [middle / unit * unit..<(middle / unit * unit + unit)]
        let second = again.plan(read: middle..<(middle + 10), size: size, covered: present)
        #expect(second.demand.isEmpty)
    }

    @Test func readAheadGrowsWhileReadsFollowEachOtherAndStopsElsewhere() {
        var plan = ChunkPlan()
        var offset: Int64 = 0
        var windows: [Int64] = []
        var fetched: Int64 = 0
        var covered: [Range<Int64>] = []
        // 8 KiB reads in order, each planned (as when every read's bytes are still on their
        // way): the read-ahead grows only as the reader passes its trigger, never runs away.
        for _ in 0..<16384 {
            let (demand, ahead) = plan.plan(read: offset..<(offset + 8192), size: size, covered: covered)
            covered += demand + ahead
            fetched += (demand + ahead).reduce(Int64(0)) { $0 + Int64($1.count) }
            windows.append(plan.window)
            offset += 8192
            #expect(fetched <= offset + 2 * ChunkPlan.largestWindow + ChunkPlan.unit)
        }
        // A first read at the start already fetches ahead.
        #expect(windows[0] == ChunkPlan.firstWindow)
        #expect(windows == windows.sorted())
        #expect(windows.last == ChunkPlan.largestWindow)
        // A read elsewhere starts over.
        _ = plan.plan(read: (size - 4096)..<size, size: size, covered: covered)
        #expect(plan.window == 0)
    }

    @Test func readsOfBytesOnTheirWayDoNotGrowTheReadAhead() {
        var plan = ChunkPlan()
        let (firstDemand, first) = plan.plan(read: 0..<8192, size: size, covered: [])
        var covered = firstDemand + first
        // The same reader's next reads, before anything arrived.
        for step in 1..<20 {
            let start = Int64(step) * 8192
            let (demand, ahead) = plan.plan(read: start..<(start + 8192), size: size, covered: covered)
            covered += demand + ahead
            #expect(ahead.isEmpty)
        }
        #expect(plan.window == ChunkPlan.firstWindow)
    }

    @Test func readsPastTheEndAndHostileOffsetsFetchNothingAndNeverTrap() {
        var plan = ChunkPlan()
        #expect(plan.plan(read: size..<(size + 10), size: size, covered: []).demand.isEmpty)
        #expect(plan.plan(read: (Int64.max - 1)..<Int64.max, size: size, covered: []).demand.isEmpty)
        #expect(plan.plan(read: 0..<Int64.max, size: 0, covered: []).demand.isEmpty)
        #expect(plan.plan(read: 0..<10, size: -5, covered: []).demand.isEmpty)
        // The last chunk ends at the end of the file, not past it.
        let small = plan.plan(read: 0..<10, size: 1000, covered: [])
        #expect(small.demand == [0..<1000])
    }

    @Test func missingRunsAreSplitIntoCallsOfBoundedSize() {
        let missing = ChunkPlan.missing(size: 100 << 20, covered: [(10 << 20)..<(20 << 20)])
        #expect(missing.allSatisfy { $0.count <= ChunkPlan.largestCall })
        #expect(missing.reduce(0) { $0 + $1.count } == 90 << 20)
        #expect(!missing.contains { $0.overlaps((10 << 20)..<(20 << 20)) })
        #expect(ChunkPlan.contains([0..<100], 10..<20))
        #expect(!ChunkPlan.contains([0..<15], 10..<20))
    }
}
