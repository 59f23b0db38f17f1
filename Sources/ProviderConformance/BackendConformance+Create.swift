import Foundation
import ProviderCore

extension BackendConformance {
    static let createChecks: [Check] = [
        (
            "createFolder",
            { c in
                let folder = try await c.createFolder("new-folder")
                let found = try await c.backend.item(for: folder.identifier)
                try c.expectSame(found, folder, "item(for:) of a new folder")
                try c.expect(try await c.child("new-folder")?.kind == .folder, "the new folder is not listed as a folder")
            }
        ),
        (
            "createNestedFolders",
            { c in
                let a = try await c.createFolder("a")
                let b = try await c.createFolder("b", in: a.identifier)
                let d = try await c.createFolder("c", in: b.identifier)
                let file = try await c.createFile("deep.txt", in: d.identifier, Data("deep".utf8))
                try c.expect(try await c.fetch(file.identifier) == Data("deep".utf8), "the nested file's bytes differ")
                try c.expect(try await c.list(b.identifier).map(\.filename) == ["c"], "a/b does not list c")
            }
        ),
        (
            "createdItemsAreWhereAsked",
            { c in
                // The engine takes any other item for a lie (corruptData): the reply names the
                // folder asked for, by the identifier given, and the name asked for, by bytes.
                let folder = try await c.createFolder("where")
                let file = try await c.createFile("asked.txt", in: folder.identifier, Data("here".utf8))
                let sub = try await c.createFolder("sub", in: folder.identifier)
                for (item, name) in [(file, "asked.txt"), (sub, "sub")] {
                    try c.expect(
                        item.parentIdentifier.isExactly(folder.identifier),
                        "\(name) was created in \(item.parentIdentifier), not \(folder.identifier)")
                    try c.expect(item.filename.utf8.elementsEqual(name.utf8), "\(name) was created as \(item.filename.debugDescription)")
                }
            }
        ),
        (
            "createReplayReturnsSameFile",
            { c in
                let data = Data("replayed".utf8)
                let template = c.template("replay.txt", in: .rootContainer, kind: .file)
                let first = try await c.backend.createItem(
                    basedOn: template, fields: [.contents], contents: try c.file(data), options: []
                ).item
                let second = try await c.backend.createItem(
                    basedOn: template, fields: [.contents], contents: try c.file(data), options: [.mayAlreadyExist]
                ).item
                try c.expect(
                    second.identifier.isExactly(first.identifier), "a replay returned \(second.identifier), not \(first.identifier)")
                let listed = try await c.list()
                try c.expect(listed.count == 1, "a replay left \(listed.count) items: \(listed.map(\.filename))")
                try c.expect(try await c.fetch(second.identifier) == data, "a replay changed the bytes")
            }
        ),
        (
            "createReplayReturnsSameFolder",
            { c in
                let template = c.template("replay-folder", in: .rootContainer, kind: .folder)
                let first = try await c.backend.createItem(basedOn: template, fields: [], contents: nil, options: []).item
                try await c.createFile("inside", in: first.identifier)
                let second = try await c.backend.createItem(
                    basedOn: template, fields: [], contents: nil, options: [.mayAlreadyExist]
                ).item
                try c.expect(
                    second.identifier.isExactly(first.identifier), "a replay returned \(second.identifier), not \(first.identifier)")
                try c.expect(try await c.list().count == 1, "a replay made a duplicate folder")
                try c.expect(try await c.list(first.identifier).count == 1, "a replay lost the folder's contents")
            }
        ),
        (
            "createReplayWithNewContentsOverwrites",
            { c in
                let template = c.template("upload.bin", in: .rootContainer, kind: .file)
                _ = try await c.backend.createItem(
                    basedOn: template, fields: [.contents], contents: try c.file(Data("partial".utf8)), options: [])
                let final = Data("the whole upload".utf8)
                let replayed = try await c.backend.createItem(
                    basedOn: template, fields: [.contents], contents: try c.file(final), options: [.mayAlreadyExist]
                ).item
                try c.expect(try await c.list().count == 1, "a replay made a duplicate")
                try c.expect(try await c.fetch(replayed.identifier) == final, "a replay did not end with the template's contents")
                try c.expect(replayed.size == Int64(final.count), "a replay reports size \(replayed.size)")
            }
        ),
        (
            "createCollisionThrowsFilenameCollision",
            { c in
                let original = Data("original".utf8)
                let file = try await c.createFile("taken", original)
                try await c.expectError(.filenameCollision, "creating a file over an existing name") {
                    try await c.createFile("taken", Data("intruder".utf8))
                }
                try await c.expectError(.filenameCollision, "creating a folder over an existing file name") {
                    try await c.createFolder("taken")
                }
                try c.expect(try await c.fetch(file.identifier) == original, "a refused creation changed the existing file")
            }
        ),
        (
            "createReplayOfOtherKindThrowsFilenameCollision",
            { c in
                try await c.createFile("a-file")
                try await c.expectError(.filenameCollision, "replaying a folder creation over a file") {
                    try await c.createFolder("a-file", options: [.mayAlreadyExist])
                }
                try await c.createFolder("a-folder")
                try await c.expectError(.filenameCollision, "replaying a file creation over a folder") {
                    try await c.createFile("a-folder", options: [.mayAlreadyExist])
                }
            }
        ),
        (
            "createInMissingParentThrowsNoSuchItem",
            { c in
                let folder = try await c.createFolder("doomed")
                try await c.backend.deleteItem(identifier: folder.identifier, baseVersion: nil, options: [.recursive])
                try await c.expectError(.noSuchItem, "creating a file in a deleted folder") {
                    try await c.createFile("orphan", in: folder.identifier)
                }
                try await c.expectError(.noSuchItem, "creating a folder in a deleted folder") {
                    try await c.createFolder("orphan", in: folder.identifier)
                }
            }
        ),
        (
            "concurrentCreatesInOneFolder",
            { c in
                let folder = try await c.createFolder("busy")
                let backend = c.backend
                var uploads: [(Item, URL)] = []
                for index in 0..<16 {
                    uploads.append((c.template("file-\(index)", in: folder.identifier, kind: .file), try c.file(Data("\(index)".utf8))))
                }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (template, url) in uploads {
                        group.addTask {
                            _ = try await backend.createItem(basedOn: template, fields: [.contents], contents: url, options: [])
                        }
                    }
                    try await group.waitForAll()
                }
                let names = Set(try await c.list(folder.identifier).map(\.filename))
                try c.expect(
                    names == Set((0..<16).map { "file-\($0)" }), "after 16 concurrent creations the folder lists \(names.sorted())")
            }
        ),
    ]

    static let deleteChecks: [Check] = [
        (
            "deleteFile",
            { c in
                let file = try await c.createFile("delete-me")
                try await c.backend.deleteItem(identifier: file.identifier, baseVersion: file.version, options: [])
                try c.expect(try await c.list().isEmpty, "a deleted file is still listed")
            }
        ),
        (
            "deleteFolderRecursively",
            { c in
                let folder = try await c.createFolder("tree")
                let sub = try await c.createFolder("sub", in: folder.identifier)
                try await c.createFile("leaf", in: sub.identifier)
                try await c.createFile("top", in: folder.identifier)
                try await c.backend.deleteItem(identifier: folder.identifier, baseVersion: nil, options: [.recursive])
                try c.expect(try await c.list().isEmpty, "a recursively deleted folder is still listed")
                try await c.expectError(.noSuchItem, "item(for:) of a child of a deleted folder") {
                    try await c.backend.item(for: sub.identifier)
                }
            }
        ),
        (
            "deleteEmptyFolder",
            { c in
                let folder = try await c.createFolder("hollow")
                try await c.backend.deleteItem(identifier: folder.identifier, baseVersion: folder.version, options: [])
                try c.expect(try await c.list().isEmpty, "a deleted empty folder is still listed")
            }
        ),
        (
            "deleteNonEmptyFolderThrowsDirectoryNotEmpty",
            { c in
                let folder = try await c.createFolder("full")
                let file = try await c.createFile("keep", in: folder.identifier, Data("kept".utf8))
                try await c.expectError(.directoryNotEmpty, "deleting a non-empty folder without recursive") {
                    try await c.backend.deleteItem(identifier: folder.identifier, baseVersion: nil, options: [])
                }
                try c.expect(try await c.fetch(file.identifier) == Data("kept".utf8), "a refused deletion lost a child")
            }
        ),
        (
            "deleteWithStaleBaseVersionThrowsVersionOutOfDate",
            { c in
                let file = try await c.createFile("contested", Data("v1".utf8))
                let newer = try await c.setContents(file, Data("v2 is longer".utf8))
                try await c.expectError(.versionOutOfDate, "deleting with a stale base version") {
                    try await c.backend.deleteItem(identifier: file.identifier, baseVersion: file.version, options: [])
                }
                try c.expect(try await c.fetch(newer.identifier) == Data("v2 is longer".utf8), "a refused deletion changed the file")
            }
        ),
        (
            "deleteMissingThrowsNoSuchItem",
            { c in
                let file = try await c.createFile("twice")
                try await c.backend.deleteItem(identifier: file.identifier, baseVersion: nil, options: [])
                try await c.expectError(.noSuchItem, "deleting a deleted file") {
                    try await c.backend.deleteItem(identifier: file.identifier, baseVersion: nil, options: [])
                }
            }
        ),
    ]
}
