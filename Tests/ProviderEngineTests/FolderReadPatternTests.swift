import Testing

@testable import ProviderEngine

/// ``FolderReadPattern``: when programs read a folder's dataless files one after another, and
/// when they stopped. The clock is the tests' own: every call takes its time.
@Suite struct FolderReadPatternTests {
    /// The pattern in a box: `#expect` cannot call a mutating method of a local value.
    final class Pattern {
        var value: FolderReadPattern
        init(limits: FolderReadPattern.Limits = FolderReadPattern.Limits()) { value = FolderReadPattern(limits: limits) }
        func accessed(_ name: String, in folder: FolderReadPattern.Folder, by program: Int32, at now: Double, counts: Bool = true) -> Bool {
            value.accessed(name, in: folder, by: program, at: now, counts: counts)
        }
        func opened(in folder: FolderReadPattern.Folder, at now: Double) { value.opened(in: folder, at: now) }
        func stopped(_ folder: FolderReadPattern.Folder, resumable: Bool) { value.stopped(folder, resumable: resumable) }
        func isRunning(_ folder: FolderReadPattern.Folder) -> Bool { value.isRunning(folder) }
        func isIdle(_ folder: FolderReadPattern.Folder, at now: Double) -> Bool { value.isIdle(folder, at: now) }
        func wasAccessed(_ name: String, in folder: FolderReadPattern.Folder) -> Bool { value.wasAccessed(name, in: folder) }
        func lastAccessed(in folder: FolderReadPattern.Folder) -> String { value.lastAccessed(in: folder) }
        func allowance(_ folder: FolderReadPattern.Folder, fetched: Int, at now: Double) -> Int {
            value.allowance(folder, fetched: fetched, at: now)
        }
        var count: Int { value.count }
    }

    let folder = FolderReadPattern.Folder(domainID: 1, path: "d0")
    let other = FolderReadPattern.Folder(domainID: 1, path: "d1")
    let cat: Int32 = 100

    @Test func threeFilesOfOneFolderReadByOneProgramWithinTheWindowStartAReadAhead() {
        let pattern = Pattern()
        #expect(!pattern.accessed("f0", in: folder, by: cat, at: 10.0))
        #expect(!pattern.accessed("f1", in: folder, by: cat, at: 10.1))
        #expect(!pattern.isRunning(folder))
        #expect(pattern.accessed("f2", in: folder, by: cat, at: 10.2))
        #expect(pattern.isRunning(folder))
        // Running: further accesses start nothing more.
        #expect(!pattern.accessed("f3", in: folder, by: cat, at: 10.3))
        #expect(pattern.lastAccessed(in: folder) == "f3")
        #expect(pattern.wasAccessed("f0", in: folder) && pattern.wasAccessed("f3", in: folder))
        #expect(!pattern.wasAccessed("f4", in: folder))
    }

    @Test func theSameFileAgainOtherProgramsOtherFoldersOrSlowReadsStartNothing() {
        let pattern = Pattern()
        // One file read again and again.
        for step in 0..<10 { #expect(!pattern.accessed("f0", in: folder, by: cat, at: 1 + Double(step) * 0.01)) }
        // One file each by three programs (a shell loop of cats).
        #expect(!pattern.accessed("g0", in: other, by: 1, at: 2.0))
        #expect(!pattern.accessed("g1", in: other, by: 2, at: 2.1))
        #expect(!pattern.accessed("g2", in: other, by: 3, at: 2.2))
        // One program, three folders.
        let spread = Pattern()
        for (index, path) in ["a", "b", "c"].enumerated() {
            #expect(!spread.accessed("f", in: FolderReadPattern.Folder(domainID: 1, path: path), by: cat, at: 3 + Double(index) * 0.1))
        }
        // One program, one folder, but further apart than the window: the oldest drop out.
        let slow = Pattern()
        #expect(!slow.accessed("f0", in: folder, by: cat, at: 0))
        #expect(!slow.accessed("f1", in: folder, by: cat, at: 0.8))
        #expect(!slow.accessed("f2", in: folder, by: cat, at: 1.9))
        #expect(!slow.accessed("f3", in: folder, by: cat, at: 3.0))
        // Then three quick ones do.
        #expect(!slow.accessed("f4", in: folder, by: cat, at: 3.1))
        #expect(slow.accessed("f5", in: folder, by: cat, at: 3.2))
    }

    @Test func aProgramAnAccessRuleLimitsNeverStartsOneButItsFilesAreLeftToIt() {
        let pattern = Pattern()
        for index in 0..<5 {
            #expect(!pattern.accessed("f\(index)", in: folder, by: 7, at: Double(index) * 0.01, counts: false))
        }
        #expect(!pattern.isRunning(folder))
        #expect(pattern.wasAccessed("f4", in: folder), "the read-ahead must never take a file a program fetches")
    }

    @Test func theReadAheadStaysALeadAheadOfTheOpensAndStopsWhenProgramsStop() {
        let limits = FolderReadPattern.Limits(reads: 3, window: 1, idle: 2, lead: 20)
        let pattern = Pattern(limits: limits)
        for index in 0..<3 { _ = pattern.accessed("f\(index)", in: folder, by: cat, at: 5 + Double(index) * 0.01) }
        #expect(pattern.allowance(folder, fetched: 0, at: 5.1) == 20)
        #expect(pattern.allowance(folder, fetched: 16, at: 5.1) == 4)
        #expect(pattern.allowance(folder, fetched: 20, at: 5.1) == 0)
        // The program opens files the read-ahead filled: it may go on.
        for step in 0..<10 { pattern.opened(in: folder, at: 5.2 + Double(step) * 0.001) }
        #expect(pattern.allowance(folder, fetched: 20, at: 5.3) == 10)
        // Opens of another folder do not count.
        pattern.opened(in: other, at: 5.3)
        #expect(pattern.allowance(folder, fetched: 20, at: 5.3) == 10)
        // No open or access for longer than `idle`: stopped.
        #expect(!pattern.isIdle(folder, at: 7.2))
        #expect(pattern.isIdle(folder, at: 7.3))
        #expect(pattern.allowance(folder, fetched: 0, at: 7.3) == 0)
    }

    @Test func stoppedForItsLeadTheNextAccessStartsItAgainButNotAfterAPause() {
        let pattern = Pattern()
        for index in 0..<3 { _ = pattern.accessed("f\(index)", in: folder, by: cat, at: Double(index) * 0.01) }
        pattern.stopped(folder, resumable: true)
        #expect(!pattern.isRunning(folder))
        // The program caught up: its first access of a file not fetched ahead starts it again.
        #expect(pattern.accessed("f200", in: folder, by: cat, at: 1.0))
        pattern.stopped(folder, resumable: true)
        // After a pause longer than `idle`, the pattern has to show again.
        #expect(!pattern.accessed("f300", in: folder, by: cat, at: 10.0))
        #expect(!pattern.accessed("f301", in: folder, by: cat, at: 10.01))
        #expect(pattern.accessed("f302", in: folder, by: cat, at: 10.02))
        // Stopped because programs stopped (not resumable): three reads again.
        pattern.stopped(folder, resumable: false)
        #expect(!pattern.accessed("f303", in: folder, by: cat, at: 10.03))
    }

    @Test func aFilesFolderAndNameFromItsPath() {
        let (root, top) = FolderReadPattern.Folder.of(domainID: 3, path: "a.txt")
        #expect(root == FolderReadPattern.Folder(domainID: 3, path: "") && top == "a.txt")
        let (nested, name) = FolderReadPattern.Folder.of(domainID: 3, path: "x/y z/ü.bin")
        #expect(nested == FolderReadPattern.Folder(domainID: 3, path: "x/y z") && name == "ü.bin")
    }

    @Test func whatIsRememberedIsBounded() {
        let pattern = Pattern(limits: FolderReadPattern.Limits(folders: 8, accessedNames: 50))
        for index in 0..<100 {
            _ = pattern.accessed("f", in: FolderReadPattern.Folder(domainID: 1, path: "d\(index)"), by: cat, at: Double(index) * 0.001)
        }
        #expect(pattern.count <= 8)
        // A folder with more accessed names than remembered gets no read-ahead any more, and
        // every file of it counts as one a program fetches itself.
        let many = Pattern(limits: FolderReadPattern.Limits(folders: 8, accessedNames: 50))
        var started = false
        for index in 0..<60 { started = many.accessed("f\(index)", in: folder, by: cat, at: 100 + Double(index) * 1.5) || started }
        #expect(!started)
        #expect(many.wasAccessed("never-read", in: folder))
        #expect(many.allowance(folder, fetched: 0, at: 190) == 0)
    }
}
