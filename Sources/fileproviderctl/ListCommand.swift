import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List items from the database, offline.",
        discussion: """
            Columns: STATE, POLICY, SIZE, MODIFIED, NAME. STATE is folder, placeholder, \
            materialized (',outdated' when the store has newer contents) or symlink; a folder whose \
            items are not in the replica yet is 'folder,dataless' (see 'fileproviderctl \
            populate'); a file of a dataless domain that is partly fetched (progressive \
            hydration) is 'partial NN%' (that share of its bytes is on disk). POLICY is the item's content policy (lazy, eager, \
            evict-on-remote-update, online-only; see 'fileproviderctl policy --help'), with '*' \
            when it is set on the item itself rather than inherited from a folder above. \
            --json gives "policy" and "policySetOn" (the path it is set on, null for the default), \
            and "presentBytes" for a partly fetched file.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: ArgumentHelp("A folder or item: DOMAIN:/path or a path inside a replica.", valueName: "path"), completion: .itemPaths)
    var path: String

    @Flag(name: [.customShort("R"), .long], help: "List everything below the folder.")
    var recursive = false

    func run() async throws {
        let manager = try global.manager()
        let location = try manager.resolve(path)
        let domain = try manager.domain(named: location.domain)
        guard let id = domain.id, let target = try manager.store.item(domainID: id, path: location.path) else {
            throw FileProviderError(
                .noSuchItem, "no item at \(location.description); run 'fileproviderctl sync \(location.domain)' to refresh")
        }
        let policies = try PolicyResolver.read(from: manager.store, domainID: id)
        var json = ItemJSON.Stream(domain: location.domain, policies: policies)
        let base = location.path.isEmpty ? 0 : location.path.count + 1
        // Printed as read: a subtree a page at a time, in path order (any size in bounded memory),
        // each page with the bytes present of its partly fetched files.
        let store = manager.store
        let print = { (records: [ItemRecord]) throws(FileProviderError) in
            let placeholders = records.lazy.filter { $0.state == .placeholder }.map(\.identifier)
            let partial = placeholders.isEmpty ? [:] : try store.partiallyPresent(domainID: id, among: placeholders)
            json.partial = partial
            if output.json {
                json.write(records)
            } else {
                Output.write(Self.lines(records, relativeTo: recursive && target.kind == .folder ? base : nil, policies, partial))
            }
        }
        if target.kind != .folder {
            try print([target])
        } else if recursive {
            try ItemPages.forEachPage(manager.store, domainID: id, below: location.path, print)
        } else {
            try print(try manager.store.children(domainID: id, parent: target.identifier))
        }
        if output.json { json.finish() }
    }

    /// The text lines of `records`: each named by its path with the first `base` characters
    /// dropped, or by its name when `base` is `nil`.
    private static func lines(
        _ records: [ItemRecord], relativeTo base: Int?, _ policies: PolicyResolver, _ partial: [ItemIdentifier: Int64]
    ) -> String {
        var text = ""
        text.reserveCapacity(records.count * 80)
        for record in records {
            let shown = base.map { String(record.path.dropFirst($0)) } ?? record.filename
            let size = record.kind == .folder ? "-" : Output.bytes(record.size)
            var state = record.stateLabel
            if record.state == .placeholder, let present = partial[record.identifier], record.size > 0 {
                state = "partial \(min(99, Int(present * 100 / record.size)))%"
            }
            text += Output.padded(state, to: 22)
            let (policy, setOn) = policies.resolve(record)
            let policyLabel = policy.rawValue + (setOn == record.path ? "*" : "")
            text += Output.padded(policyLabel, to: 24)
            text += String(repeating: " ", count: max(0, 10 - size.count)) + size + "  "
            text += Output.date(record.modificationDate) + "  " + Output.name(shown) + (record.kind == .folder ? "/" : "") + "\n"
        }
        return text
    }
}

/// Reads a subtree from the database a page at a time, for commands that print as they read.
enum ItemPages {
    /// Records read from the database at once (tests make it small).
    static let pageSize: Int = {
        if let text = ProcessInfo.processInfo.environment["FILEPROVIDERCTL_PAGE"], let size = Int(text), size > 0 { return size }
        return 4_096
    }()

    /// Calls `body` with the items below the folder at `path` (every item but the root for ""),
    /// in path order, a page at a time, each page read in its own transaction (none is held
    /// open while `body` writes).
    /// - Throws: `localIOFailure` when the database fails; what `body` throws.
    static func forEachPage(
        _ store: MetadataStore, domainID: Int64, below path: String, _ body: ([ItemRecord]) throws(FileProviderError) -> Void
    ) throws(FileProviderError) {
        var after: String?
        while true {
            let page = try store.descendants(domainID: domainID, of: path, after: after, limit: pageSize)
            guard let last = page.last?.path else { return }
            after = last
            try body(page)
            if page.count < pageSize { return }
        }
    }
}

/// Items as `ls --json` and `dump --json` print them: written by hand, fast for 10,000 rows.
enum ItemJSON {
    /// `policies`: the domain's folders' content policies (each record brings its own), for
    /// each item's `policy`, `policySetOn` and `pinned` (its policy is `eager`).
    /// `partial`: the bytes present of partly fetched files, at least of `records`
    /// (``MetadataStore/partiallyPresent(domainID:among:)``).
    static func encode(
        _ records: [ItemRecord], domain: String, policies: PolicyResolver, partial: [ItemIdentifier: Int64] = [:], full: Bool = false
    ) -> String {
        var out = "["
        out.reserveCapacity(records.count * 200)
        for (index, record) in records.enumerated() {
            if index > 0 { out += "," }
            out += "\n"
            append(record, to: &out, domain: domain, policies: policies, partial: partial, full: full)
        }
        out += records.isEmpty ? "]\n" : "\n]\n"
        return out
    }

    /// One item's JSON object, as ``encode(_:domain:policies:partial:full:)`` writes it.
    static func element(
        _ record: ItemRecord, domain: String, policies: PolicyResolver, partial: [ItemIdentifier: Int64], full: Bool
    ) -> String {
        var out = ""
        append(record, to: &out, domain: domain, policies: policies, partial: partial, full: full)
        return out
    }

    /// Appends one item's JSON object to `out`, piece by piece (no string per item or per
    /// field: a 10,000-item listing spent a fifth of its time building them).
    static func append(
        _ record: ItemRecord, to out: inout String, domain: String, policies: PolicyResolver, partial: [ItemIdentifier: Int64],
        full: Bool
    ) {
        out += "{\"domain\":"
        JSONText.append(quoted: domain, to: &out)
        out += ",\"path\":\"/"
        JSONText.append(escaped: record.path, to: &out)
        out += "\",\"name\":"
        JSONText.append(quoted: record.filename, to: &out)
        out += ",\"identifier\":"
        JSONText.append(quoted: record.identifier.rawValue, to: &out)
        out += ",\"kind\":\""
        out += record.kind.rawValue
        out += "\",\"state\":\""
        out += record.state.rawValue
        let (policy, setOn) = policies.resolve(record)
        out += "\",\"policy\":\""
        out += policy.rawValue
        out += "\",\"policySetOn\":"
        if let setOn {
            out += "\"/"
            JSONText.append(escaped: setOn, to: &out)
            out += "\""
        } else {
            out += "null"
        }
        out += policy == .eager ? ",\"pinned\":true,\"size\":" : ",\"pinned\":false,\"size\":"
        out += String(record.size)
        if record.kind == .folder { out += record.isDataless ? ",\"dataless\":true" : ",\"dataless\":false" }
        out += ",\"contentType\":"
        JSONText.append(quoted: record.contentType, to: &out)
        out += ",\"mimeType\":"
        JSONText.append(quoted: ContentType.mimeType(of: record.contentType), to: &out)
        if let date = record.modificationDate {
            out += ",\"modified\":\""
            out += Output.jsonDate(date)
            out += "\""
        }
        if record.state == .materialized { out += record.isOutdated ? ",\"outdated\":true" : ",\"outdated\":false" }
        if record.state == .placeholder, let present = partial[record.identifier] { out += ",\"presentBytes\":\(present)" }
        if let target = record.symlinkTarget {
            out += ",\"symlinkTarget\":"
            JSONText.append(quoted: target, to: &out)
        }
        if full {
            out += ",\"parentIdentifier\":" + quote(record.parentIdentifier.rawValue)
            out +=
                ",\"contentVersion\":\"\(record.contentVersion.hexString)\",\"metadataVersion\":\"\(record.metadataVersion.hexString)\""
            if let version = record.localContentVersion { out += ",\"localContentVersion\":\"\(version.hexString)\"" }
            if let error = record.lastError { out += ",\"lastError\":" + quote(error) }
        }
        out += "}"
    }

    /// A JSON array written to standard output element by element, as records are read: the
    /// same bytes as ``encode(_:domain:policies:partial:full:)`` of all of them at once.
    struct Stream {
        let domain: String
        let policies: PolicyResolver
        var partial: [ItemIdentifier: Int64] = [:]
        var full = false
        private var count = 0

        init(domain: String, policies: PolicyResolver, partial: [ItemIdentifier: Int64] = [:], full: Bool = false) {
            (self.domain, self.policies, self.partial, self.full) = (domain, policies, partial, full)
        }

        /// Writes these records' elements (and the opening bracket before the first).
        mutating func write(_ records: [ItemRecord]) {
            if records.isEmpty { return }
            var out = count == 0 ? "[" : ""
            out.reserveCapacity(records.count * 200)
            for record in records {
                if count > 0 { out += "," }
                out += "\n"
                ItemJSON.append(record, to: &out, domain: domain, policies: policies, partial: partial, full: full)
                count += 1
            }
            Output.write(out)
        }

        /// Closes the array (an empty one when nothing was written).
        func finish() { Output.write(count == 0 ? "[]\n" : "\n]\n") }
    }

    static func quote(_ string: String) -> String { JSONText.quoted(string) }
}
