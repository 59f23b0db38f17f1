import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

struct DomainConvertCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "convert",
        abstract:
            "Convert a domain's replica to the other replica mode, or a dataless domain to another on-access mechanism, keeping every file.",
        discussion: """
            Downloaded, pinned and edited files, conflicted copies and everything else in the \
            replica are moved as they are (renamed: the next sync sends exactly the edits it would \
            have sent); only the files that are not downloaded change their form, and nothing is \
            downloaded or sent.

            --mode dataless: the replica folder's contents move into the backing folder \
            <home>/replicas/<name>, each <name>.placeholder becomes a dataless file under its real \
            name, and the replica folder stays empty: 'fileproviderctl serve' mounts the backing \
            folder there. --on-access chooses how (auto, the default: fanotify where it can work, \
            else fuse), with the checks and refusals of 'domain add --mode dataless --on-access'.
            --mode placeholder-files: the backing folder's contents move into the replica folder, \
            each dataless file becomes <name>.placeholder, and the backing folder is removed.
            --on-access fanotify|fuse|auto alone (or with --mode dataless), for a dataless domain: \
            moves it to that mechanism. No file moves (both keep the files in the backing folder \
            in one form); the domain's record changes, and with it what 'serve' mounts. Refused, \
            with the reason, where the mechanism cannot work; a placeholder-files domain is \
            refused (exit 2): give --mode dataless too.

            Stop 'serve' first: a served domain is refused. Both folders must be on one file \
            system (files are renamed, never copied). A running sync of the domain is waited for; \
            no sync, 'serve' or other command works on the domain until the conversion is done. \
            Interrupted (even by kill -9), the same command finishes it; until then the other \
            commands refuse the domain and say so. A domain in the mode (and on the mechanism) \
            already is left as it is.

            Examples:
              fileproviderctl domain convert photos --mode dataless
              fileproviderctl domain convert photos --mode dataless --on-access fuse
              fileproviderctl domain convert photos --on-access fanotify
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(help: "The domain's name.", completion: .domainNames)
    var name: String

    @Option(help: ArgumentHelp("The mode to convert to: dataless or placeholder-files.", valueName: "mode"))
    var mode: ReplicaMode?

    @Option(
        help: ArgumentHelp(
            "How programs reach the dataless domain's files: auto (fanotify where it can work, else fuse), fanotify or fuse; the default keeps a dataless domain's and gives a domain converted to dataless auto's.",
            valueName: "mechanism"))
    var onAccess: OnAccessChoice?

    func validate() throws {
        if mode == nil && onAccess == nil {
            throw ValidationError("give --mode dataless|placeholder-files, or --on-access fanotify|fuse|auto for a dataless domain")
        }
        if mode == .placeholderFiles && onAccess != nil {
            throw ValidationError(
                "--on-access chooses how programs reach a dataless domain's files: convert to --mode dataless, or leave it out")
        }
    }

    func run() async throws {
        let manager = try global.manager()
        let mode: ReplicaMode
        if let asked = self.mode {
            mode = asked
        } else {
            // --on-access alone: the domain is (or is being made) dataless.
            let record: DomainRecord
            do { record = try manager.domain(named: name) } catch {
                await manager.close()
                throw error
            }
            if record.replicaMode != .dataless && manager.unfinishedConversion(ofDomainNamed: name) != ReplicaMode.dataless.rawValue {
                await manager.close()
                throw FileProviderError(
                    .invalidArgument,
                    "domain '\(name)' is in placeholder-files mode: --on-access is how programs reach a dataless domain's files; convert it with 'fileproviderctl domain convert \(name) --mode dataless --on-access \(onAccess?.rawValue ?? "auto")'"
                )
            }
            mode = .dataless
        }
        let selection = onAccess.map { OnAccessSelection($0.mechanism) } ?? .keep
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
            report = try await manager.convertDomain(named: name, to: mode, onAccess: selection, events: events)
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
            if onAccess != nil, let mechanism = report.onAccessTo {
                print("domain '\(name)' is on \(mechanism.rawValue) already (dataless mode); nothing was changed")
            } else {
                print("domain '\(name)' is in \(mode.rawValue) mode already; nothing was changed")
            }
            return
        }
        if report.from == report.to, let from = report.onAccessFrom, let to = report.onAccessTo {
            print(
                "converted domain '\(name)' from \(from.rawValue) to \(to.rawValue): no file moved (both keep the files in \(report.destination) in one form)"
            )
            print("on access: \(to.rawValue): \(report.onAccessReason ?? "")")
            print("next: fileproviderctl serve \(name)  (mounts \(report.destination) on \(replica)\(to == .fuse ? " through FUSE" : ""))")
            return
        }
        let layout = ReplicaLayouts.layout(for: mode, onAccess: report.onAccessTo ?? .fanotify)
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
        if let to = report.onAccessTo {
            print("on access: \(to.rawValue): \(report.onAccessReason ?? "")")
        }
        if layout.keepsFilesInBackingFolder {
            print(
                "next: fileproviderctl serve \(name)  (mounts \(report.destination) on \(replica)\(layout.mountsThroughFUSE ? " through FUSE" : ""))"
            )
        }
    }

    static func count(_ number: Int, _ one: String, _ many: String) -> String { "\(number) \(number == 1 ? one : many)" }
}
