import ProviderCore
import Testing

@Suite struct FilenameTests {
    @Test(arguments: ["", ".", "..", "a/b", "/", "nul\u{0}x", String(repeating: "é", count: 128)])
    func unsafeNamesAreRefused(_ name: String) {
        #expect(!Filename.isValid(name))
        #expect(throws: FileProviderError.self) { try Filename.validate(name) }
    }

    @Test(arguments: ["a", "with space", "ünïcödé ✓", "..hidden", String(repeating: "x", count: 255)])
    func safeNamesPass(_ name: String) throws {
        try Filename.validate(name)
    }

    @Test func invalidUTF8IsNotDecoded() {
        #expect(Filename.decode([0x66, 0xff, 0x6f]) == nil)
        #expect(Filename.decode(Array("ok".utf8)) == "ok")
        #expect(Filename.decode(Array("café 📄".utf8)) == "café 📄")
        #expect(Filename.decode(Array("ok".utf8)[...]) == "ok")
        #expect(Filename.decode([0x6f, 0x80]) == nil)
    }
}

@Suite struct DescriptorTests {
    let descriptor = BackendDescriptor(
        kind: "test", summary: "a test",
        options: [
            BackendOption(name: "root", help: "the root", type: .path, isRequired: true),
            BackendOption(name: "connections", help: "how many", type: .integer, defaultValue: "4"),
            BackendOption(name: "token", help: "a token", isSecret: true),
        ]
    ) { _ in throw FileProviderError(.notSupported, "no") }

    @Test func defaultsAreFilledIn() throws {
        let configuration = try descriptor.validate(["root": "/tmp"])
        #expect(configuration["connections"] == "4")
        #expect(try configuration.integer("connections") == 4)
    }

    @Test func missingRequiredOptionIsNamed() {
        #expect {
            try descriptor.validate([:])
        } throws: { error in
            (error as? FileProviderError)?.message.contains("--root") == true
        }
    }

    @Test func unknownOptionAndBadTypeAreRefused() {
        #expect(throws: FileProviderError.self) { try descriptor.validate(["root": "/", "nope": "1"]) }
        #expect(throws: FileProviderError.self) { try descriptor.validate(["root": "/", "connections": "x"]) }
    }

    @Test func secretsAreRedacted() throws {
        let configuration = try descriptor.validate(["root": "/", "token": "hunter2"])
        #expect(descriptor.redacted(configuration)["token"] == "<redacted>")
    }

    @Test func errorCodesHaveApplesNamesAndReactions() {
        #expect(FileProviderError.Code.noSuchItem.rawValue == -1005)
        #expect(FileProviderError.Code.serverUnreachable.name == "serverUnreachable")
        #expect(FileProviderError.Code.serverUnreachable.reaction == .backOffDomain)
        #expect(FileProviderError.Code.syncAnchorExpired.reaction == .enumerateFromScratch)
        #expect(FileProviderError.Code.pageExpired == .syncAnchorExpired)
    }
}

@Suite struct ItemIdentifierTests {
    @Test func nfcAndNfdSpellingsStayDistinct() {
        let nfc = ItemIdentifier("caf\u{e9}")
        let nfd = ItemIdentifier("cafe\u{301}")
        #expect(nfc != nfd)
        #expect(Set([nfc, nfd]).count == 2)
        #expect(nfc == ItemIdentifier("caf\u{e9}"))
    }
}
