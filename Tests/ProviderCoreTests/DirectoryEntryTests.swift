import Foundation
import ProviderCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct DirectoryEntryTests {
    /// An entry with a short name at the very end of a mapped page, the next page unmapped: how
    /// `readdir`'s last entry can sit at the end of its buffer. Reading the 256 bytes that
    /// `dirent.d_name` declares (copying the entry or its name) crashes here.
    @Test func aShortEntryAtTheEndOfAPageIsReadWithinItsRecord() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let mapping = try #require(
            mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0).flatMap { $0 == MAP_FAILED ? nil : $0 })
        defer { munmap(mapping, 2 * page) }
        #expect(mprotect(mapping + page, page, PROT_NONE) == 0)

        let nameOffset = try #require(MemoryLayout<dirent>.offset(of: \dirent.d_name))
        let name = Array("ab".utf8) + [0]
        let record = (nameOffset + name.count + 7) / 8 * 8
        let entry = mapping + page - record
        memset(entry, 0, record)
        entry.storeBytes(of: 42, toByteOffset: try #require(MemoryLayout<dirent>.offset(of: \dirent.d_ino)), as: UInt64.self)
        entry.storeBytes(of: UInt16(record), toByteOffset: try #require(MemoryLayout<dirent>.offset(of: \dirent.d_reclen)), as: UInt16.self)
        entry.storeBytes(of: UInt8(DT_REG), toByteOffset: try #require(MemoryLayout<dirent>.offset(of: \dirent.d_type)), as: UInt8.self)
        name.withUnsafeBytes { (entry + nameOffset).copyMemory(from: $0.baseAddress!, byteCount: name.count) }

        let pointer = entry.assumingMemoryBound(to: dirent.self)
        #expect(Filename.decode(pointer) == "ab")
        #expect(DirectoryEntry.nameBytes(of: pointer) == Array("ab".utf8))
        #expect(DirectoryEntry.type(of: pointer) == Int32(DT_REG))
        #expect(DirectoryEntry.inode(of: pointer) == 42)
    }

    @Test func everyEntryOfARealFolderIsRead() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("dirent-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // Names of every length up to the longest a file system takes.
        let names = Set((1...255).map { String(repeating: "n", count: $0) })
        for name in names { #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent(name).path, contents: nil)) }
        let directory = try #require(opendir(folder.path))
        defer { closedir(directory) }
        var read = Set<String>()
        while let entry = readdir(directory) {
            if let name = Filename.decode(entry), name != ".", name != ".." { read.insert(name) }
        }
        #expect(read == names)
    }
}
