import Foundation
import ProviderCore

extension BackendConformance {
    /// What a backend call gave: its item, or its error as a `FileProviderError`.
    static func outcome(_ call: () async throws -> Item) async -> Result<Item, FileProviderError> {
        do {
            return .success(try await call())
        } catch {
            return .failure(FileProviderError.wrap(error))
        }
    }

    /// Checks that a backend without server-side moves (``BackendCapabilities/supportsServerSideMove``)
    /// declines a rename and a move with `notSupported` and changes nothing; `true` when it has
    /// them (the check goes on).
    static func movesOrDeclined(_ c: ConformanceContext) async throws -> Bool {
        if c.capabilities.supportsServerSideMove { return true }
        let folder = try await c.createFolder("stays")
        let file = try await c.createFile("stays-too", Data("put".utf8))
        try await c.expectError(.notSupported, "a rename without supportsServerSideMove") { try await c.rename(file, to: "renamed") }
        try await c.expectError(.notSupported, "a move without supportsServerSideMove") { try await c.move(file, to: folder.identifier) }
        try await c.expectError(.notSupported, "a folder's rename without supportsServerSideMove") {
            try await c.rename(folder, to: "renamed-folder")
        }
        let names = try await c.list().map(\.filename)
        try c.expect(
            names.contains(file.filename) && names.contains(folder.filename) && names.count == 2, "a refused move changed the root: \(names)")
        try c.expect(try await c.list(folder.identifier).isEmpty, "a refused move put something in the folder")
        try c.expect(try await c.fetch(file.identifier) == Data("put".utf8), "a refused move changed the bytes")
        return false
    }

    static let modifyChecks: [Check] = [
        ("modifyContentsWithBaseVersion", { c in
            let file = try await c.createFile("doc.txt", Data("draft".utf8))
            let final = Data("final version, longer".utf8)
            let modified = try await c.setContents(file, final)
            try c.expect(modified.size == Int64(final.count), "modifyItem reports size \(modified.size)")
            try c.expect(try await c.fetch(modified.identifier) == final, "fetched bytes are not the new contents")
            let count = try await c.list().count
            try c.expect(count == 1, "modifying left \(count) items")
        }),
        ("modifyWithStaleBaseVersionThrowsVersionOutOfDate", { c in
            let file = try await c.createFile("shared.txt", Data("base".utf8))
            let theirs = Data("their edit".utf8)
            let current = try await c.setContents(file, theirs)
            try await c.expectError(.versionOutOfDate, "writing with a stale base version") {
                try await c.setContents(file, Data("my edit".utf8), base: file.version)
            }
            try c.expect(try await c.fetch(current.identifier) == theirs, "a refused write overwrote the contents")
            let found = try await c.backend.item(for: current.identifier)
            try c.expect(found.version == current.version, "a refused write changed the version")
        }),
        ("modifyReplayNeverOverwritesAnotherWrite", { c in
            // `mayAlreadyExist` says a modification may have been applied already (a replay
            // after a crash); it never lifts the version check: a replay whose base is out of
            // date because someone else wrote is refused, and their bytes stay.
            let file = try await c.createFile("replayed.txt", Data("base".utf8))
            let theirs = Data("their write, longer".utf8)
            let current = try await c.setContents(file, theirs)
            try await c.expectError(.versionOutOfDate, "a replayed write over another writer's") {
                try await c.setContents(file, Data("my write".utf8), base: file.version, options: [.mayAlreadyExist])
            }
            try c.expect(try await c.fetch(current.identifier) == theirs, "a replayed write overwrote another writer's bytes")
            // The replay of a write that did reach the store either returns the item or is
            // refused as out of date; the store keeps those bytes either way.
            let mine = Data("my own write".utf8)
            let applied = try await c.setContents(current, mine)
            do {
                let again = try await c.setContents(current, mine, base: current.version, options: [.mayAlreadyExist])
                try c.expect(again.size == Int64(mine.count), "a replayed write reports size \(again.size)")
            } catch let error as FileProviderError where error.code == .versionOutOfDate {
            }
            try c.expect(try await c.fetch(applied.identifier) == mine, "the replay of an applied write changed the bytes")
        }),
        ("changesByASecondWriterAreSeen", { c in
            // Another process changes the store behind this backend's back: what it reads next
            // is the store as it is now (no cache hides it), and a write based on what it saw
            // before is refused.
            guard let openSecond = c.openSecond else { return }
            let file = try await c.createFile("shared.txt", Data("one".utf8))
            let gone = try await c.createFile("gone.txt", Data("going".utf8))
            _ = try await c.list()
            _ = try await c.backend.item(for: file.identifier)
            let other = try await openSecond()
            do {
                let seen = try await other.item(for: file.identifier)
                let theirs = Data("two, written by another".utf8)
                let written = try await other.modifyItem(
                    seen, baseVersion: seen.version, changedFields: [.contents], contents: try c.file(theirs), options: []
                ).item
                let created = try await other.createItem(
                    basedOn: c.template("new.txt", in: .rootContainer, kind: .file), fields: [.contents, .filename],
                    contents: try c.file(Data("new".utf8)), options: []
                ).item
                try await other.deleteItem(identifier: gone.identifier, baseVersion: nil, options: [])
                let now = try await c.backend.item(for: file.identifier)
                try c.expect(now.version == written.version, "item(for:) after another writer's edit reports the old version")
                try c.expect(now.size == Int64(theirs.count), "item(for:) after another writer's edit reports size \(now.size)")
                try c.expect(try await c.fetch(file.identifier) == theirs, "a fetch after another writer's edit gives the old bytes")
                let names = try await c.list().map(\.filename).sorted()
                try c.expect(names == ["new.txt", "shared.txt"], "the listing after another writer's changes is \(names)")
                try c.expect(
                    try await c.backend.item(for: created.identifier).size == 3, "item(for:) of another writer's new file")
                try await c.expectError(.noSuchItem, "item(for:) of a file another writer deleted") {
                    try await c.backend.item(for: gone.identifier)
                }
                try await c.expectError(.versionOutOfDate, "a write based on the version before another writer's edit") {
                    try await c.setContents(file, Data("mine".utf8))
                }
                try c.expect(try await c.fetch(file.identifier) == theirs, "a refused write changed another writer's bytes")
            } catch {
                await other.close()
                throw error
            }
            await other.close()
        }),
        ("racingWritersWithOneBaseVersionOneWins", { c in
            // `supportsConditionalWrites` says the store itself compares the base version with
            // the item's as it writes (`If-Match`): two writers that start from the same version
            // at the same moment can never both win. Without it the check runs just before the
            // write, a race is possible, and the engine knows it.
            guard c.capabilities.supportsConditionalWrites, let openSecond = c.openSecond else { return }
            let other = try await openSecond()
            do {
                var file = try await c.createFile("raced.txt", Data("start".utf8))
                for round in 0..<6 {
                    // Different sizes: a version made of the size and the time differs too.
                    let mine = Data(String(repeating: "m", count: 10 + round).utf8)
                    let theirs = Data(String(repeating: "t", count: 40 + round).utf8)
                    let (first, second) = (try c.file(mine), try c.file(theirs))
                    let base = file
                    async let a = Self.outcome {
                        try await c.backend.modifyItem(
                            base, baseVersion: base.version, changedFields: [.contents], contents: first, options: []
                        ).item
                    }
                    async let b = Self.outcome {
                        try await other.modifyItem(
                            base, baseVersion: base.version, changedFields: [.contents], contents: second, options: []
                        ).item
                    }
                    let results = [await a, await b]
                    let winners = results.compactMap { try? $0.get() }
                    try c.expect(
                        winners.count == 1,
                        "round \(round): \(winners.count) of two writers from one base version were taken")
                    for case .failure(let error) in results {
                        try c.expect(
                            error.code == .versionOutOfDate,
                            "round \(round): the losing writer got \(error.code) (\(error.message)), not versionOutOfDate")
                    }
                    guard let winner = winners.first else { break }
                    let bytes = try await c.fetch(base.identifier)
                    try c.expect(
                        bytes == (winner.size == Int64(mine.count) ? mine : theirs),
                        "round \(round): the store holds \(bytes.count) bytes, not the winner's \(winner.size)")
                    file = try await c.backend.item(for: base.identifier)
                }
            } catch {
                await other.close()
                throw error
            }
            await other.close()
        }),
        ("modifyMissingThrowsNoSuchItem", { c in
            let file = try await c.createFile("vanishing")
            try await c.backend.deleteItem(identifier: file.identifier, baseVersion: nil, options: [])
            try await c.expectError(.noSuchItem, "writing a deleted file") {
                try await c.setContents(file, Data("late".utf8))
            }
            if c.capabilities.supportsServerSideMove {
                try await c.expectError(.noSuchItem, "renaming a deleted file") { try await c.rename(file, to: "other") }
            } else {
                // Either answer is true of a store that cannot rename: it has no such item.
                try await c.expectFailure("renaming a deleted file") { try await c.rename(file, to: "other") }
            }
        }),
        ("renameFile", { c in
            guard try await movesOrDeclined(c) else { return }
            let file = try await c.createFile("old-name.txt", Data("moving".utf8))
            let renamed = try await c.rename(file, to: "new-name.txt")
            try c.expect(renamed.filename == "new-name.txt", "the renamed item is named \(renamed.filename)")
            try c.expect(try await c.list().map(\.filename) == ["new-name.txt"], "the listing after a rename")
            try c.expect(try await c.fetch(renamed.identifier) == Data("moving".utf8), "a rename changed the bytes")
        }),
        ("renameChangesPathDerivedIdentifier", { c in
            guard try await movesOrDeclined(c) else { return }
            let file = try await c.createFile("first")
            let renamed = try await c.rename(file, to: "second")
            if c.capabilities.identifiersArePathDerived {
                try c.expect(!renamed.identifier.isExactly(file.identifier), "a path-derived identifier did not change on rename")
                try await c.expectError(.noSuchItem, "item(for:) of the identifier before the rename") {
                    try await c.backend.item(for: file.identifier)
                }
            } else {
                try c.expect(renamed.identifier.isExactly(file.identifier), "a stable identifier changed on rename")
            }
            try c.expectSame(try await c.backend.item(for: renamed.identifier), renamed, "item(for:) after a rename")
        }),
        ("renameOntoExistingThrowsFilenameCollision", { c in
            guard try await movesOrDeclined(c) else { return }
            let a = try await c.createFile("a", Data("A".utf8))
            let b = try await c.createFile("b", Data("B".utf8))
            try await c.expectError(.filenameCollision, "renaming onto an existing name") { try await c.rename(a, to: "b") }
            try c.expect(try await c.fetch(a.identifier) == Data("A".utf8), "a refused rename changed the source")
            try c.expect(try await c.fetch(b.identifier) == Data("B".utf8), "a refused rename overwrote the target")
        }),
        ("renameWithStaleBaseVersionThrowsVersionOutOfDate", { c in
            guard try await movesOrDeclined(c) else { return }
            let file = try await c.createFile("stale-rename", Data("one".utf8))
            let newer = try await c.setContents(file, Data("two, changed".utf8))
            var changed = newer
            changed.filename = "renamed"
            try await c.expectError(.versionOutOfDate, "renaming with a stale base version") {
                try await c.backend.modifyItem(
                    changed, baseVersion: file.version, changedFields: [.filename], contents: nil, options: [])
            }
            try c.expect(try await c.list().map(\.filename) == ["stale-rename"], "a refused rename renamed")
        }),
        ("moveFileAcrossFolders", { c in
            guard try await movesOrDeclined(c) else { return }
            let source = try await c.createFolder("from")
            let target = try await c.createFolder("to")
            let file = try await c.createFile("travel.txt", in: source.identifier, Data("trip".utf8))
            let moved = try await c.move(file, to: target.identifier)
            try c.expect(moved.parentIdentifier.isExactly(target.identifier), "the moved item's parent is \(moved.parentIdentifier)")
            try c.expect(try await c.list(source.identifier).isEmpty, "the source folder still lists the moved file")
            try c.expect(try await c.list(target.identifier).map(\.filename) == ["travel.txt"], "the target folder does not list it")
            try c.expect(try await c.fetch(moved.identifier) == Data("trip".utf8), "a move changed the bytes")
        }),
        ("moveFolderWithChildren", { c in
            guard try await movesOrDeclined(c) else { return }
            let box = try await c.createFolder("box")
            let sub = try await c.createFolder("sub", in: box.identifier)
            try await c.createFile("note.txt", in: sub.identifier, Data("inside".utf8))
            let shelf = try await c.createFolder("shelf")
            let moved = try await c.move(box, to: shelf.identifier)
            try c.expect(try await c.list().map(\.filename) == ["shelf"], "the root after moving a folder")
            guard let movedSub = try await c.child("sub", in: moved.identifier) else {
                throw c.failure("the moved folder no longer lists its subfolder")
            }
            guard let note = try await c.child("note.txt", in: movedSub.identifier) else {
                throw c.failure("the moved folder's subfolder no longer lists its file")
            }
            try c.expect(try await c.fetch(note.identifier) == Data("inside".utf8), "a folder move changed a child's bytes")
            try c.expect(
                try await c.backend.item(for: note.identifier).parentIdentifier.isExactly(movedSub.identifier),
                "a child of a moved folder reports another parent")
        }),
        ("moveIntoMissingFolderThrowsNoSuchItem", { c in
            guard try await movesOrDeclined(c) else { return }
            let file = try await c.createFile("homeless")
            let folder = try await c.createFolder("removed")
            try await c.backend.deleteItem(identifier: folder.identifier, baseVersion: nil, options: [])
            try await c.expectError(.noSuchItem, "moving into a deleted folder") { try await c.move(file, to: folder.identifier) }
            try c.expect(try await c.list().map(\.filename) == ["homeless"], "a refused move moved")
        }),
        ("moveFolderIntoItselfFails", { c in
            guard try await movesOrDeclined(c) else { return }
            let outer = try await c.createFolder("outer")
            let inner = try await c.createFolder("inner", in: outer.identifier)
            try await c.expectFailure("moving a folder into its own subfolder") { try await c.move(outer, to: inner.identifier) }
            try c.expect(try await c.list().map(\.filename) == ["outer"], "a refused move changed the root")
            try c.expect(try await c.list(outer.identifier).map(\.filename) == ["inner"], "a refused move changed the folder")
        }),
    ]
}
