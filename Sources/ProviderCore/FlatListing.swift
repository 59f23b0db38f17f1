/// A store that lists every item below the domain's root in pages, without a request per
/// folder (rclone's `ListR`; S3's `ListObjectsV2` without a delimiter, 1,000 keys a request).
/// The engine's sync walks such a store from a flat listing instead of folder by folder: the
/// pages go into a spool file on disk (memory stays bounded), and each folder's listing is read
/// from it. A store that adopts it keeps ``Backend/enumerateItems(in:startingAt:)``: the engine
/// walks folder by folder when the flat listing fails, and below the root.
public protocol FlatListing: Backend {
    /// Whether the engine should use the flat listing (an adapter may let its user turn it off).
    var listsFlat: Bool { get }

    /// Returns one page of every item below the root, in any order; each item's
    /// `parentIdentifier` names its folder (``ItemIdentifier/rootContainer`` or the root item's
    /// identifier in the root). A folder may come on several pages (the engine keeps the first).
    /// Items the store describes impossibly go into `refused`.
    ///
    /// - Throws: `pageExpired` for a page the backend did not make; `corruptData` for a store
    ///   that pages forever; what listing a folder throws.
    func enumerateAllItems(startingAt page: Page) async throws(FileProviderError) -> ItemPage
}
