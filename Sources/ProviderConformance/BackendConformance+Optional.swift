import Foundation
import ProviderCore

extension BackendConformance {
    /// Drains the change feed from an anchor.
    static func changes(_ c: ConformanceContext, in container: ItemIdentifier, from anchor: SyncAnchor) async throws
        -> (updated: [Item], deleted: [ItemIdentifier], anchor: SyncAnchor)
    {
        var updated: [Item] = []
        var deleted: [ItemIdentifier] = []
        var current = anchor
        for _ in 0..<1000 {
            let set = try await c.backend.enumerateChanges(in: container, from: current)
            updated += set.updatedItems
            deleted += set.deletedIdentifiers
            current = set.newAnchor
            if !set.moreComing { return (updated, deleted, current) }
        }
        throw c.failure("the change feed keeps saying moreComing")
    }

    static let optionalAbilityChecks: [Check] = [
        (
            "executableBitGoesBothWaysWhereDeclared",
            { c in
                // A store that declares `supportsFileSystemFlags` keeps the executable bit a
                // modify of `.fileSystemFlags` sets: in the reply, `item(for:)` and the listing,
                // across new contents, and takes it away again. Without it nothing is checked
                // (a store may still report its modes).
                guard c.capabilities.supportsFileSystemFlags else { return }
                let item = try await c.createFile("tool", Data("#!/bin/sh\n".utf8))
                try c.expect(!item.fileSystemFlags.contains(.userExecutable), "a new plain file is reported executable")
                var executable = item
                executable.fileSystemFlags.insert(.userExecutable)
                let set = try await c.backend.modifyItem(
                    executable, baseVersion: item.version, changedFields: [.fileSystemFlags], contents: nil, options: []
                ).item
                try c.expect(set.fileSystemFlags.contains(.userExecutable), "modifyItem of fileSystemFlags did not set the executable bit")
                let found = try await c.backend.item(for: set.identifier)
                try c.expect(found.fileSystemFlags.contains(.userExecutable), "item(for:) does not report the executable bit set")
                let listed = try await c.child("tool")
                try c.expect(
                    listed?.fileSystemFlags.contains(.userExecutable) == true, "the listing does not report the executable bit set")
                let edited = try await c.setContents(found, Data("#!/bin/sh\nexit 0\n".utf8))
                try c.expect(edited.fileSystemFlags.contains(.userExecutable), "new contents lost the executable bit")
                var plain = edited
                plain.fileSystemFlags.remove(.userExecutable)
                let cleared = try await c.backend.modifyItem(
                    plain, baseVersion: edited.version, changedFields: [.fileSystemFlags], contents: nil, options: []
                ).item
                try c.expect(
                    !cleared.fileSystemFlags.contains(.userExecutable), "modifyItem of fileSystemFlags did not clear the executable bit")
            }
        ),
        (
            "symlinksAreReportedAsSymlinks",
            { c in
                let template = c.template("link", in: .rootContainer, kind: .symlink, target: "../outside/target")
                // A store that creates symlinks holds them: the two flags cannot disagree.
                try c.expect(
                    !c.capabilities.creatableKinds.contains(.symlink) || c.capabilities.supportsSymlinks,
                    "creatableKinds has .symlink but supportsSymlinks is false")
                guard c.capabilities.creatableKinds.contains(.symlink) else {
                    try await c.expectError(.notSupported, "creating a symlink in a store that cannot") {
                        try await c.backend.createItem(basedOn: template, fields: [], contents: nil, options: [])
                    }
                    return
                }
                let link = try await c.backend.createItem(basedOn: template, fields: [], contents: nil, options: []).item
                try c.expect(link.kind == .symlink, "a created symlink is reported as \(link.kind)")
                try c.expect(link.symlinkTargetPath == "../outside/target", "symlink target \(link.symlinkTargetPath ?? "nil")")
                let listed = try await c.child("link")
                try c.expect(listed?.kind == .symlink, "the listing reports the symlink as \(String(describing: listed?.kind))")
                try c.expect(listed?.symlinkTargetPath == "../outside/target", "the listing's symlink target differs")
            }
        ),
        (
            "changeFeedReportsChanges",
            { c in
                guard c.capabilities.hasChangeFeed else {
                    try await c.expectError(.notSupported, "currentSyncAnchor without a change feed") {
                        try await c.backend.currentSyncAnchor(for: .workingSet)
                    }
                    try await c.expectError(.notSupported, "enumerateChanges without a change feed") {
                        try await c.backend.enumerateChanges(in: .workingSet, from: SyncAnchor(Data("x".utf8)))
                    }
                    return
                }
                let doomed = try await c.createFile("doomed", Data("bye".utf8))
                let edited = try await c.createFile("edited", Data("one".utf8))
                let anchor = try await c.backend.currentSyncAnchor(for: .workingSet)
                let created = try await c.createFile("created", Data("new".utf8))
                let folder = try await c.createFolder("new-folder")
                let newer = try await c.setContents(edited, Data("two, longer".utf8))
                try await c.backend.deleteItem(identifier: doomed.identifier, baseVersion: nil, options: [])
                let result = try await changes(c, in: .workingSet, from: anchor)
                func updated(_ item: Item) -> Item? { result.updated.last { $0.identifier.isExactly(item.identifier) } }
                try c.expect(updated(created) != nil, "a created file is not in the changes")
                try c.expect(updated(folder)?.kind == .folder, "a created folder is not in the changes")
                try c.expect(updated(newer)?.version == newer.version, "an edited file is not in the changes with its new version")
                try c.expect(result.deleted.contains { $0.isExactly(doomed.identifier) }, "a deleted file is not in the deletions")
                let again = try await changes(c, in: .workingSet, from: result.anchor)
                try c.expect(again.updated.isEmpty && again.deleted.isEmpty, "changes from the newest anchor are not empty")
                let folderAnchor = try await c.backend.currentSyncAnchor(for: folder.identifier)
                let child = try await c.createFile("child", in: folder.identifier)
                let inFolder = try await changes(c, in: folder.identifier, from: folderAnchor)
                try c.expect(inFolder.updated.contains { $0.identifier.isExactly(child.identifier) }, "a folder's feed misses a new child")
            }
        ),
        (
            "changeFeedReportsMoves",
            { c in
                guard c.capabilities.hasChangeFeed, try await movesOrDeclined(c) else { return }
                let box = try await c.createFolder("box")
                _ = try await c.createFile("inside", in: box.identifier)
                let loose = try await c.createFile("loose")
                let target = try await c.createFolder("target")
                let anchor = try await c.backend.currentSyncAnchor(for: .workingSet)
                let renamed = try await c.rename(loose, to: "renamed")
                let moved = try await c.move(box, to: target.identifier)
                let result = try await changes(c, in: .workingSet, from: anchor)
                func updated(_ identifier: ItemIdentifier) -> Item? { result.updated.last { $0.identifier.isExactly(identifier) } }
                try c.expect(updated(renamed.identifier)?.filename == "renamed", "a renamed file is not in the changes under its new name")
                try c.expect(
                    updated(moved.identifier)?.parentIdentifier.isExactly(target.identifier) == true,
                    "a moved folder is not in the changes in its new folder")
                guard c.capabilities.identifiersArePathDerived else { return }
                try c.expect(result.deleted.contains { $0.isExactly(loose.identifier) }, "a renamed file's old identifier is not deleted")
                try c.expect(result.deleted.contains { $0.isExactly(box.identifier) }, "a moved folder's old identifier is not deleted")
                // Below a moved folder every identifier is new: the feed names them all.
                guard let inside = try await c.child("inside", in: moved.identifier) else {
                    throw c.failure("the moved folder lost its file")
                }
                try c.expect(
                    updated(inside.identifier) != nil, "a file inside a moved folder is not in the changes under its new identifier")
            }
        ),
        (
            "changeFeedRejectsUnknownAnchor",
            { c in
                let garbage = SyncAnchor(Data("not an anchor of this store".utf8))
                guard c.capabilities.hasChangeFeed else {
                    try await c.expectError(.notSupported, "enumerateChanges without a change feed") {
                        try await c.backend.enumerateChanges(in: .workingSet, from: garbage)
                    }
                    return
                }
                try await c.expectError(.syncAnchorExpired, "enumerateChanges from an anchor the store never made") {
                    try await c.backend.enumerateChanges(in: .workingSet, from: garbage)
                }
            }
        ),
        (
            "thumbnailsDeclinedOrServed",
            { c in
                let file = try await c.createFile("notes.txt", Data("not an image".utf8))
                guard c.capabilities.supportsThumbnails else {
                    try await c.expectError(.notSupported, "fetchThumbnail without thumbnail support") {
                        try await c.backend.fetchThumbnail(for: file.identifier, size: 128)
                    }
                    return
                }
                try await c.expectError(.notSupported, "a thumbnail of a text file") {
                    try await c.backend.fetchThumbnail(for: file.identifier, size: 128)
                }
                try await c.backend.deleteItem(identifier: file.identifier, baseVersion: nil, options: [])
                try await c.expectError(.noSuchItem, "a thumbnail of a deleted file") {
                    try await c.backend.fetchThumbnail(for: file.identifier, size: 128)
                }
            }
        ),
    ]
}
