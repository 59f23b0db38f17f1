import Foundation
import ProviderCore

extension BackendConformance {
    static func roundTripName(_ c: ConformanceContext, _ name: String) async throws {
        let data = Data(name.utf8)
        let file = try await c.createFile(name, data)
        guard let listed = try await c.child(name) else {
            throw c.failure("\(name.debugDescription) is not listed with exactly its bytes; listed: \(try await c.list().map(\.filename.debugDescription))")
        }
        try c.expectSame(listed, file, "the listing of \(name.debugDescription)")
        try c.expect(try await c.fetch(listed.identifier) == data, "the bytes of \(name.debugDescription) differ")
        try c.expectSame(try await c.backend.item(for: file.identifier), file, "item(for:) of \(name.debugDescription)")
    }

    static let invalidNames: [String] = ["", ".", "..", "a/b", "/", "nul\u{0}byte", String(repeating: "x", count: 256),
        String(repeating: "é", count: 128)]

    static let nameChecks: [Check] = [
        ("unicodeNormalizationFormsStayDistinct", { c in
            let composed = "caf\u{E9}.txt"
            let decomposed = "cafe\u{301}.txt"
            try c.expect(!composed.utf8.elementsEqual(decomposed.utf8), "test setup")
            let nfc = try await c.createFile(composed, Data("NFC".utf8))
            let nfd = try await c.createFile(decomposed, Data("NFD".utf8))
            let listed = try await c.list()
            try c.expect(listed.count == 2, "NFC and NFD names gave \(listed.count) items")
            try c.expect(listed.contains { $0.filename.utf8.elementsEqual(composed.utf8) }, "the NFC name is not listed byte for byte")
            try c.expect(listed.contains { $0.filename.utf8.elementsEqual(decomposed.utf8) }, "the NFD name is not listed byte for byte")
            try c.expect(try await c.fetch(nfc.identifier) == Data("NFC".utf8), "the NFC file has the other's bytes")
            try c.expect(try await c.fetch(nfd.identifier) == Data("NFD".utf8), "the NFD file has the other's bytes")
        }),
        ("namesWithSpaces", { c in
            try await roundTripName(c, "two  spaces and a trailing one ")
            try await roundTripName(c, " leading space")
        }),
        ("nameOf255Bytes", { c in
            let name = String(repeating: "é", count: 127) + "x"
            try c.expect(name.utf8.count == 255, "test setup")
            try await roundTripName(c, name)
            try await roundTripName(c, String(repeating: "z", count: 255))
        }),
        ("nameWithNewline", { c in try await roundTripName(c, "line\nbreak.txt") }),
        ("invalidNamesAreRejectedOnCreate", { c in
            for name in invalidNames {
                try await c.expectError(.invalidFilename, "creating a file named \(name.debugDescription)") {
                    try await c.createFile(name)
                }
                try await c.expectError(.invalidFilename, "creating a folder named \(name.debugDescription)") {
                    try await c.createFolder(name)
                }
            }
            try c.expect(try await c.list().isEmpty, "refused names left items behind")
        }),
        ("invalidNamesAreRejectedOnRename", { c in
            guard try await movesOrDeclined(c) else { return }
            let file = try await c.createFile("well-named")
            for name in invalidNames {
                try await c.expectError(.invalidFilename, "renaming to \(name.debugDescription)") {
                    try await c.rename(file, to: name)
                }
            }
            try c.expect(try await c.list().map(\.filename) == ["well-named"], "refused renames changed the folder")
        }),
    ]
}
