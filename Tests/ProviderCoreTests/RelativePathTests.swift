import ProviderCore
import Testing

@Suite struct RelativePathTests {
    @Test func splitsAtTheLastSlash() {
        #expect(RelativePath("a/b/c.txt").split == ("a/b", "c.txt"))
        #expect(RelativePath("c.txt").split == ("", "c.txt"))
        #expect(RelativePath("").split == ("", ""))
        #expect(RelativePath("a/b").parent == "a")
        #expect(RelativePath("a/b").name == "b")
        #expect(RelativePath.root.isRoot && !RelativePath("a").isRoot)
    }

    @Test func awkwardNamesStayWhole() {
        for name in [" ", "..", ".placeholder", "a b", "tab\there", "new\nline", "-n", "*?[", "\\", "é"] {
            #expect(RelativePath("d/" + name).split == ("d", name), "\(name.debugDescription)")
            #expect(RelativePath(name).split == ("", name), "\(name.debugDescription)")
            #expect(RelativePath("d").appending(name) == "d/" + name)
            #expect(RelativePath.root.appending(name) == name)
        }
    }

    @Test func slashesAreTakenAsTheyAre() {
        // Never normalised: a trailing slash ends in an empty name, a leading one starts with
        // an empty folder name, "/" alone is an empty name in the root.
        #expect(RelativePath("a/b/").split == ("a/b", ""))
        #expect(RelativePath("/a").split == ("", "a"))
        #expect(RelativePath("/").split == ("", ""))
        #expect(RelativePath("a//b").split == ("a/", "b"))
        #expect(!RelativePath("a/b").isAtOrBelow("a/"))
        #expect(!RelativePath("a").isAtOrBelow("/"))
    }

    @Test func atOrBelowIsByWholeNames() {
        #expect(RelativePath("a/b").isAtOrBelow("a/b"))
        #expect(RelativePath("a/b/c").isAtOrBelow("a/b"))
        #expect(RelativePath("a/b/c").isAtOrBelow("a"))
        #expect(RelativePath("anything").isAtOrBelow(""))
        #expect(RelativePath("").isAtOrBelow(""))
        #expect(!RelativePath("a/bc").isAtOrBelow("a/b"))
        #expect(!RelativePath("a").isAtOrBelow("a/b"))
        #expect(!RelativePath("").isAtOrBelow("a"))
        #expect(!RelativePath("b/a").isAtOrBelow("a"))
    }

    @Test func utf8IsComparedByteForByte() {
        let composed = "caf\u{E9}"  // é as one scalar
        let decomposed = "cafe\u{301}"  // e + combining acute: equal as Swift Strings
        #expect(composed == decomposed)
        #expect(!RelativePath(decomposed + "/x").isAtOrBelow(composed))
        #expect(RelativePath(decomposed + "/x").isAtOrBelow(decomposed))
        #expect(RelativePath(composed + "/x").split == (composed, "x"))
        // A name starting with a combining mark joins the slash into one Character; it is still
        // a name of its own.
        let marked = "a/\u{301}x"
        #expect(RelativePath(marked).split == ("a", "\u{301}x"))
        #expect(RelativePath(marked).isAtOrBelow("a"))
        #expect(RelativePath("日本/語.txt").split == ("日本", "語.txt"))
        #expect(RelativePath("😀/🎉").name == "🎉")
    }

    @Test func ancestorsNearestFirst() {
        #expect(RelativePath("a/b/c").ancestors == ["a/b", "a"])
        #expect(RelativePath("a").ancestors.isEmpty)
        #expect(RelativePath("").ancestors.isEmpty)
    }
}
