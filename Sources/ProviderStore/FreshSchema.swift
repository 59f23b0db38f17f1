/// What the migrations make of an empty database, as the statements that make it at once: its
/// tables, indexes and triggers in the order they were made, then the rows the migrations write
/// (the default access rules, each `createdAt` the time it runs, and the migrations recorded as
/// applied). ``Migrations/createSchema(in:)`` runs them instead of replaying every migration
/// (their table rebuilds and column additions each made SQLite read its whole schema again:
/// about a fifth of a first `domain add`). Never edited by hand: `SchemaCreationTests` fails
/// when it is not what the migrations make, and writes what to put here.
enum FreshSchema {
    static let sql = #"""
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        CREATE TABLE "domain" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "name" TEXT NOT NULL UNIQUE, "backendKind" TEXT NOT NULL, "configuration" TEXT NOT NULL, "replicaPath" TEXT NOT NULL, "createdAt" DATETIME NOT NULL, "isConnected" BOOLEAN NOT NULL DEFAULT 1, "lastSyncAt" DATETIME, "lastError" TEXT, "ignorePatterns" TEXT NOT NULL DEFAULT '', "failureCount" INTEGER NOT NULL DEFAULT 0, "nextRetryAt" DATETIME, "replicaMode" TEXT NOT NULL DEFAULT 'placeholder-files', "hydration" TEXT NOT NULL DEFAULT 'full', "cacheBudget" INTEGER, onAccess TEXT NOT NULL DEFAULT 'fanotify', onAccessReason TEXT, modeReason TEXT);
        CREATE TABLE "item" ("domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "identifier" TEXT NOT NULL, "parentIdentifier" TEXT NOT NULL, "filename" TEXT NOT NULL, "path" TEXT NOT NULL, "kind" TEXT NOT NULL, "contentType" TEXT NOT NULL, "size" INTEGER NOT NULL, "creationDate" DOUBLE, "modificationDate" DOUBLE, "contentVersion" BLOB NOT NULL, "metadataVersion" BLOB NOT NULL, "capabilities" INTEGER NOT NULL, "symlinkTarget" TEXT, "contentHash" TEXT, "state" TEXT NOT NULL, "localContentVersion" BLOB, "localSize" INTEGER, "localModificationNanos" INTEGER, "localInode" INTEGER, "lastError" TEXT, "isDataless" BOOLEAN NOT NULL DEFAULT 0, "contentPolicy" TEXT, fileSystemFlags INTEGER NOT NULL DEFAULT 6, contentSHA256 TEXT, hashedContentVersion BLOB, PRIMARY KEY ("domainID", "identifier")) WITHOUT ROWID;
        CREATE INDEX "item_parent" ON "item"("domainID", "parentIdentifier");
        CREATE UNIQUE INDEX "item_path" ON "item"("domainID", "path");
        CREATE TABLE "syncAnchor" ("domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "container" TEXT NOT NULL, "anchor" BLOB NOT NULL, "updatedAt" DATETIME NOT NULL, PRIMARY KEY ("domainID", "container"));
        CREATE TABLE "journal" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "templateIdentifier" TEXT NOT NULL, "operation" TEXT NOT NULL, "payload" TEXT NOT NULL, "state" TEXT NOT NULL, "attempts" INTEGER NOT NULL DEFAULT 0, "lastError" TEXT, "nextAttemptAt" DATETIME, "createdAt" DATETIME NOT NULL, "updatedAt" DATETIME NOT NULL);
        CREATE INDEX "journal_domain_state" ON "journal"("domainID", "state");
        CREATE TABLE "transferCheckpoint" ("domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "identifier" TEXT NOT NULL, "contentVersion" BLOB NOT NULL, "stagingPath" TEXT NOT NULL, "bytesTransferred" INTEGER NOT NULL, "totalBytes" INTEGER, "updatedAt" DATETIME NOT NULL, PRIMARY KEY ("domainID", "identifier"));
        CREATE TABLE "thumbnail" ("domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "identifier" TEXT NOT NULL, "contentVersion" BLOB NOT NULL, "size" INTEGER NOT NULL, "data" BLOB NOT NULL, "createdAt" DATETIME NOT NULL, PRIMARY KEY ("domainID", "identifier", "size"));
        CREATE TABLE "conflict" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "path" TEXT NOT NULL, "keptPath" TEXT, "kind" TEXT NOT NULL, "details" TEXT NOT NULL, "createdAt" DATETIME NOT NULL);
        CREATE INDEX "conflict_domain" ON "conflict"("domainID", "createdAt");
        CREATE INDEX "journal_template" ON "journal"("domainID", "templateIdentifier");
        CREATE INDEX item_materialized ON item(domainID) WHERE state = 'materialized';
        CREATE TABLE "presentRange" ("domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "identifier" TEXT NOT NULL, "contentVersion" BLOB NOT NULL, "start" INTEGER NOT NULL, "end" INTEGER NOT NULL, PRIMARY KEY ("domainID", "identifier", "start")) WITHOUT ROWID;
        CREATE TABLE "itemUse" ("domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "identifier" TEXT NOT NULL, "lastUsedAt" DOUBLE NOT NULL, PRIMARY KEY ("domainID", "identifier")) WITHOUT ROWID;
        CREATE TABLE "setting" ("key" TEXT PRIMARY KEY NOT NULL, "value" TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE "eviction" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "path" TEXT NOT NULL, "size" INTEGER NOT NULL, "reason" TEXT NOT NULL, "at" DATETIME NOT NULL);
        CREATE INDEX "eviction_domain" ON "eviction"("domainID", "at");
        CREATE TABLE itemCount (
            domainID INTEGER NOT NULL REFERENCES domain ON DELETE CASCADE,
            state TEXT NOT NULL,
            items INTEGER NOT NULL,
            pinned INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            datalessFolders INTEGER NOT NULL,
            PRIMARY KEY (domainID, state)
        ) WITHOUT ROWID;
        CREATE TRIGGER item_uncounted AFTER DELETE ON item WHEN OLD.path <> '' BEGIN
            UPDATE itemCount SET items = items - 1, pinned = pinned - (OLD.contentPolicy IS 'eager'),
            bytes = bytes - (CASE WHEN OLD.state = 'materialized' THEN OLD.size ELSE 0 END),
            datalessFolders = datalessFolders - OLD.isDataless
        WHERE 1 AND domainID = OLD.domainID AND state = OLD.state;
        END;
        CREATE TRIGGER item_recounted AFTER UPDATE OF domainID, path, state, contentPolicy, size, isDataless ON item
        WHEN OLD.state IS NOT NEW.state OR OLD.contentPolicy IS NOT NEW.contentPolicy OR OLD.size IS NOT NEW.size
            OR OLD.isDataless IS NOT NEW.isDataless OR OLD.domainID IS NOT NEW.domainID OR (OLD.path = '') IS NOT (NEW.path = '')
        BEGIN
            UPDATE itemCount SET items = items - 1, pinned = pinned - (OLD.contentPolicy IS 'eager'),
            bytes = bytes - (CASE WHEN OLD.state = 'materialized' THEN OLD.size ELSE 0 END),
            datalessFolders = datalessFolders - OLD.isDataless
        WHERE OLD.path <> '' AND domainID = OLD.domainID AND state = OLD.state;
            INSERT INTO itemCount (domainID, state, items, pinned, bytes, datalessFolders)
            SELECT NEW.domainID, NEW.state, 1, NEW.contentPolicy IS 'eager',
                CASE WHEN NEW.state = 'materialized' THEN NEW.size ELSE 0 END, NEW.isDataless
            WHERE NEW.path <> '' AND EXISTS (SELECT 1 FROM domain WHERE id = NEW.domainID)
            ON CONFLICT (domainID, state) DO UPDATE SET items = items + excluded.items, pinned = pinned + excluded.pinned,
                bytes = bytes + excluded.bytes, datalessFolders = datalessFolders + excluded.datalessFolders;
        END;
        CREATE INDEX item_dataless ON item (domainID) WHERE isDataless;
        CREATE TABLE itemCountPaused (id INTEGER PRIMARY KEY);
        CREATE TRIGGER item_counted AFTER INSERT ON item
        WHEN NEW.path <> '' AND NOT EXISTS (SELECT 1 FROM itemCountPaused) BEGIN
            INSERT INTO itemCount (domainID, state, items, pinned, bytes, datalessFolders)
            SELECT NEW.domainID, NEW.state, 1, NEW.contentPolicy IS 'eager',
                CASE WHEN NEW.state = 'materialized' THEN NEW.size ELSE 0 END, NEW.isDataless
            WHERE 1 AND EXISTS (SELECT 1 FROM domain WHERE id = NEW.domainID)
            ON CONFLICT (domainID, state) DO UPDATE SET items = items + excluded.items, pinned = pinned + excluded.pinned,
                bytes = bytes + excluded.bytes, datalessFolders = datalessFolders + excluded.datalessFolders;
        END;
        CREATE TABLE "excludedItem" ("domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "path" TEXT NOT NULL, "kind" TEXT NOT NULL, "size" INTEGER NOT NULL, "reason" TEXT NOT NULL, "since" DATETIME NOT NULL, "refusedByStore" BOOLEAN NOT NULL DEFAULT 0, "modificationNanos" INTEGER, "inode" INTEGER, PRIMARY KEY ("domainID", "path"));
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
        CREATE TABLE itemRekey(
          domainID INT,
          identifier TEXT,
          parentIdentifier TEXT,
          filename TEXT,
          path TEXT,
          kind TEXT,
          contentType TEXT,
          size INT,
          creationDate REAL,
          modificationDate REAL,
          contentVersion,
          metadataVersion,
          capabilities INT,
          symlinkTarget TEXT,
          contentHash TEXT,
          state TEXT,
          localContentVersion,
          localSize INT,
          localModificationNanos INT,
          localInode INT,
          lastError TEXT,
          isDataless NUM,
          contentPolicy TEXT
        , fileSystemFlags INTEGER NOT NULL DEFAULT 6, contentSHA256 TEXT, hashedContentVersion BLOB);
        CREATE INDEX "itemRekey_domain" ON "itemRekey"("domainID");
        CREATE INDEX item_policy ON item(domainID, contentPolicy) WHERE contentPolicy IS NOT NULL;
        CREATE INDEX item_folder_policy ON item(domainID) WHERE contentPolicy IS NOT NULL AND (kind = 'folder' OR path = '');
        CREATE TABLE "unconfirmedUpload" ("domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "identifier" TEXT NOT NULL, "contentVersion" BLOB NOT NULL, "createdAt" DOUBLE NOT NULL, PRIMARY KEY ("domainID", "identifier")) WITHOUT ROWID;
        CREATE TABLE "syncOutcome" ("domainID" INTEGER PRIMARY KEY REFERENCES "domain"("id") ON DELETE CASCADE, "skipped" INTEGER NOT NULL, "notSent" INTEGER NOT NULL, "at" DATETIME NOT NULL);
        CREATE TABLE "syncProblem" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "kind" TEXT NOT NULL, "path" TEXT NOT NULL, "reason" TEXT NOT NULL);
        CREATE INDEX "syncProblem_domain" ON "syncProblem"("domainID", "id");
        CREATE TABLE "accessRule" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "domainID" INTEGER REFERENCES "domain"("id") ON DELETE CASCADE, "kind" TEXT NOT NULL CHECK (kind IN ('program', 'executable', 'unit')), "value" TEXT NOT NULL CHECK (length(value) > 0), "action" TEXT NOT NULL CHECK (action IN ('fetch', 'deny', 'present-only')), "isDefault" BOOLEAN NOT NULL DEFAULT 0, "createdAt" DATETIME NOT NULL);
        CREATE UNIQUE INDEX accessRule_scope ON accessRule(IFNULL(domainID, 0), kind, value);
        CREATE TABLE "accessRefusal" ("domainID" INTEGER NOT NULL REFERENCES "domain"("id") ON DELETE CASCADE, "path" TEXT NOT NULL, "program" TEXT NOT NULL, "executable" TEXT, "unit" TEXT, "pid" INTEGER NOT NULL, "rule" TEXT NOT NULL, "count" INTEGER NOT NULL, "at" DATETIME NOT NULL, PRIMARY KEY ("domainID", "path")) WITHOUT ROWID;
        CREATE TABLE placedDownload (domainID INTEGER NOT NULL REFERENCES domain(id) ON DELETE CASCADE, identifier TEXT NOT NULL, inode INTEGER NOT NULL, size INTEGER NOT NULL, modificationNanos INTEGER NOT NULL, contentVersion BLOB, PRIMARY KEY (domainID, identifier, inode)) WITHOUT ROWID;
        INSERT INTO grdb_migrations (identifier) VALUES ('v1: domains, items, anchors, journal, checkpoints, thumbnails');
        INSERT INTO grdb_migrations (identifier) VALUES ('v2: conflicts, ignore patterns');
        INSERT INTO grdb_migrations (identifier) VALUES ('v3: domain backoff');
        INSERT INTO grdb_migrations (identifier) VALUES ('v4: dataless folders');
        INSERT INTO grdb_migrations (identifier) VALUES ('v5: journal by template');
        INSERT INTO grdb_migrations (identifier) VALUES ('v6: materialized and pinned items');
        INSERT INTO grdb_migrations (identifier) VALUES ('v7: replica modes');
        INSERT INTO grdb_migrations (identifier) VALUES ('v8: content policies, present ranges, last use, budgets');
        INSERT INTO grdb_migrations (identifier) VALUES ('v9: item counters');
        INSERT INTO grdb_migrations (identifier) VALUES ('v10: dataless folders index');
        INSERT INTO grdb_migrations (identifier) VALUES ('v11: counting paused for new rows');
        INSERT INTO grdb_migrations (identifier) VALUES ('v12: items excluded from sync');
        INSERT INTO grdb_migrations (identifier) VALUES ('v13: folder listings');
        INSERT INTO grdb_migrations (identifier) VALUES ('v14: staged records of a moved folder');
        INSERT INTO grdb_migrations (identifier) VALUES ('v15: policies indexed by value and on folders');
        INSERT INTO grdb_migrations (identifier) VALUES ('v16: uploads no listing has confirmed');
        INSERT INTO grdb_migrations (identifier) VALUES ('v17: file system flags');
        INSERT INTO grdb_migrations (identifier) VALUES ('v18: problems of the last sync');
        INSERT INTO grdb_migrations (identifier) VALUES ('v19: on-access mechanism');
        INSERT INTO grdb_migrations (identifier) VALUES ('v20: access rules');
        INSERT INTO grdb_migrations (identifier) VALUES ('v21: content hashes');
        INSERT INTO grdb_migrations (identifier) VALUES ('v22: mode reason');
        INSERT INTO grdb_migrations (identifier) VALUES ('v23: names indexed for search');
        INSERT INTO grdb_migrations (identifier) VALUES ('v24: names indexed on first search');
        INSERT INTO grdb_migrations (identifier) VALUES ('v25: downloads placed before their rows');
        INSERT INTO sqlite_sequence (name, seq) VALUES ('accessRule', 6);
        INSERT INTO accessRule (id, domainID, kind, value, action, isDefault, createdAt) VALUES (1, NULL, 'program', 'localsearch-3', 'deny', 1, strftime('%Y-%m-%d %H:%M:%f', 'now'));
        INSERT INTO accessRule (id, domainID, kind, value, action, isDefault, createdAt) VALUES (2, NULL, 'program', 'localsearch-extractor-3', 'deny', 1, strftime('%Y-%m-%d %H:%M:%f', 'now'));
        INSERT INTO accessRule (id, domainID, kind, value, action, isDefault, createdAt) VALUES (3, NULL, 'program', 'tracker-miner-fs-3', 'deny', 1, strftime('%Y-%m-%d %H:%M:%f', 'now'));
        INSERT INTO accessRule (id, domainID, kind, value, action, isDefault, createdAt) VALUES (4, NULL, 'program', 'tracker-extract-3', 'deny', 1, strftime('%Y-%m-%d %H:%M:%f', 'now'));
        INSERT INTO accessRule (id, domainID, kind, value, action, isDefault, createdAt) VALUES (5, NULL, 'program', 'baloo_file', 'deny', 1, strftime('%Y-%m-%d %H:%M:%f', 'now'));
        INSERT INTO accessRule (id, domainID, kind, value, action, isDefault, createdAt) VALUES (6, NULL, 'program', 'baloo_file_extractor', 'deny', 1, strftime('%Y-%m-%d %H:%M:%f', 'now'));
        """#
}
