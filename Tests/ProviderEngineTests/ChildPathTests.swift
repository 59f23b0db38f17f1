import Foundation
import Testing

@testable import ProviderEngine

@Suite struct ChildPathTests {
    /// A child's path is its folder's path and its name; the identifier when it is that path.
    @Test func aChildsPathIsFolderSlashNameWhateverItsIdentifier() {
        #expect(StoreWalk.childPath("c.txt", in: "a/b", identifier: "a/b/c.txt") == "a/b/c.txt")
        #expect(StoreWalk.childPath("c.txt", in: "a/b", identifier: "id-42") == "a/b/c.txt")
        #expect(StoreWalk.childPath("c.txt", in: "a/b", identifier: "a/bc.txt") == "a/b/c.txt")
        #expect(StoreWalk.childPath("c.txt", in: "a/b", identifier: "a/b/c.tx") == "a/b/c.txt")
        #expect(StoreWalk.childPath("c.txt", in: "a/b", identifier: "a/x/c.txt") == "a/b/c.txt")
        #expect(StoreWalk.childPath("c.txt", in: "a/b", identifier: "") == "a/b/c.txt")
        let long = String(repeating: "folder/", count: 10) + "name ünïcødé"
        #expect(StoreWalk.childPath("name ünïcødé", in: String(long.dropLast(13)), identifier: long) == long)
    }
}
