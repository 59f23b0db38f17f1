import AdapterKit
import Foundation
import ProviderCore
import Testing

/// The create and modify prologue every path-addressed adapter runs: unsafe and reserved
/// names refused, the root never renamed, the new place worked out the same way everywhere.
@Suite struct WriteChecksTests {
    static func template(_ name: String, in parent: ItemIdentifier = .rootContainer) -> Item {
        Item(identifier: ItemIdentifier("new"), parentIdentifier: parent, filename: name, kind: .file)
    }

    static func code(_ body: () throws(FileProviderError) -> Void) -> FileProviderError.Code? {
        do {
            try body()
            return nil
        } catch {
            return error.code
        }
    }

    @Test func aNewItemsPathAndReplay() throws {
        let new = try NewItem(Self.template("b.txt", in: ItemIdentifier("docs/a")), options: [.mayAlreadyExist], reservedPrefix: nil)
        #expect(new.parent == ItemPath(components: ["docs", "a"]))
        #expect(new.path.identifier == ItemIdentifier("docs/a/b.txt"))
        #expect(new.replay)
        #expect(try NewItem(Self.template("b.txt"), options: [], reservedPrefix: nil).replay == false)
    }

    @Test(arguments: ["", ".", "..", "a/b", "a\u{0}b", String(repeating: "x", count: 256)])
    func anUnsafeNameIsRefused(_ name: String) {
        #expect(
            Self.code { () throws(FileProviderError) in _ = try NewItem(Self.template(name), options: [], reservedPrefix: nil) }
                == .invalidFilename)
    }

    /// A special container's identifier is refused at the top level only; a backend's own
    /// prefix anywhere.
    @Test func reservedNames() throws {
        for name in ItemPath.reservedNames {
            let error = Self.code { () throws(FileProviderError) in _ = try NewItem(Self.template(name), options: [], reservedPrefix: nil) }
            #expect(error == .invalidFilename, "\(name)")
            #expect(try NewItem(Self.template(name, in: ItemIdentifier("docs")), options: [], reservedPrefix: nil).path.name == name)
        }
        let staged = Self.template(".stage-1", in: ItemIdentifier("docs"))
        #expect(
            Self.code { () throws(FileProviderError) in _ = try NewItem(staged, options: [], reservedPrefix: ".stage-") }
                == .invalidFilename)
        #expect(try NewItem(staged, options: [], reservedPrefix: nil).path.name == ".stage-1")
    }

    @Test func aParentThatNamesNoPathIsNoSuchItem() {
        let template = Self.template("a", in: ItemIdentifier("docs/../etc"))
        #expect(Self.code { () throws(FileProviderError) in _ = try NewItem(template, options: [], reservedPrefix: nil) } == .noSuchItem)
    }

    /// The name is checked before the parent is looked up.
    @Test func theResolvedParentIsUsedAfterTheNameIsChecked() async throws {
        let looked = Counter()
        let resolve: (ItemIdentifier) async throws(FileProviderError) -> ItemPath = { _ in
            looked.count += 1
            return ItemPath(components: ["elsewhere"])
        }
        let new = try await NewItem(Self.template("a"), options: [], reservedPrefix: nil, resolve: resolve)
        #expect(new.path.identifier == ItemIdentifier("elsewhere/a"))
        do {
            _ = try await NewItem(Self.template(".."), options: [], reservedPrefix: nil, resolve: resolve)
            Issue.record("'..' was taken")
        } catch {
            #expect(error.code == .invalidFilename)
        }
        #expect(looked.count == 1)
    }

    @Test func aChangeOfPlace() throws {
        var item = Item(identifier: ItemIdentifier("docs/a.txt"), parentIdentifier: ItemIdentifier("docs"), filename: "b.txt", kind: .file)
        let rename = try ItemChange(item, changedFields: [.filename])
        #expect(rename.renames && rename.name == "b.txt" && rename.movesTo == nil)
        #expect(rename.parent(current: ItemIdentifier("docs")) == ItemIdentifier("docs"))
        item.parentIdentifier = ItemIdentifier("other")
        let move = try ItemChange(item, changedFields: [.parentItemIdentifier])
        #expect(move.renames && move.name == "a.txt" && move.movesTo == ItemIdentifier("other"))
        #expect(move.parent(current: ItemIdentifier("docs")) == ItemIdentifier("other"))
        let edit = try ItemChange(item, changedFields: [.contents])
        #expect(!edit.renames && edit.path.identifier == ItemIdentifier("docs/a.txt"))
    }

    @Test func theRootIsNeverRenamedAndANewNameMustBeSafe() {
        let root = Item(identifier: .rootContainer, parentIdentifier: .rootContainer, filename: "x", kind: .folder)
        #expect(Self.code { () throws(FileProviderError) in _ = try ItemChange(root, changedFields: [.filename]) } == .invalidArgument)
        #expect(Self.code { () throws(FileProviderError) in _ = try ItemChange(root, changedFields: [.contentModificationDate]) } == nil)
        let unsafe = Item(identifier: ItemIdentifier("a"), parentIdentifier: .rootContainer, filename: "../a", kind: .file)
        #expect(Self.code { () throws(FileProviderError) in _ = try ItemChange(unsafe, changedFields: [.filename]) } == .invalidFilename)
        // A name that is not changed is not checked.
        #expect(Self.code { () throws(FileProviderError) in _ = try ItemChange(unsafe, changedFields: [.contents]) } == nil)
    }

    @Test func aChildsNameIsChecked() throws {
        #expect(try ItemPath.root.child(named: "a", reservedPrefix: ".x-").identifier == ItemIdentifier("a"))
        #expect(
            Self.code { () throws(FileProviderError) in _ = try ItemPath.root.child(named: ".x-1", reservedPrefix: ".x-") }
                == .invalidFilename)
        #expect(
            Self.code { () throws(FileProviderError) in _ = try ItemPath.root.child(named: "a/b", reservedPrefix: nil) } == .invalidFilename
        )
    }
}

/// A count a non-escaping closure adds to.
final class Counter: @unchecked Sendable {
    var count = 0
}
