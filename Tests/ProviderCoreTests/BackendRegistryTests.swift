import ProviderCore
import Testing

@Suite struct BackendRegistryTests {
    static func descriptor(_ kind: String) -> BackendDescriptor {
        BackendDescriptor(kind: kind, summary: "test", options: []) { _ in
            throw FileProviderError(.notSupported, "not made in this test")
        }
    }

    @Test func resolverIsAskedForKindsNotRegistered() throws {
        let registry = BackendRegistry([Self.descriptor("built")]) { kind throws(FileProviderError) in
            if kind == "broken" { throw FileProviderError(.corruptData, "cannot describe it") }
            return kind == "found" ? Self.descriptor("found") : nil
        }
        #expect(try registry.descriptor(for: "built").kind == "built")
        #expect(try registry.descriptor(for: "found").kind == "found")
        let unknown = #expect(throws: FileProviderError.self) { try registry.descriptor(for: "missing") }
        #expect(unknown?.code == .invalidArgument)
        #expect(unknown?.message.contains("unknown backend 'missing'") == true)
        let broken = #expect(throws: FileProviderError.self) { try registry.descriptor(for: "broken") }
        #expect(broken?.code == .corruptData)
    }
}
