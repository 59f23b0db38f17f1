import ArgumentParser
import Foundation
import ProviderCore
import ProviderEngine

#if canImport(Glibc)
    import Glibc
#endif

struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Hash the downloaded files again and compare them with the recorded hashes, offline.",
        discussion: """
            Reads every downloaded file of every domain (or of DOMAIN, or of the folder or file \
            DOMAIN:/PATH) and compares its SHA-256 with the one recorded when it was downloaded \
            or uploaded, and with the store's own hash where the store gave one. The store is \
            not contacted and nothing is changed. Each problem is one line, 'KIND  DOMAIN:/path  \
            what to do', where KIND is: 'bit-rot' (the bytes changed though the size and \
            modification time did not: the disk, or a program that put the date back; no sync \
            would ever send it), 'unsent-edit' (changed here and not synced yet: not read, the \
            next sync uploads it), 'store-differs' (the store gives another hash than the one \
            of the bytes downloaded), 'missing' (recorded as downloaded, no file there) or \
            'unreadable'. A summary line follows. Files downloaded before hashes were kept, \
            resumed downloads, files filled range by range and files of external programs have \
            no recorded hash: they are counted as 'not hashed before'. A progress line is drawn \
            on standard error when it is a terminal (--progress, --no-progress). --json prints \
            an object with files, verified, unhashed, bytesRead and problems (each with domain, \
            path, location, kind, recordedHash, foundHash, storeHash and detail). Exits 1 when \
            anything but unsent edits was found.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var progress: ProgressOptions

    @Argument(
        help: ArgumentHelp("DOMAIN, DOMAIN:/path or a path inside a replica; every domain when left out.", valueName: "scope"),
        completion: .itemPaths)
    var scope: String?

    func run() async throws {
        let manager = try global.manager()
        let location = try scope.map { argument throws(FileProviderError) -> ItemLocation in
            // A bare domain name is the whole domain.
            if !argument.contains(":") && !argument.contains("/"), (try? manager.domain(named: argument)) != nil {
                return ItemLocation(domain: argument, path: "")
            }
            return try manager.resolve(argument)
        }
        let bar = ProgressBar(label: "verify", options: progress)
        let handler = bar.handler
        let report = try await manager.verify(location) { done in
            handler?(
                .transfer(
                    completedBytes: done.bytes, totalBytes: done.totalBytes, completedItems: done.files, totalItems: done.totalFiles,
                    resumedBytes: 0))
        }
        bar.finish()
        if output.json {
            try Output.json(ReportJSON(report))
        } else {
            let terminal = isatty(STDOUT_FILENO) == 1
            var text = ""
            for problem in report.problems {
                let location = terminal ? TerminalText.quoted(problem.location) : problem.location
                text += "\(Self.label(problem.kind))  \(location)  \(TerminalText.escaped(problem.detail))\n"
            }
            let damaged = report.problems.filter(\.isDamage).count
            let edits = report.problems.count - damaged
            text +=
                "\(report.files) downloaded file\(report.files == 1 ? "" : "s") (\(Output.bytes(report.bytesRead)) read): "
                + "\(report.verified) verified, \(report.unhashed) not hashed before, \(damaged) damaged, \(edits) unsent edit\(edits == 1 ? "" : "s")\n"
            Output.write(text)
        }
        if report.foundDamage { throw ExitCode(1) }
    }

    /// The word a problem's line starts with.
    static func label(_ kind: IntegrityProblem.Kind) -> String {
        switch kind {
        case .bitRot: return "bit-rot"
        case .unsentEdit: return "unsent-edit"
        case .storeHashDiffers: return "store-differs"
        case .missing: return "missing"
        case .unreadable: return "unreadable"
        }
    }
}

/// `verify --json`.
private struct ReportJSON: Encodable {
    var files: Int
    var verified: Int
    var unhashed: Int
    var bytesRead: Int64
    var problems: [ProblemJSON]

    init(_ report: VerifyReport) {
        files = report.files
        verified = report.verified
        unhashed = report.unhashed
        bytesRead = report.bytesRead
        problems = report.problems.map(ProblemJSON.init)
    }
}

/// A problem of `verify --json`; absent hashes are `null`.
private struct ProblemJSON: Encodable {
    var domain: String
    var path: String
    var location: String
    var kind: String
    var recordedHash: String?
    var foundHash: String?
    var storeHash: String?
    var detail: String

    init(_ problem: IntegrityProblem) {
        domain = problem.domain
        path = "/" + problem.path
        location = problem.location
        kind = VerifyCommand.label(problem.kind)
        recordedHash = problem.recordedHash
        foundHash = problem.foundHash
        storeHash = problem.storeHash
        detail = problem.detail
    }

    func encode(to encoder: any Encoder) throws {
        enum Keys: String, CodingKey { case domain, path, location, kind, recordedHash, foundHash, storeHash, detail }
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(domain, forKey: .domain)
        try container.encode(path, forKey: .path)
        try container.encode(location, forKey: .location)
        try container.encode(kind, forKey: .kind)
        try container.encode(recordedHash, forKey: .recordedHash)
        try container.encode(foundHash, forKey: .foundHash)
        try container.encode(storeHash, forKey: .storeHash)
        try container.encode(detail, forKey: .detail)
    }
}
