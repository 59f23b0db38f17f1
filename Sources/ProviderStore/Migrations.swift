import GRDB

/// The named, forward-only migrations of the metadata database. Never edit a shipped one: add a
/// new one at the end.
enum Migrations {
    /// The migrations in a `DatabaseMigrator`, which runs each in a transaction of its own.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for step in list.steps {
            migrator.registerMigration(step.identifier, foreignKeyChecks: step.foreignKeyChecks, migrate: step.migrate)
        }
        return migrator
    }

    /// Brings the database at `pool` to the latest schema. A new, empty database gets every
    /// migration in one transaction (``createSchema(in:)``); any other the migrations it has
    /// not had, each in its own. The caller holds the database's lock file (no other process
    /// migrates at once).
    /// - Throws: what the migrations or the database throw.
    static func migrate(_ pool: DatabasePool) throws {
        let isEmpty = try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") == 0 }
        if isEmpty { try pool.writeWithoutTransaction { db in try createSchema(in: db) } }
        try migrator.migrate(pool)
    }

    /// Makes on the empty database `db`, in one transaction, what every migration makes and
    /// records each as applied, as `DatabaseMigrator` does: the same schema and rows
    /// (``FreshSchema``; SchemaCreationTests compares the two), one commit instead of one per
    /// migration, and none of their table rebuilds (together a third of a first `domain add`'s
    /// work in the database, then a fifth). Foreign keys are off meanwhile, as for GRDB's
    /// deferred checks.
    /// - Throws: what the database throws; nothing is kept then.
    static func createSchema(in db: Database) throws {
        try db.execute(sql: "PRAGMA foreign_keys = OFF")
        defer { try? db.execute(sql: "PRAGMA foreign_keys = ON") }
        try db.inTransaction(.immediate) {
            try db.execute(sql: FreshSchema.sql)
            try db.checkForeignKeys()
            return .commit
        }
    }

    /// One migration as registered.
    struct Step: Sendable {
        let identifier: String
        let foreignKeyChecks: DatabaseMigrator.ForeignKeyChecks
        let migrate: @Sendable (Database) throws -> Void
    }

    /// The migrations in order, registered as a `DatabaseMigrator` takes them.
    struct List: Sendable {
        private(set) var steps: [Step] = []

        mutating func registerMigration(
            _ identifier: String, foreignKeyChecks: DatabaseMigrator.ForeignKeyChecks = .deferred,
            migrate: @escaping @Sendable (Database) throws -> Void
        ) {
            steps.append(Step(identifier: identifier, foreignKeyChecks: foreignKeyChecks, migrate: migrate))
        }
    }

    static let list: List = {
        var migrator = List()
        migrator.registerMigration("v1: domains, items, anchors, journal, checkpoints, thumbnails") { db in
            try db.create(table: "domain") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("name", .text).notNull().unique()
                t.column("backendKind", .text).notNull()
                t.column("configuration", .text).notNull()
                t.column("replicaPath", .text).notNull()
                t.column("createdAt", .datetime).notNull()
                t.column("isConnected", .boolean).notNull().defaults(to: true)
                t.column("lastSyncAt", .datetime)
                t.column("lastError", .text)
            }
            try db.create(table: "item", options: [.withoutRowID]) { t in
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("identifier", .text).notNull()
                t.column("parentIdentifier", .text).notNull()
                t.column("filename", .text).notNull()
                t.column("path", .text).notNull()
                t.column("kind", .text).notNull()
                t.column("contentType", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("creationDate", .double)
                t.column("modificationDate", .double)
                t.column("contentVersion", .blob).notNull()
                t.column("metadataVersion", .blob).notNull()
                t.column("capabilities", .integer).notNull()
                t.column("symlinkTarget", .text)
                t.column("contentHash", .text)
                t.column("state", .text).notNull()
                t.column("isPinned", .boolean).notNull().defaults(to: false)
                t.column("localContentVersion", .blob)
                t.column("localSize", .integer)
                t.column("localModificationNanos", .integer)
                t.column("localInode", .integer)
                t.column("lastError", .text)
                t.primaryKey(["domainID", "identifier"])
            }
            try db.create(index: "item_parent", on: "item", columns: ["domainID", "parentIdentifier"])
            try db.create(index: "item_path", on: "item", columns: ["domainID", "path"], unique: true)
            try db.create(table: "syncAnchor") { t in
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("container", .text).notNull()
                t.column("anchor", .blob).notNull()
                t.column("updatedAt", .datetime).notNull()
                t.primaryKey(["domainID", "container"])
            }
            try db.create(table: "journal") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("templateIdentifier", .text).notNull()
                t.column("operation", .text).notNull()
                t.column("payload", .text).notNull()
                t.column("state", .text).notNull()
                t.column("attempts", .integer).notNull().defaults(to: 0)
                t.column("lastError", .text)
                t.column("nextAttemptAt", .datetime)
                t.column("createdAt", .datetime).notNull()
                t.column("updatedAt", .datetime).notNull()
            }
            try db.create(index: "journal_domain_state", on: "journal", columns: ["domainID", "state"])
            try db.create(table: "transferCheckpoint") { t in
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("identifier", .text).notNull()
                t.column("contentVersion", .blob).notNull()
                t.column("stagingPath", .text).notNull()
                t.column("bytesTransferred", .integer).notNull()
                t.column("totalBytes", .integer)
                t.column("updatedAt", .datetime).notNull()
                t.primaryKey(["domainID", "identifier"])
            }
            try db.create(table: "thumbnail") { t in
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("identifier", .text).notNull()
                t.column("contentVersion", .blob).notNull()
                t.column("size", .integer).notNull()
                t.column("data", .blob).notNull()
                t.column("createdAt", .datetime).notNull()
                t.primaryKey(["domainID", "identifier", "size"])
            }
        }
        migrator.registerMigration("v2: conflicts, ignore patterns") { db in
            try db.alter(table: "domain") { t in
                t.add(column: "ignorePatterns", .text).notNull().defaults(to: "")
            }
            try db.create(table: "conflict") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("path", .text).notNull()
                t.column("keptPath", .text)
                t.column("kind", .text).notNull()
                t.column("details", .text).notNull()
                t.column("createdAt", .datetime).notNull()
            }
            try db.create(index: "conflict_domain", on: "conflict", columns: ["domainID", "createdAt"])
        }
        migrator.registerMigration("v3: domain backoff") { db in
            try db.alter(table: "domain") { t in
                t.add(column: "failureCount", .integer).notNull().defaults(to: 0)
                t.add(column: "nextRetryAt", .datetime)
            }
        }
        migrator.registerMigration("v4: dataless folders") { db in
            // A dataless folder's children are known here but not written into the replica
            // until the folder is first opened or materialized (Apple's dataless directories).
            try db.alter(table: "item") { t in
                t.add(column: "isDataless", .boolean).notNull().defaults(to: false)
            }
        }
        migrator.registerMigration("v5: journal by template") { db in
            // Every upload looks its template up among the domain's entries; without this
            // index that was a scan of all of them (quadratic over a sync of 10,000 new files).
            try db.create(index: "journal_template", on: "journal", columns: ["domainID", "templateIdentifier"])
        }
        migrator.registerMigration("v6: materialized and pinned items") { db in
            // Every sync looks for materialized files to download again and for pinned items;
            // without these partial indexes each look was a scan of the domain's every row.
            // They hold only the few rows they name, so writing other rows costs nothing.
            try db.execute(sql: "CREATE INDEX item_materialized ON item(domainID) WHERE state = 'materialized'")
            try db.execute(sql: "CREATE INDEX item_pinned ON item(domainID) WHERE isPinned")
        }
        migrator.registerMigration("v7: replica modes") { db in
            // How a domain's replica shows files that are not downloaded (ReplicaMode): every
            // domain added before had placeholder files.
            try db.alter(table: "domain") { t in
                t.add(column: "replicaMode", .text).notNull().defaults(to: "placeholder-files")
            }
        }
        migrator.registerMigration("v8: content policies, present ranges, last use, budgets") { db in
            // Pins become one of four content policies (ContentPolicy), set on an item or a
            // folder and inherited downward; NULL inherits.
            try db.alter(table: "item") { t in t.add(column: "contentPolicy", .text) }
            try db.execute(sql: "UPDATE item SET contentPolicy = 'eager' WHERE isPinned")
            try db.execute(sql: "DROP INDEX item_pinned")
            try db.alter(table: "item") { t in t.drop(column: "isPinned") }
            try db.execute(sql: "CREATE INDEX item_policy ON item(domainID) WHERE contentPolicy IS NOT NULL")
            // The byte ranges of a partially downloaded file (progressive hydration) that are on
            // disk, of one content version: a range is written here only after its bytes are.
            try db.create(table: "presentRange", options: [.withoutRowID]) { t in
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("identifier", .text).notNull()
                t.column("contentVersion", .blob).notNull()
                t.column("start", .integer).notNull()
                t.column("end", .integer).notNull()
                t.primaryKey(["domainID", "identifier", "start"])
            }
            // When a program last used a downloaded file (on-access events, local opens), for
            // least-recently-used eviction. Its own table: it changes far more often than items.
            try db.create(table: "itemUse", options: [.withoutRowID]) { t in
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("identifier", .text).notNull()
                t.column("lastUsedAt", .double).notNull()
                t.primaryKey(["domainID", "identifier"])
            }
            try db.alter(table: "domain") { t in
                t.add(column: "hydration", .text).notNull().defaults(to: "full")
                t.add(column: "cacheBudget", .integer)
            }
            // Settings of the whole home (the global cache budget, the free-space floor).
            try db.create(table: "setting", options: [.withoutRowID]) { t in
                t.primaryKey("key", .text)
                t.column("value", .text).notNull()
            }
            // What automatic eviction took, and why, for `status`.
            try db.create(table: "eviction") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("path", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("reason", .text).notNull()
                t.column("at", .datetime).notNull()
            }
            try db.create(index: "eviction_domain", on: "eviction", columns: ["domainID", "at"])
        }
        migrator.registerMigration("v9: item counters") { db in
            // What `status` and `domain list` show, kept by triggers as items change, so they
            // answer at once at any size (counting a million rows took half a second). The
            // root is not counted. A replaced row (INSERT OR REPLACE) fires the delete trigger
            // because every connection turns recursive_triggers on.
            try db.execute(
                sql: """
                    CREATE TABLE itemCount (
                        domainID INTEGER NOT NULL REFERENCES domain ON DELETE CASCADE,
                        state TEXT NOT NULL,
                        items INTEGER NOT NULL,
                        pinned INTEGER NOT NULL,
                        bytes INTEGER NOT NULL,
                        datalessFolders INTEGER NOT NULL,
                        PRIMARY KEY (domainID, state)
                    ) WITHOUT ROWID;
                    INSERT INTO itemCount (domainID, state, items, pinned, bytes, datalessFolders)
                        SELECT domainID, state, COUNT(*), SUM(contentPolicy IS 'eager'),
                            SUM(CASE WHEN state = 'materialized' THEN size ELSE 0 END), SUM(isDataless)
                        FROM item WHERE path <> '' GROUP BY domainID, state;
                    CREATE TRIGGER item_counted AFTER INSERT ON item WHEN NEW.path <> '' BEGIN
                        \(Self.count("NEW", sign: "+"))
                    END;
                    CREATE TRIGGER item_uncounted AFTER DELETE ON item WHEN OLD.path <> '' BEGIN
                        \(Self.count("OLD", sign: "-"))
                    END;
                    CREATE TRIGGER item_recounted AFTER UPDATE OF domainID, path, state, contentPolicy, size, isDataless ON item
                    WHEN OLD.state IS NOT NEW.state OR OLD.contentPolicy IS NOT NEW.contentPolicy OR OLD.size IS NOT NEW.size
                        OR OLD.isDataless IS NOT NEW.isDataless OR OLD.domainID IS NOT NEW.domainID OR (OLD.path = '') IS NOT (NEW.path = '')
                    BEGIN
                        \(Self.count("OLD", sign: "-", when: "OLD.path <> ''"))
                        \(Self.count("NEW", sign: "+", when: "NEW.path <> ''"))
                    END;
                    """)
        }
        migrator.registerMigration("v10: dataless folders index") { db in
            // serve marks a domain's dataless folders after a sync that changed something: the
            // query read every row of the domain (16 MB of pages at 100,000 items). A partial
            // index holds only dataless folders, so writing files never touches it.
            try db.execute(sql: "CREATE INDEX item_dataless ON item (domainID) WHERE isDataless")
        }
        migrator.registerMigration("v11: counting paused for new rows") { db in
            // A domain's first sync inserts rows it knows are new, a batch at a time: it adds
            // the batch to the counters once (MetadataStore.insertNew) instead of one trigger
            // run per row (15% of the CPU of a first sync). The table has a row only inside such
            // a transaction, which no other connection sees.
            try db.execute(
                sql: """
                    CREATE TABLE itemCountPaused (id INTEGER PRIMARY KEY);
                    DROP TRIGGER item_counted;
                    CREATE TRIGGER item_counted AFTER INSERT ON item
                    WHEN NEW.path <> '' AND NOT EXISTS (SELECT 1 FROM itemCountPaused) BEGIN
                        \(Self.count("NEW", sign: "+"))
                    END;
                    """)
        }
        migrator.registerMigration("v12: items excluded from sync") { db in
            // Local items the store cannot take (a kind it cannot create, a file over its size
            // limit): kept in the replica, told once, listed by status (MetadataStore+Exclusions).
            try db.create(table: "excludedItem") { t in
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("path", .text).notNull()
                t.column("kind", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("reason", .text).notNull()
                t.column("since", .datetime).notNull()
                t.column("refusedByStore", .boolean).notNull().defaults(to: false)
                t.column("modificationNanos", .integer)
                t.column("inode", .integer)
                t.primaryKey(["domainID", "path"])
            }
        }
        migrator.registerMigration("v13: folder listings") { db in
            // A digest of each folder's last store listing that sync down applied in full
            // (MetadataStore+Listings): a walk that lists the same again skips reading and
            // comparing the folder's rows. Valid only while no row of the folder changed: any
            // write to an item (inserted, replaced, updated, deleted) drops the digest of the
            // folder it is in and its own, so a digest never outlives the rows it describes.
            // New rows inserted with counting paused (MetadataStore.insertNew) drop their
            // folders' digests once per batch instead. A partial index finds a folder's
            // subfolders without reading its files.
            try db.execute(
                sql: """
                    CREATE TABLE folderListing (
                        domainID INTEGER NOT NULL REFERENCES domain ON DELETE CASCADE,
                        identifier TEXT NOT NULL,
                        digest BLOB NOT NULL,
                        PRIMARY KEY (domainID, identifier)
                    ) WITHOUT ROWID;
                    CREATE TRIGGER item_listing_inserted AFTER INSERT ON item
                    WHEN NOT EXISTS (SELECT 1 FROM itemCountPaused) BEGIN
                        DELETE FROM folderListing WHERE domainID = NEW.domainID AND identifier IN (NEW.parentIdentifier, NEW.identifier);
                    END;
                    CREATE TRIGGER item_listing_deleted AFTER DELETE ON item BEGIN
                        DELETE FROM folderListing WHERE domainID = OLD.domainID AND identifier IN (OLD.parentIdentifier, OLD.identifier);
                    END;
                    CREATE TRIGGER item_listing_updated AFTER UPDATE ON item BEGIN
                        DELETE FROM folderListing WHERE domainID = OLD.domainID
                            AND identifier IN (OLD.parentIdentifier, OLD.identifier, NEW.parentIdentifier, NEW.identifier);
                        DELETE FROM folderListing WHERE domainID = NEW.domainID
                            AND identifier IN (NEW.parentIdentifier, NEW.identifier);
                    END;
                    CREATE INDEX item_subfolder ON item (domainID, parentIdentifier) WHERE kind = 'folder';
                    """)
        }
        migrator.registerMigration("v14: staged records of a moved folder") { db in
            // A moved folder's records with their new paths and identifiers, staged a page at a
            // time while the store's listing of it is read, then moved into `item` in one
            // transaction (MetadataStore+Rekey). The columns of `item` as they are here: a later
            // migration that adds a column to `item` adds it here too. No constraints: rows are
            // checked when they reach `item`.
            try db.execute(sql: "CREATE TABLE itemRekey AS SELECT * FROM item WHERE 0")
            try db.create(index: "itemRekey_domain", on: "itemRekey", columns: ["domainID"])
        }
        migrator.registerMigration("v15: policies indexed by value and on folders") { db in
            // The rows of one policy (the online-only files an eviction pass pages through, the
            // pinned placeholders a sync downloads) are one range of the index, in identifier
            // order, instead of a read of every row that has a policy.
            try db.execute(sql: "DROP INDEX item_policy")
            try db.execute(sql: "CREATE INDEX item_policy ON item(domainID, contentPolicy) WHERE contentPolicy IS NOT NULL")
            // The policies set on folders and the root, which every sync holds to resolve
            // inheritance, without reading the rows of files pinned one by one.
            try db.execute(
                sql: "CREATE INDEX item_folder_policy ON item(domainID) WHERE contentPolicy IS NOT NULL AND (kind = 'folder' OR path = '')")
        }
        migrator.registerMigration("v16: uploads no listing has confirmed") { db in
            // The files this engine created or changed in the store, with the content version
            // the store answered, until a listing (or the change feed) shows them: a store that
            // took an upload and then lists the item gone, or at another version, did not keep
            // it, and the local bytes are kept instead of removed or downloaded over
            // (MetadataStore+Unconfirmed).
            try db.create(table: "unconfirmedUpload", options: [.withoutRowID]) { t in
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("identifier", .text).notNull()
                t.column("contentVersion", .blob).notNull()
                t.column("createdAt", .double).notNull()
                t.primaryKey(["domainID", "identifier"])
            }
        }
        migrator.registerMigration("v17: file system flags") { db in
            // `Item.fileSystemFlags` (Apple's bits: 1 executable, 2 readable, 4 writable,
            // 8 hidden): the store's executable bit, kept on the replica file across eviction
            // and re-download. Existing rows get a plain file's flags (readable, writable),
            // which every item had until now. `itemRekey` mirrors `item` (see v14).
            try db.execute(sql: "ALTER TABLE item ADD COLUMN fileSystemFlags INTEGER NOT NULL DEFAULT 6")
            try db.execute(sql: "ALTER TABLE itemRekey ADD COLUMN fileSystemFlags INTEGER NOT NULL DEFAULT 6")
        }
        migrator.registerMigration("v18: problems of the last sync") { db in
            // What each domain's last sync left undone (MetadataStore+SyncProblems): how many
            // items of the store it skipped and local changes it did not send, and the first of
            // them with their paths and reasons, replaced by every sync that finishes. `status`
            // shows them; no row: no sync finished since this migration.
            try db.create(table: "syncOutcome") { t in
                t.primaryKey("domainID", .integer).references("domain", onDelete: .cascade)
                t.column("skipped", .integer).notNull()
                t.column("notSent", .integer).notNull()
                t.column("at", .datetime).notNull()
            }
            try db.create(table: "syncProblem") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("kind", .text).notNull()
                t.column("path", .text).notNull()
                t.column("reason", .text).notNull()
            }
            try db.create(index: "syncProblem_domain", on: "syncProblem", columns: ["domainID", "id"])
        }
        migrator.registerMigration("v19: on-access mechanism") { db in
            // How programs reach a dataless domain's files (`OnAccessMechanism`): fanotify, which
            // every dataless domain used until now, or FUSE; and why it was chosen (`domain add
            // --on-access auto`), which `domain show` repeats.
            try db.execute(sql: "ALTER TABLE domain ADD COLUMN onAccess TEXT NOT NULL DEFAULT 'fanotify'")
            try db.execute(sql: "ALTER TABLE domain ADD COLUMN onAccessReason TEXT")
        }
        migrator.registerMigration("v20: access rules") { db in
            // Access rules by program (MetadataStore+AccessRules): what an on-access request of
            // a program does, in one domain or (domainID NULL) in all. One rule per scope, kind
            // and value. The content indexers are denied by default (isDefault), rows a user may
            // remove or replace like any other.
            try db.create(table: "accessRule") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("domainID", .integer).references("domain", onDelete: .cascade)
                t.column("kind", .text).notNull().check(sql: "kind IN ('program', 'executable', 'unit')")
                t.column("value", .text).notNull().check(sql: "length(value) > 0")
                t.column("action", .text).notNull().check(sql: "action IN ('fetch', 'deny', 'present-only')")
                t.column("isDefault", .boolean).notNull().defaults(to: false)
                t.column("createdAt", .datetime).notNull()
            }
            try db.execute(sql: "CREATE UNIQUE INDEX accessRule_scope ON accessRule(IFNULL(domainID, 0), kind, value)")
            for program in [
                "localsearch-3", "localsearch-extractor-3", "tracker-miner-fs-3", "tracker-extract-3", "baloo_file", "baloo_file_extractor",
            ] {
                try db.execute(
                    sql:
                        "INSERT INTO accessRule (domainID, kind, value, action, isDefault, createdAt) VALUES (NULL, 'program', ?, 'deny', 1, strftime('%Y-%m-%d %H:%M:%f', 'now'))",
                    arguments: [program])
            }
            // The last refusal of each file by a rule, and how many it had: `why` names the
            // program, `status` sums the counts.
            try db.create(table: "accessRefusal", options: [.withoutRowID]) { t in
                t.column("domainID", .integer).notNull().references("domain", onDelete: .cascade)
                t.column("path", .text).notNull()
                t.column("program", .text).notNull()
                t.column("executable", .text)
                t.column("unit", .text)
                t.column("pid", .integer).notNull()
                t.column("rule", .text).notNull()
                t.column("count", .integer).notNull()
                t.column("at", .datetime).notNull()
                t.primaryKey(["domainID", "path"])
            }
        }
        migrator.registerMigration("v21: content hashes") { db in
            // The SHA-256 the engine computes of an item's bytes while they stream (a download
            // as it is written, an upload as it is read), lowercase hex, and the content version
            // it is the hash of (a hash of another version than the item's no longer holds).
            // Both NULL until a file is downloaded or uploaded. `itemRekey` mirrors `item` (v14).
            for table in ["item", "itemRekey"] {
                try db.execute(sql: "ALTER TABLE \(table) ADD COLUMN contentSHA256 TEXT")
                try db.execute(sql: "ALTER TABLE \(table) ADD COLUMN hashedContentVersion BLOB")
            }
        }
        migrator.registerMigration("v22: mode reason") { db in
            // Why a domain has its replica mode (`domain add` without --mode falls back to
            // placeholder-files where dataless files cannot work), which `domain show` repeats.
            try db.execute(sql: "ALTER TABLE domain ADD COLUMN modeReason TEXT")
        }
        migrator.registerMigration("v23: names indexed for search") { db in
            // What `find -name` reads instead of the table: each item's name beside its key, in
            // the table's own order (identifier), so a search pages as before and reads about a
            // sixth of the bytes (Database.md, "Searching").
            try db.execute(sql: "CREATE INDEX item_name ON item (domainID, identifier, filename)")
        }
        // Foreign keys checked as usual (`.immediate`), not all of them read again before the
        // commit (GRDB's default for migrations that rebuild tables): dropping an index changes
        // no row, and the check read every row of a million-item database.
        migrator.registerMigration("v24: names indexed on first search", foreignKeyChecks: .immediate) { db in
            // v23's index is a fourth b-tree written with every row of a first sync, on the
            // writer's thread, the sync's critical path (about 7% of its CPU). The first name
            // search of the database builds it (MetadataStore.ensureNameIndex), and writes keep
            // it from then on.
            try db.execute(sql: "DROP INDEX IF EXISTS item_name")
        }
        migrator.registerMigration("v25: downloads placed before their rows", foreignKeyChecks: .immediate) { db in
            // What the extended attribute `user.fileprovider.download` said on every downloaded
            // file, for the files a download placed and has not recorded yet
            // (MetadataStore+PlacedDownloads.swift): beside the status and the domain's name, the
            // attribute gave each file a 4 KiB block of its own on ext4.
            try db.execute(
                sql: """
                    CREATE TABLE placedDownload (domainID INTEGER NOT NULL REFERENCES domain(id) ON DELETE CASCADE, \
                    identifier TEXT NOT NULL, inode INTEGER NOT NULL, size INTEGER NOT NULL, modificationNanos INTEGER NOT NULL, \
                    contentVersion BLOB, PRIMARY KEY (domainID, identifier, inode)) WITHOUT ROWID
                    """)
        }
        return migrator
    }()

    /// The statement of a counting trigger that adds (`sign` "+") or takes away ("-") the row
    /// `row` ("NEW" or "OLD") to or from its domain's ``itemCount`` row for its state. Taking
    /// away only updates a row that is there: a domain's removal deletes its counters and its
    /// items, in either order.
    private static func count(_ row: String, sign: String, when condition: String = "1") -> String {
        if sign == "-" {
            return """
                UPDATE itemCount SET items = items - 1, pinned = pinned - (\(row).contentPolicy IS 'eager'),
                    bytes = bytes - (CASE WHEN \(row).state = 'materialized' THEN \(row).size ELSE 0 END),
                    datalessFolders = datalessFolders - \(row).isDataless
                WHERE \(condition) AND domainID = \(row).domainID AND state = \(row).state;
                """
        }
        return """
            INSERT INTO itemCount (domainID, state, items, pinned, bytes, datalessFolders)
                SELECT \(row).domainID, \(row).state, 1, \(row).contentPolicy IS 'eager',
                    CASE WHEN \(row).state = 'materialized' THEN \(row).size ELSE 0 END, \(row).isDataless
                WHERE \(condition) AND EXISTS (SELECT 1 FROM domain WHERE id = \(row).domainID)
                ON CONFLICT (domainID, state) DO UPDATE SET items = items + excluded.items, pinned = pinned + excluded.pinned,
                    bytes = bytes + excluded.bytes, datalessFolders = datalessFolders + excluded.datalessFolders;
            """
    }
}
