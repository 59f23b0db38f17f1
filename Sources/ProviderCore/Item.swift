import Foundation

/// What an item is.
public enum ItemKind: String, Hashable, Sendable, Codable, CaseIterable {
    case file
    case folder
    case symlink
}

/// The metadata of one item of a domain, as in Apple's `NSFileProviderItem`.
public struct Item: Hashable, Sendable, Codable {
    public var identifier: ItemIdentifier
    public var parentIdentifier: ItemIdentifier
    /// The item's name in its folder. Never trusted as-is: see ``Filename/validate(_:)``.
    public var filename: String
    public var kind: ItemKind
    /// A uniform type identifier such as `public.jpeg`, `public.folder` or `public.data`.
    public var contentType: String
    /// The size of the contents in bytes (0 for folders, the target's length for symlinks).
    public var size: Int64
    public var creationDate: Date?
    public var contentModificationDate: Date?
    public var version: ItemVersion
    public var capabilities: ItemCapabilities
    /// The target of a symlink, exactly as the store reports it; never followed by the engine.
    public var symlinkTargetPath: String?
    /// A hash of the contents in the form `algorithm:hex` (for example `sha256:…`), where the
    /// backend has one; the engine checks downloads against it.
    public var contentHash: String?
    /// Executable, writable, hidden, as in Apple's `fileSystemFlags`; ``FileSystemFlags/plainFile``
    /// unless the store says otherwise (stores with POSIX modes: local, SFTP; external
    /// programs that send them).
    public var fileSystemFlags: FileSystemFlags = .plainFile

    public init(
        identifier: ItemIdentifier,
        parentIdentifier: ItemIdentifier,
        filename: String,
        kind: ItemKind,
        contentType: String? = nil,
        size: Int64 = 0,
        creationDate: Date? = nil,
        contentModificationDate: Date? = nil,
        version: ItemVersion = .empty,
        capabilities: ItemCapabilities? = nil,
        symlinkTargetPath: String? = nil,
        contentHash: String? = nil,
        fileSystemFlags: FileSystemFlags = .plainFile
    ) {
        self.identifier = identifier
        self.parentIdentifier = parentIdentifier
        self.filename = filename
        self.kind = kind
        self.contentType = contentType ?? ContentType.guess(filename: filename, kind: kind)
        self.size = size
        self.creationDate = creationDate
        self.contentModificationDate = contentModificationDate
        self.version = version
        self.capabilities = capabilities ?? (kind == .folder ? .folder : .file)
        self.symlinkTargetPath = symlinkTargetPath
        self.contentHash = contentHash
        self.fileSystemFlags = fileSystemFlags
    }

    /// A template for `Backend.createItem`: a temporary identifier chosen by the engine, the
    /// parent and the name.
    public static func template(
        identifier: ItemIdentifier, parent: ItemIdentifier, filename: String, kind: ItemKind,
        size: Int64 = 0, contentModificationDate: Date? = nil, symlinkTargetPath: String? = nil
    ) -> Item {
        Item(
            identifier: identifier, parentIdentifier: parent, filename: filename, kind: kind,
            size: size, contentModificationDate: contentModificationDate,
            symlinkTargetPath: symlinkTargetPath)
    }
}

/// Uniform type identifiers guessed from a file name.
public enum ContentType {
    public static let folder = "public.folder"
    public static let symlink = "public.symlink"
    public static let data = "public.data"

    private static let byExtension: [String: String] = [
        "jpg": "public.jpeg", "jpeg": "public.jpeg", "png": "public.png", "gif": "com.compuserve.gif",
        "heic": "public.heic", "txt": "public.plain-text", "md": "net.daringfireball.markdown",
        "json": "public.json", "pdf": "com.adobe.pdf", "html": "public.html", "zip": "public.zip-archive",
        "mp4": "public.mpeg-4", "mov": "com.apple.quicktime-movie", "mp3": "public.mp3",
        "swift": "public.swift-source", "c": "public.c-source", "h": "public.c-header",
    ]

    private static let mimeTypes: [String: String] = [
        folder: "inode/directory", symlink: "inode/symlink", data: "application/octet-stream",
        "public.jpeg": "image/jpeg", "public.png": "image/png", "com.compuserve.gif": "image/gif", "public.heic": "image/heic",
        "org.webmproject.webp": "image/webp", "public.tiff": "image/tiff", "public.plain-text": "text/plain",
        "net.daringfireball.markdown": "text/markdown", "public.json": "application/json", "com.adobe.pdf": "application/pdf",
        "public.html": "text/html", "public.zip-archive": "application/zip", "public.mpeg-4": "video/mp4",
        "com.apple.quicktime-movie": "video/quicktime", "public.mp3": "audio/mpeg", "public.swift-source": "text/x-swift",
        "public.c-source": "text/x-c", "public.c-header": "text/x-c",
    ]

    /// The MIME type of a uniform type identifier (`public.jpeg`: `image/jpeg`; a folder is
    /// `inode/directory`, a symlink `inode/symlink`, as `file --mime-type` says), for programs
    /// that know MIME types rather than Apple's identifiers. A type that is already a MIME type
    /// (`type/subtype`) is returned as it is; an unknown one is `application/octet-stream`.
    public static func mimeType(of contentType: String) -> String {
        if let known = mimeTypes[contentType] { return known }
        if contentType.contains("/") { return contentType }
        return "application/octet-stream"
    }

    /// The type an item of `kind` has when nothing more is known of it: `public.data` for a
    /// file, `public.folder`, `public.symlink`.
    public static func implied(by kind: ItemKind) -> String {
        switch kind {
        case .file: data
        case .folder: folder
        case .symlink: symlink
        }
    }

    /// The type of an item from its kind and the extension of its name.
    public static func guess(filename: String, kind: ItemKind) -> String {
        guard kind == .file else { return implied(by: kind) }
        if let known = guessASCII(filename) { return known }
        guard let dot = filename.lastIndex(of: "."), dot != filename.startIndex else { return data }
        let ext = filename[filename.index(after: dot)...].lowercased()
        return byExtension[ext] ?? data
    }

    /// The longest extension ``byExtension`` knows.
    private static let longestExtension = 5

    /// ``guess(filename:kind:)`` for a file whose extension and the byte before its dot are
    /// ASCII (every listed item's type is guessed: this looks at bytes, where the general
    /// path breaks the name into characters and lowercases a copy of the extension); `nil`
    /// for any other name, which the general path answers.
    private static func guessASCII(_ filename: String) -> String? {
        let utf8 = filename.utf8
        guard let dot = utf8.lastIndex(of: 0x2E) else { return data }
        // A dot first (a hidden file without extension) or after a byte that is not ASCII
        // (where a character may join it): the general path.
        guard dot != utf8.startIndex, utf8[utf8.index(before: dot)] < 0x80 else { return nil }
        let ext = utf8[utf8.index(after: dot)...]
        if ext.contains(where: { $0 >= 0x80 }) { return nil }
        if ext.count > longestExtension { return data }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: longestExtension) { buffer in
            var count = 0
            for byte in ext {
                buffer[count] = byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte
                count += 1
            }
            // At most five bytes: a small string, no allocation.
            return byExtension[String(decoding: UnsafeBufferPointer(rebasing: buffer[0..<count]), as: UTF8.self)] ?? data
        }
    }
}

/// One page of a folder listing.
public struct ItemPage: Sendable {
    public var items: [Item]
    /// Where the next page starts, or `nil` when this was the last page.
    public var nextPage: Page?
    /// Entries of this page left out because a value of theirs is impossible (see
    /// ``ItemBounds``); the engine reports each one.
    public var refused: [RefusedItem]

    public init(items: [Item], nextPage: Page?, refused: [RefusedItem] = []) {
        self.items = items
        self.nextPage = nextPage
        self.refused = refused
    }
}

/// Every item of a folder, from all the pages of its listing.
public struct ItemListing: Sendable {
    public var items: [Item]
    /// Entries left out because a value of theirs is impossible.
    public var refused: [RefusedItem]

    public init(items: [Item], refused: [RefusedItem] = []) {
        self.items = items
        self.refused = refused
    }
}

/// What `Backend.createItem` and `Backend.modifyItem` return.
public struct ItemResult: Sendable {
    /// The item as the store now has it (a new identifier after a rename in a path-addressed store).
    public var item: Item
    /// Fields the backend could not apply yet; the engine sends them again later.
    public var stillPendingFields: ItemFields
    /// The store changed the contents on its side (for example a converted upload): the engine
    /// must download them again.
    public var shouldFetchContent: Bool

    public init(item: Item, stillPendingFields: ItemFields = [], shouldFetchContent: Bool = false) {
        self.item = item
        self.stillPendingFields = stillPendingFields
        self.shouldFetchContent = shouldFetchContent
    }
}
