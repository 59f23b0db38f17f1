import Foundation
import ProviderCore

// The checks every path-addressed adapter makes before it writes: the prologue of `createItem`
// (a safe name, the parent, no reserved name) and of `modifyItem` (the root is never renamed,
// a new name is safe, no reserved name in the new place). The adapters call these, so a new
// backend cannot forget one and all of them refuse the same things with the same messages.

extension ItemPath {
    /// The path of a child named `name` of this folder, after checking the name may be used
    /// there (`ItemPath.allowsChild(named:reservedPrefix:)`).
    ///
    /// - Parameters:
    ///   - name: the child's name, as the store or the engine gave it.
    ///   - reservedPrefix: the prefix of the backend's own temporary files, or `nil` when it
    ///     has none.
    /// - Throws: `invalidFilename` for an unsafe name, a special container's identifier at the
    ///   top level, or a name starting with `reservedPrefix`.
    public func child(named name: String, reservedPrefix: String?) throws(FileProviderError) -> ItemPath {
        let allowed =
            if let reservedPrefix {
                allowsChild(named: name, reservedPrefix: reservedPrefix)
            } else {
                Filename.isValid(name) && !(isRoot && Self.reservedNames.contains(name))
            }
        guard allowed else { throw FileProviderError(.invalidFilename, "the name \(name.debugDescription) is reserved") }
        return appending(name)
    }
}

/// A `createItem` call's new item, checked: the create prologue.
public struct NewItem: Sendable {
    /// The folder the item goes in.
    public let parent: ItemPath
    /// The item's path.
    public let path: ItemPath
    /// The call may be a replay of one that already ran (`CreateOptions.mayAlreadyExist`).
    public let replay: Bool

    /// Checks a template whose parent identifier is a path (`ItemPath.init(_:)`).
    ///
    /// - Throws: `invalidFilename` for an unsafe or reserved name (see
    ///   `ItemPath.child(named:reservedPrefix:)`); `noSuchItem` for a parent identifier that
    ///   names no path.
    public init(_ template: Item, options: CreateOptions, reservedPrefix: String?) throws(FileProviderError) {
        try Filename.validate(template.filename)
        try self.init(template, in: try ItemPath(template.parentIdentifier), options: options, reservedPrefix: reservedPrefix)
    }

    /// Checks a template whose parent the backend finds with `resolve` (a store with
    /// identifiers of its own).
    ///
    /// - Throws: `invalidFilename` for an unsafe or reserved name; what `resolve` throws.
    public init(
        _ template: Item, options: CreateOptions, reservedPrefix: String?,
        resolve: (ItemIdentifier) async throws(FileProviderError) -> ItemPath
    ) async throws(FileProviderError) {
        try Filename.validate(template.filename)
        try self.init(template, in: try await resolve(template.parentIdentifier), options: options, reservedPrefix: reservedPrefix)
    }

    private init(_ template: Item, in parent: ItemPath, options: CreateOptions, reservedPrefix: String?)
        throws(FileProviderError)
    {
        self.parent = parent
        path = try parent.child(named: template.filename, reservedPrefix: reservedPrefix)
        replay = options.contains(.mayAlreadyExist)
    }
}

/// A `modifyItem` call's change of place, checked: the modify prologue.
public struct ItemChange: Sendable {
    /// The item's path now.
    public let path: ItemPath
    /// The call renames or moves the item (`changedFields` has `filename` or
    /// `parentItemIdentifier`).
    public let renames: Bool
    /// The name the item is to have: the template's when `filename` changed, else its own.
    public let name: String
    private let newParent: ItemIdentifier?

    /// Checks a change of an item whose identifier is a path (`ItemPath.init(_:)`).
    ///
    /// - Throws: `noSuchItem` for an identifier that names no path; `invalidArgument` for a
    ///   rename or move of the root; `invalidFilename` for an unsafe new name.
    public init(_ item: Item, changedFields: ItemFields) throws(FileProviderError) {
        try self.init(item, at: try ItemPath(item.identifier), changedFields: changedFields)
    }

    /// Checks a change of an item the backend finds with `resolve`.
    ///
    /// - Throws: what `resolve` throws; `invalidArgument` for a rename or move of the root;
    ///   `invalidFilename` for an unsafe new name.
    public init(
        _ item: Item, changedFields: ItemFields, resolve: (ItemIdentifier) async throws(FileProviderError) -> ItemPath
    ) async throws(FileProviderError) {
        try self.init(item, at: try await resolve(item.identifier), changedFields: changedFields)
    }

    private init(_ item: Item, at path: ItemPath, changedFields: ItemFields) throws(FileProviderError) {
        self.path = path
        renames = changedFields.contains(.filename) || changedFields.contains(.parentItemIdentifier)
        if renames {
            if path.isRoot { throw FileProviderError(.invalidArgument, "the root cannot be renamed or moved") }
            try Filename.validate(item.filename)
        }
        name = changedFields.contains(.filename) ? item.filename : path.name
        newParent = changedFields.contains(.parentItemIdentifier) ? item.parentIdentifier : nil
    }

    /// The identifier of the folder the item is to be in: the template's when
    /// `parentItemIdentifier` changed, else `current`.
    public func parent(current: ItemIdentifier) -> ItemIdentifier { newParent ?? current }

    /// The parent `parentItemIdentifier` asks for, when it changed.
    public var movesTo: ItemIdentifier? { newParent }
}
