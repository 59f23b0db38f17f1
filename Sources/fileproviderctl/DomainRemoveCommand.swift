import AdapterKit
import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

struct DomainRemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a domain and its metadata.",
        discussion: """
            Deletes the replica folder too, unless --keep-replica (then only the domain's \
            placeholders are removed; downloaded files, local edits and new files stay). While the \
            replica holds changes the store does not have (new, edited, moved or deleted items, \
            failed or interrupted uploads), deleting it is refused and they are listed: send them \
            with 'fileproviderctl sync', keep the folder with --keep-replica, or give --force to \
            lose them. For a dataless domain all this applies to its backing folder, where its files \
            are; its empty replica folder is removed.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "The domain's name.", completion: .domainNames)
    var name: String

    @Flag(help: "Keep the replica folder with the downloaded files and local changes.")
    var keepReplica = false

    @Flag(help: "Delete the replica folder even when it holds changes the store does not have.")
    var force = false

    func run() async throws {
        let manager = try global.manager()
        let domain = try manager.domain(named: name)
        // Where the files are: the replica folder, or a dataless domain's backing folder.
        let files = try manager.replicaRoot(of: domain).path
        // Deleting the replica loses what the store does not have; keeping it loses nothing. A
        // replica folder that is gone holds nothing to lose.
        let replicaExists = FileManager.default.fileExists(atPath: files)
        var unsent: [UnsentChange] = []
        if !force && replicaExists {
            do {
                unsent = try await manager.unsentChanges(inDomain: name)
            } catch {
                // Not this domain's replica (an empty folder in its place): nothing in it to lose,
                // and with --keep-replica nothing is deleted.
                let notOurs = error.code == .providerDomainTemporarilyUnavailable
                if !notOurs || !(keepReplica || Self.isEmpty(files)) { throw error }
            }
        }
        if !keepReplica && unsent.contains(where: \.losesWork) {
            await manager.close()
            if output.json {
                try Output.json(DomainRemoveJSON(domain: name, removed: false, keptReplica: nil, unsent: unsent))
            }
            var text =
                "error: domain '\(name)' was not removed: its replica has \(unsent.count) change\(unsent.count == 1 ? "" : "s") the store does not have:\n"
            let shown = unsent.map { Output.name($0.path) }
            let width = min(40, shown.map(\.count).max() ?? 0)
            for (change, path) in zip(unsent, shown) {
                text +=
                    "  \(Output.padded(path, to: width))  \(change.kind.rawValue): \(Output.text(change.reason))\n"
            }
            text +=
                "Send them with 'fileproviderctl sync \(name)', keep the replica folder with --keep-replica, or remove it anyway (losing them) with --force.\n"
            FileHandle.standardError.write(Data(text.utf8))
            throw CommandFailure()
        }
        try await manager.removeDomain(named: name, keepReplica: keepReplica, force: true)
        await manager.close()
        let password = await Self.deletePassword(of: domain)
        if output.json {
            try Output.json(
                DomainRemoveJSON(domain: name, removed: true, keptReplica: keepReplica ? files : nil, unsent: unsent))
            return
        }
        print("removed domain '\(name)'" + (keepReplica ? "; kept \(files)" : ""))
        if let password { print(password) }
        let kept = unsent.filter(\.losesWork).count
        if keepReplica && kept > 0 {
            Output.warning(
                "\(kept) local change\(kept == 1 ? " was" : "s were") never sent to the store; what is in \(files) stays there"
            )
        }
    }
}

extension DomainRemoveCommand {
    /// Deletes the password the Secret Service keeps for `domain` (a backend that takes one);
    /// what was done, for the output, or `nil` when there was none. A Secret Service that
    /// cannot be asked (no bus, no provider on it) is left alone: no password can have been
    /// stored there from here; one that fails to delete a stored password is a warning.
    static func deletePassword(of domain: DomainRecord) async -> String? {
        guard DomainPassword.takesPassword(domain.backendKind), SecretService.unavailableReason() == nil else { return nil }
        let name = domain.name
        guard
            let stored = try? await SecretService.executor.runEvenIfCancelled({
                try SecretService.password(forDomain: name) != nil
            }), stored
        else { return nil }
        do {
            return try await DomainPassword.delete(name) ? "deleted its password from the Secret Service" : nil
        } catch {
            Output.warning("its password may still be in the Secret Service: \(error.message)")
            return nil
        }
    }

    /// Whether a folder holds nothing.
    static func isEmpty(_ path: String) -> Bool {
        (try? FileManager.default.contentsOfDirectory(atPath: path))?.isEmpty ?? true
    }
}

struct DomainRemoveJSON: Encodable {
    var domain: String
    var removed: Bool
    /// The replica folder (a dataless domain's backing folder), when it was kept.
    var keptReplica: String?
    /// The changes the store does not have: why the domain was not removed, or what stays only
    /// in the kept replica.
    var unsent: [UnsentChange]
}
