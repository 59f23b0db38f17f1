import Foundation
import ProviderTesting
import Testing

@testable import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Attributes set through a folder's descriptor (`setxattrat`, Linux 6.13, or the file's path
/// on an older kernel): what the engine marks each placed download with.
@Suite struct ExtendedAttributeTests {
    /// The value lands on the named file of the folder, and a symlink there is not followed.
    @Test func anAttributeSetThroughItsFolderLandsOnTheNamedFileAndNeverThroughASymlink() throws {
        let folder = try TemporaryFolder("xattr-at")
        let file = folder.path + "/file"
        let link = folder.path + "/link"
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        #expect(symlink(file, link) == 0)
        let descriptor = SystemCalls.openFolderPath(folder.path)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        #expect(ExtendedAttribute.set("user.test.at", to: Array("yes".utf8), inFolder: descriptor, file: "file", path: file) == 0)
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(ExtendedAttribute.get("user.test.at", atPath: file, into: &buffer) == 3)
        #expect(Array(buffer[..<3]) == Array("yes".utf8))
        // `user.*` attributes are refused on a symlink itself; the file it points to keeps its value.
        #expect(ExtendedAttribute.set("user.test.at", to: Array("no".utf8), inFolder: descriptor, file: "link", path: link) == -1)
        #expect(ExtendedAttribute.get("user.test.at", atPath: file, into: &buffer) == 3)
        #expect(Array(buffer[..<3]) == Array("yes".utf8))
        // Nothing went on the folder.
        #expect(ExtendedAttribute.get("user.test.at", atPath: folder.path, into: &buffer) == -1)
    }

    /// One list of names tells whether a file has any attribute of a namespace: not for a file
    /// with none or only another's, yes once one is there, and yes when the list cannot be read
    /// (the caller then reads each attribute as before).
    @Test func aListOfNamesTellsWhetherAFileHasAnAttributeOfANamespace() throws {
        let folder = try TemporaryFolder("xattr-list")
        let file = folder.path + "/file"
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        #expect(!ExtendedAttribute.hasAny(withPrefix: "user.fileprovider.", atPath: file))
        #expect(ExtendedAttribute.set("user.fileprovidery", to: Array("no".utf8), atPath: file) == 0)
        #expect(ExtendedAttribute.set("user.other", to: Array("no".utf8), atPath: file) == 0)
        #expect(!ExtendedAttribute.hasAny(withPrefix: "user.fileprovider.", atPath: file))
        #expect(ExtendedAttribute.set("user.fileprovider.status", to: Array("unsent".utf8), atPath: file) == 0)
        #expect(ExtendedAttribute.hasAny(withPrefix: "user.fileprovider.", atPath: file))
        #expect(ExtendedAttribute.hasAny(withPrefix: "user.fileprovider.", atPath: folder.path + "/missing"))
    }
}
