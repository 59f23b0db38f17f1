import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

struct DomainConvertCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "convert",
        abstract: "Convert a domain's replica to the other replica mode, keeping every file.",
        discussion: """
            Downloaded, pinned and edited files, conflicted copies and everything else in the \
            replica are moved as they are (renamed: the next sync sends exactly the edits it would \
            have sent); only the files that are not downloaded change their form, and nothing is \
            downloaded or sent.

            --mode dataless: the replica folder's contents move into the backing folder \
            <home>/replicas/<name>, each <name>.placeholder becomes a dataless file under its real \
            name, and the replica folder stays empty: 'fileproviderctl serve' mounts the backing \
            folder there. Needs what 'domain add --mode dataless' needs. Not available yet.
            --mode placeholder-files: the backing folder's contents move into the replica folder, \
            each dataless file becomes <name>.placeholder, and the backing folder is removed. Stop \
            'serve' first.

            Both folders must be on one file system (files are renamed, never copied). A running \
            sync of the domain is waited for; no sync, 'serve' or other command works on the \
            domain until the conversion is done. Interrupted (even by kill -9), the same command \
            finishes it; until then the other commands refuse the domain and say so. A domain in \
            the mode already is left as it is.

            Example:
              fileproviderctl domain convert photos --mode dataless
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(help: "The domain's name.", completion: .domainNames)
    var name: String

    @Option(help: ArgumentHelp("The mode to convert to: dataless or placeholder-files.", valueName: "mode"))
    var mode: ReplicaMode

    func run() async throws {
        let manager = try global.manager()
        let bar = ProgressBar(label: name, options: progress)
        let name = self.name
        let events: ConversionEventHandler = { event in
            switch event {
            case .waitingForSync(let process):
                bar.finish()
                FileHandle.standardError.write(Data("\(name): \(SyncCommand.waiting(process, false))\n".utf8))
            case .converting(let done, let estimated):
                bar.show("converting… \(done) of about \(max(done, estimated)) entries")
            }
        }
        let report: ConversionReport
        do {
            report = try await manager.convertDomain(named: name, to: mode, events: events)
        } catch {
            bar.finish()
            await manager.close()
            throw error
        }
        bar.finish()
        let replica = try manager.domain(named: name).replicaPath
        await manager.close()
        if output.json {
            try Output.json(report)
            return
        }
        if report.unchanged {
            print("domain '\(name)' is in \(mode.rawValue) mode already; nothing was changed")
            return
        }
        let layout = ReplicaLayouts.layout(for: mode)
        let form = layout.placeholderTakesItemsName ? "dataless files" : ".placeholder files"
        var line =
            "converted domain '\(name)' to \(mode.rawValue)\(report.resumed ? " (finishing an interrupted conversion)" : ""): "
            + "moved \(Self.count(report.movedEntries, "entry", "entries")) from \(report.source) to \(report.destination) "
            + "(\(Self.count(report.files, "file", "files")) and \(Self.count(report.folders, "folder", "folders")) kept as they were); "
            + "\(Self.count(report.convertedPlaceholders, "placeholder", "placeholders")) became \(form)"
        if report.removedPlaceholders > 0 {
            line +=
                "; \(Self.count(report.removedPlaceholders, "placeholder", "placeholders")) without an item or beside a real file removed"
        }
        print(line)
        if layout.isGuardedOnAccess {
            print("next: fileproviderctl serve \(name)  (mounts \(report.destination) on \(replica))")
        }
    }

    static func count(_ number: Int, _ one: String, _ many: String) -> String { "\(number) \(number == 1 ? one : many)" }
}
