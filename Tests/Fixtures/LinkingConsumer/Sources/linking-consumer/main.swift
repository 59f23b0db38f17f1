import Foundation
import LocalAdapter
import ProviderCore
import ProviderEngine
import ProviderStore

/// Builds a small folder, serves it through LocalBackend under a ProviderManager on a temporary
/// home, syncs, and checks that the database and the backend both list exactly what was made.
/// Prints the names it saw; exits 0 only when everything matches.

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("linking-consumer: FAIL: \(message)\n".utf8))
    exit(1)
}

let work = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-linking-\(UUID().uuidString)")
let source = work.appendingPathComponent("source")
let home = work.appendingPathComponent("home")
defer { try? FileManager.default.removeItem(at: work) }

// Top-level entries of the source folder; "folder" also holds one file.
let files: [String: String] = ["alpha.txt": "alpha\n", "beta.md": "# beta\n", "gamma.bin": "\u{1}\u{2}\u{3}"]
let expectedTop = (Array(files.keys) + ["folder"]).sorted()
let expectedAll = (expectedTop + ["folder/inner.txt"]).sorted()
do {
    try FileManager.default.createDirectory(at: source.appendingPathComponent("folder"), withIntermediateDirectories: true)
    for (name, text) in files { try Data(text.utf8).write(to: source.appendingPathComponent(name)) }
    try Data("inner\n".utf8).write(to: source.appendingPathComponent("folder/inner.txt"))
} catch {
    fail("cannot create the source folder: \(error)")
}

do {
    let manager = try ProviderManager(home: home, registry: BackendRegistry([LocalBackend.descriptor]))
    try await manager.addDomain(name: "linked", kind: "local", options: ["root": source.path])
    let controller = try await manager.controller(for: "linked")
    let report = try await controller.sync()
    print("synced: \(report.listedItems) items listed, \(report.added) added")

    // From the shared database.
    let domain = try manager.domain(named: "linked")
    guard let id = domain.id else { fail("the domain has no id") }
    let stored = try manager.store.descendants(domainID: id, of: "").map(\.path).sorted()
    let storedTop = try manager.store.children(domainID: id, parent: .rootContainer)
        .filter { !$0.path.isEmpty }.map(\.filename).sorted()
    print("store: \(stored.joined(separator: " "))")

    // From the backend directly.
    let backend = try LocalBackend(rootPath: source.path, pageSize: 2)
    let listed = try await backend.enumerateAllItems(in: .rootContainer).map(\.filename).sorted()
    await backend.close()
    print("backend: \(listed.joined(separator: " "))")

    let integrity = try manager.store.integrityCheck()
    await manager.close()

    guard stored == expectedAll else { fail("the store holds \(stored), expected \(expectedAll)") }
    guard storedTop == expectedTop else { fail("the store's root lists \(storedTop), expected \(expectedTop)") }
    guard listed == expectedTop else { fail("the backend lists \(listed), expected \(expectedTop)") }
    guard integrity == "ok" else { fail("integrity check: \(integrity)") }
    print("linking-consumer: OK")
} catch {
    fail("\(error)")
}
