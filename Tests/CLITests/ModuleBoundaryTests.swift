import Foundation
import Testing

/// The module boundaries of Docs/Architecture.md hold where a reviewer cannot see them at a
/// glance: only ProviderSystem imports the C shims of kernel calls and libfuse, and the CLI links the
/// conformance suite (`backend test`) but none of the test support that starts servers on
/// loopback (ProviderTesting); the engine's facade only routes.
@Suite struct ModuleBoundaryTests {
    /// The Swift files under `folder` of the repository (relative to it), skipping build folders.
    static func swiftFiles(under folder: String) -> [String] {
        let base = DocsTests.root.appendingPathComponent(folder)
        guard let walk = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { return [] }
        var found: [String] = []
        for case let url as URL in walk {
            if url.lastPathComponent == ".build" {
                walk.skipDescendants()
                continue
            }
            if url.pathExtension == "swift" { found.append(folder + "/" + url.path.dropFirst(base.path.count + 1)) }
        }
        return found
    }

    /// The Swift files of the repository that import `module`.
    static func importers(of module: String) throws -> [String] {
        var importers: [String] = []
        for file in ["Sources", "Adapters", "Tests"].flatMap(Self.swiftFiles(under:)) {
            let text = try String(contentsOf: DocsTests.root.appendingPathComponent(file), encoding: .utf8)
            let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            if lines.contains(where: { $0 == "import \(module)" || $0.hasSuffix(" import \(module)") }) { importers.append(file) }
        }
        return importers
    }

    @Test func onlyProviderSystemImportsTheSystemShim() throws {
        let importers = try Self.importers(of: "CSystemShims")
        // The walk sees ProviderSystem's own imports, so an empty list would mean it saw nothing.
        #expect(importers.contains("Sources/ProviderSystem/SystemCalls.swift"), "the walk found no import of CSystemShims at all")
        let others = importers.filter { !$0.hasPrefix("Sources/ProviderSystem/") }
        #expect(others.isEmpty, "kernel calls belong in ProviderSystem (wrap them there); these import CSystemShims: \(others)")
    }

    @Test func onlyProviderSystemImportsLibfuse() throws {
        let importers = try Self.importers(of: "CFUSE")
        #expect(importers.contains("Sources/ProviderSystem/FUSE/FUSESession.swift"), "the walk found no import of CFUSE at all")
        let others = importers.filter { !$0.hasPrefix("Sources/ProviderSystem/") }
        #expect(others.isEmpty, "libfuse is spoken to in ProviderSystem only (FUSESession and its types); these import CFUSE: \(others)")
    }

    @Test func theCLILinksTheConformanceSuiteButNoLoopbackServers() throws {
        let binary = CLIRunner.locateBinary()
        let bytes = try Data(contentsOf: binary, options: .alwaysMapped)
        // Swift's mangled names carry the module's name with its length: present for a module
        // linked in (symbols, type metadata), absent otherwise.
        #expect(bytes.range(of: Data("19ProviderConformance".utf8)) != nil, "\(binary.path) holds no code of ProviderConformance")
        #expect(
            bytes.range(of: Data("15ProviderTesting".utf8)) == nil,
            "\(binary.path) links ProviderTesting (loopback server fixtures); the CLI may link ProviderConformance only")
    }

    /// `DomainController` only routes requests to the parts that do the work (Architecture.md);
    /// work growing back into it shows first as its size.
    @Test func theFacadeStaysAFacade() throws {
        let file = "Sources/ProviderEngine/Facade/DomainController.swift"
        let text = try String(contentsOf: DocsTests.root.appendingPathComponent(file), encoding: .utf8)
        let lines = text.utf8.count(where: { $0 == UInt8(ascii: "\n") })
        #expect(lines < 300, "\(file) has \(lines) lines: move the work into a component over DomainContext (Materializer, Populator, …)")
        let extensions = Self.swiftFiles(under: "Sources/ProviderEngine").filter { $0.contains("/DomainController+") }
        #expect(extensions.isEmpty, "the facade has extension files doing work: \(extensions)")
    }
}
