import Foundation
import ProviderCore
import ProviderStore

/// Local moves for a store that cannot move or rename items
/// (``BackendCapabilities/supportsServerSideMove`` is false, as the media API's original
/// dialect): the engine never sends it a move.
///
/// - A downloaded file that moved is sent as a new file at its new place (from its local
///   contents) and a deletion of the old one, based on the version it was downloaded as: the
///   store's newer version, if any, is kept ("deleted here, edited there").
/// - Anything else that moved (a folder, a placeholder, a symlink: the replica does not hold
///   their contents) is moved back where it was, with a notice. Apple's system refuses such a
///   rename up front (the item lacks `allowsRenaming`/`allowsReparenting`); a Linux folder
///   cannot refuse a rename, so it is undone.
struct MovesWithoutServerSupport {
    let replica: Replica
    let display: @Sendable (String) -> String

    /// The changes to send instead of `changes`, and the moves to undo.
    static func rewrite(_ changes: [LocalChange]) -> (send: [LocalChange], undo: [(record: ItemRecord, from: String)]) {
        var send: [LocalChange] = []
        var undo: [(record: ItemRecord, from: String)] = []
        for change in changes {
            guard case .moved(let record, let to, let fingerprint) = change else {
                send.append(change)
                continue
            }
            if record.kind != .folder, record.state == .materialized, let fingerprint, fingerprint.isRegularFile {
                send.append(.created(path: to, kind: .file, fingerprint: fingerprint))
                send.append(.deleted(record: record))
            } else {
                undo.append((record, to))
            }
        }
        return (send, undo)
    }

    /// Moves an item back from `path` to its recorded place, refusing to replace anything
    /// there. Blocking.
    /// - Returns: a notice for the report.
    func moveBack(_ record: ItemRecord, from path: String) -> String {
        let isPlaceholder = record.state == .placeholder
        let source = isPlaceholder ? replica.placeholderLocation(path) : replica.path(path)
        let target = isPlaceholder ? replica.placeholderLocation(record.path) : replica.path(record.path)
        let what = record.kind == .folder ? "folder" : "file"
        do {
            try replica.move(fromPath: source, toPath: target)
            return
                "\(display(path)): this store cannot move or rename items; the \(what) was moved back to \(display(record.path)) (copy it instead)"
        } catch {
            return
                "\(display(path)): this store cannot move or rename items, and the \(what) could not be moved back to \(display(record.path)): \(error.message); move it back or copy it"
        }
    }
}
