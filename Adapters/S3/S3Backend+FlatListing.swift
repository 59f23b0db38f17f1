import AdapterKit
import Foundation
import ProviderCore

extension S3Backend {
    /// The most keys a flat listing goes through (20,000,000: ten times the most entries one
    /// folder may have) before it stops as a server that pages forever.
    static let maximumFlatKeys = 10 * ItemBounds.maximumEntriesPerFolder

    /// Returns one page of every item below the domain's root, for a first sync of a deep
    /// bucket: one `ListObjectsV2` request of up to 1,000 keys without a delimiter, rather than
    /// a request (and a `HEAD`) per folder. Files come from objects; folders from marker
    /// objects and from the folders between the root and each key, so a folder shows on every
    /// page that holds keys below it (the caller merges them by identifier). Unsafe names, and
    /// keys below them, go into `refused`. In a versioned bucket the pages are
    /// `ListObjectVersions` pages, of which the current objects are taken (with their version
    /// ids; folders only from those).
    ///
    /// Keys are not checked to ascend from page to page (AWS, SeaweedFS 4.48 and moto 5.2.1
    /// list in byte order, `a-c` before `a/b`, but S3's clones over a file system need not). A
    /// page is checked against the one before (``listPage(prefix:delimiter:token:maxKeys:)``'s checks, and its first key must
    /// not be the first key of the page before), and the listing stops past
    /// ``maximumFlatKeys``.
    ///
    /// - Throws: `pageExpired` for a page this backend did not make; `corruptData` for a
    ///   server that gives the same page again under a new token, or lists past
    ///   ``maximumFlatKeys``; what ``listPage(prefix:delimiter:token:maxKeys:)`` throws.
    public func enumerateAllItems(startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        var state = FlatPage(number: 0, previousFirst: "", token: nil)
        if !page.isInitial {
            guard let decoded = FlatPage(page) else { throw FileProviderError(.pageExpired, "a page this backend did not make") }
            state = decoded
        }
        if state.number * Self.pageSize >= Self.maximumFlatKeys {
            throw FileProviderError(
                .corruptData,
                "the flat listing of \(prefix.isEmpty ? "the bucket" : "'\(prefix)'") goes past \(Self.maximumFlatKeys) keys (a server that pages forever?); it was stopped"
            )
        }
        let listing = try await listPage(prefix: prefix, delimiter: false, token: state.token, versions: versioned)
        let first = listing.objects.first.map { FlatPage.fingerprint($0.key) } ?? ""
        if state.number > 0, !first.isEmpty, first == state.previousFirst {
            throw FileProviderError(
                .corruptData,
                "the flat listing of \(prefix.isEmpty ? "the bucket" : "'\(prefix)'"): the server sent the same page again under a new continuation token (it would page forever)"
            )
        }
        var items: [Item] = []
        var refused: [RefusedItem] = []
        var folders = Set<ItemPath>()
        func addFolder(_ path: ItemPath) {
            if !path.isRoot && folders.insert(path).inserted { items.append(folderItem(path)) }
        }
        for object in listing.objects where object.isCurrentObject {
            let rest = String(object.key.utf8.dropFirst(prefix.utf8.count)) ?? ""
            if rest.isEmpty { continue }  // the root's own marker
            let isMarker = rest.hasSuffix("/")
            let names = (isMarker ? String(rest.dropLast()) : rest).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            var path = ItemPath.root
            var safe = true
            for (index, name) in names.enumerated() {
                guard path.allowsChild(named: name, reservedPrefix: "\u{0}") else {
                    refused.append(
                        RefusedItem(
                            identifier: nil, filename: name,
                            reason: "the name '\(name.prefix(100))' in the key '\(object.key.prefix(200))' is not safe here"))
                    safe = false
                    break
                }
                path = path.appending(name)
                if index < names.count - 1 { addFolder(path) }
            }
            guard safe else { continue }
            if isMarker {
                addFolder(path)
                continue
            }
            do throws(FileProviderError) {
                items.append(
                    try fileItem(
                        path, size: object.size, etag: object.etag, versionID: object.versionID, lastModified: object.lastModified,
                        dateFormat: .iso8601))
            } catch {
                refused.append(RefusedItem(identifier: path.identifier, filename: path.name, reason: error.message))
            }
        }
        var next: Page?
        if listing.isTruncated, let token = listing.nextContinuationToken {
            let page = FlatPage(number: state.number + 1, previousFirst: first, token: token).page
            guard let page else {
                throw FileProviderError(.corruptData, "the server's continuation token is longer than a page may hold")
            }
            next = page
        }
        return ItemPage(items: items, nextPage: next, refused: refused)
    }
}

/// Where a flat listing is: how many pages came before, a fingerprint of the first key of the
/// page before, and the continuation token (`f:NUMBER:FINGERPRINT:TOKEN` in a ``Page``).
struct FlatPage {
    var number: Int
    var previousFirst: String
    var token: String?

    init(number: Int, previousFirst: String, token: String?) {
        self.number = number
        self.previousFirst = previousFirst
        self.token = token
    }

    init?(_ page: Page) {
        let raw = String(decoding: page.rawValue, as: UTF8.self)
        let parts = raw.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "f", let number = Int(parts[1]), number > 0, !parts[3].isEmpty else { return nil }
        self.number = number
        previousFirst = String(parts[2])
        token = String(parts[3])
    }

    /// The page, or `nil` when the token makes it longer than ``Page/maximumLength``.
    var page: Page? {
        let raw = Data("f:\(number):\(previousFirst):\(token ?? "")".utf8)
        return raw.count <= Page.maximumLength ? Page(raw) : nil
    }

    /// 16 hex digits naming a key (the first half of its MD5).
    static func fingerprint(_ key: String) -> String { FileDigests.hex(Array(FileDigests.md5(of: Array(key.utf8)).prefix(8))) }
}
