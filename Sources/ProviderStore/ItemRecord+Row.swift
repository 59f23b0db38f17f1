import Foundation
import GRDB
import GRDBSQLite
import ProviderCore

extension ItemRecord {
    /// The columns in the order of ``init(row:)`` and ``bind(to:)``.
    static let columnList = """
        domainID, identifier, parentIdentifier, filename, path, kind, contentType, size, creationDate, \
        modificationDate, contentVersion, metadataVersion, capabilities, symlinkTarget, contentHash, state, \
        contentPolicy, localContentVersion, localSize, localModificationNanos, localInode, lastError, isDataless, \
        fileSystemFlags, contentSHA256, hashedContentVersion
        """
    static let columnCount: Int32 = 26
    static let placeholders = Array(repeating: "?", count: Int(columnCount)).joined(separator: ", ")

    /// The columns a row new in the store has values for (``isFresh``), in the order of
    /// ``bindFresh(to:firstIndex:arena:)``: ``columnList`` without the policy, the local
    /// columns, the error and the engine's hash, which an insert leaves `NULL`. A first sync binds
    /// 18 values a row instead of 26 (binding was a sixth of its database thread's time).
    static let freshColumnList = """
        domainID, identifier, parentIdentifier, filename, path, kind, contentType, size, creationDate, \
        modificationDate, contentVersion, metadataVersion, capabilities, symlinkTarget, contentHash, state, isDataless, \
        fileSystemFlags
        """
    static let freshColumnCount: Int32 = 18
    static let freshPlaceholders = Array(repeating: "?", count: Int(freshColumnCount)).joined(separator: ", ")

    /// Whether the columns ``freshColumnList`` leaves out are all `NULL` in this row: no policy
    /// set on it, nothing downloaded or recorded of a local copy, no error, no hash.
    var isFresh: Bool {
        contentPolicy == nil && localContentVersion == nil && localSize == nil && localModificationNanos == nil
            && localInode == nil && lastError == nil && contentSHA256 == nil && hashedContentVersion == nil
    }

    /// Decodes a row selected with ``columnList``, by position (faster than Codable).
    init(row: Row) {
        domainID = row[0]
        identifier = ItemIdentifier(row[1] as String)
        parentIdentifier = ItemIdentifier(row[2] as String)
        filename = row[3]
        path = row[4]
        kind = ItemKind(rawValue: row[5] as String) ?? .file
        // A row leaves out the type its kind implies (`ContentType.implied(by:)`): it stores
        // `''` (11–14 bytes less in nearly every row of a store that does not type its files).
        let storedType: String = row[6]
        contentType = storedType.isEmpty ? ContentType.implied(by: kind) : storedType
        size = row[7]
        creationDate = (row[8] as Double?).map(Date.init(timeIntervalSince1970:))
        modificationDate = (row[9] as Double?).map(Date.init(timeIntervalSince1970:))
        contentVersion = row[10]
        metadataVersion = row[11]
        capabilities = row[12]
        symlinkTarget = row[13]
        contentHash = row[14]
        state = ContentState(rawValue: row[15] as String) ?? .placeholder
        // An unknown policy (a newer version's) keeps the contents: read as eager.
        contentPolicy = (row[16] as String?).map { ContentPolicy(rawValue: $0) ?? .eager }
        localContentVersion = row[17]
        localSize = row[18]
        localModificationNanos = row[19]
        localInode = row[20]
        lastError = row[21]
        isDataless = row[22]
        fileSystemFlags = row[23]
        contentSHA256 = row[24]
        hashedContentVersion = row[25]
    }

    /// The bytes of this row's text and blob values: what ``bind(to:firstIndex:arena:)`` copies
    /// into its arena.
    ///
    /// This and the `bind` methods are `mutating` only so that a caller reads a row where it
    /// lies in an array's buffer (through an `UnsafeMutableBufferPointer`): a non-mutating call
    /// on an element copies the whole record first, a retain and a release of each of its
    /// strings and blobs, on the database's thread, for every row of a first sync. They change
    /// nothing.
    var boundByteCount: Int {
        mutating get {
            identifier.rawValue.utf8.count + parentIdentifier.rawValue.utf8.count + filename.utf8.count + path.utf8.count
                + kind.rawValue.utf8.count + contentType.utf8.count + contentVersion.count + metadataVersion.count
                + (symlinkTarget?.utf8.count ?? 0) + (contentHash?.utf8.count ?? 0) + state.rawValue.utf8.count
                + (localContentVersion?.count ?? 0) + (lastError?.utf8.count ?? 0) + (contentPolicy?.rawValue.utf8.count ?? 0)
                + (contentSHA256?.utf8.count ?? 0) + (hashedContentVersion?.count ?? 0)
        }
    }

    /// Binds the values, in the order of ``columnList``, straight to a prepared SQLite
    /// statement: a first sync writes 100,000 rows, and building `StatementArguments` (an
    /// array of existentials per row) costs more than SQLite's own work.
    /// The values go to parameters `firstIndex` to `firstIndex + 25` (one row of a
    /// multi-row statement). Text and blobs are copied into `arena` (which must have room for
    /// ``boundByteCount`` more bytes) and bound from there without another copy. Returns the
    /// first SQLite error code, or `SQLITE_OK`.
    mutating func bind(to statement: SQLiteStatement, firstIndex: Int32 = 1, arena: BindArena) -> Int32 {
        bind(to: statement, firstIndex: firstIndex, arena: arena, fresh: false)
    }

    /// ``bind(to:firstIndex:arena:)`` for a statement of ``freshColumnList``: the 18 values of
    /// a row that ``isFresh``, to parameters `firstIndex` to `firstIndex + 17`.
    mutating func bindFresh(to statement: SQLiteStatement, firstIndex: Int32 = 1, arena: BindArena) -> Int32 {
        bind(to: statement, firstIndex: firstIndex, arena: arena, fresh: true)
    }

    @inline(__always)
    private mutating func bind(to statement: SQLiteStatement, firstIndex: Int32, arena: BindArena, fresh: Bool) -> Int32 {
        var code = SQLITE_OK
        @inline(__always) func check(_ result: Int32) { if code == SQLITE_OK { code = result } }
        // A nil destructor is SQLITE_STATIC: SQLite reads the bytes where they are (in the
        // arena) until the binding is replaced or cleared.
        @inline(__always) func text(_ index: Int32, _ value: String?) {
            guard var value else { return check(sqlite3_bind_null(statement, index)) }
            value.withUTF8 { bytes in
                guard let copy = arena.copy(UnsafeRawBufferPointer(bytes)) else {
                    return check(sqlite3_bind_text(statement, index, "", 0, nil))
                }
                check(
                    sqlite3_bind_text(statement, index, copy.assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil))
            }
        }
        @inline(__always) func blob(_ index: Int32, _ value: Data?) {
            guard let value else { return check(sqlite3_bind_null(statement, index)) }
            value.withUnsafeBytes { bytes in
                // An empty blob is still a blob (NOT NULL columns): zeroblob(0), not NULL.
                guard let copy = arena.copy(bytes) else { return check(sqlite3_bind_zeroblob(statement, index, 0)) }
                check(sqlite3_bind_blob(statement, index, copy, Int32(bytes.count), nil))
            }
        }
        @inline(__always) func int(_ index: Int32, _ value: Int64?) {
            guard let value else { return check(sqlite3_bind_null(statement, index)) }
            check(sqlite3_bind_int64(statement, index, value))
        }
        @inline(__always) func double(_ index: Int32, _ value: Double?) {
            guard let value else { return check(sqlite3_bind_null(statement, index)) }
            check(sqlite3_bind_double(statement, index, value))
        }
        int(firstIndex, domainID)
        text(firstIndex + 1, identifier.rawValue)
        text(firstIndex + 2, parentIdentifier.rawValue)
        text(firstIndex + 3, filename)
        text(firstIndex + 4, path)
        text(firstIndex + 5, kind.rawValue)
        // (Small strings: compared without touching memory.)
        text(firstIndex + 6, contentType == ContentType.implied(by: kind) ? "" : contentType)
        int(firstIndex + 7, size)
        double(firstIndex + 8, creationDate?.timeIntervalSince1970)
        double(firstIndex + 9, modificationDate?.timeIntervalSince1970)
        blob(firstIndex + 10, contentVersion)
        blob(firstIndex + 11, metadataVersion)
        int(firstIndex + 12, Int64(capabilities))
        text(firstIndex + 13, symlinkTarget)
        text(firstIndex + 14, contentHash)
        text(firstIndex + 15, state.rawValue)
        if fresh {
            int(firstIndex + 16, isDataless ? 1 : 0)
            int(firstIndex + 17, Int64(fileSystemFlags))
            return code
        }
        text(firstIndex + 16, contentPolicy?.rawValue)
        blob(firstIndex + 17, localContentVersion)
        int(firstIndex + 18, localSize)
        int(firstIndex + 19, localModificationNanos)
        int(firstIndex + 20, localInode)
        text(firstIndex + 21, lastError)
        int(firstIndex + 22, isDataless ? 1 : 0)
        int(firstIndex + 23, Int64(fileSystemFlags))
        text(firstIndex + 24, contentSHA256)
        blob(firstIndex + 25, hashedContentVersion)
        return code
    }
}
