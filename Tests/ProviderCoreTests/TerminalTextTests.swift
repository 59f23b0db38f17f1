import ProviderCore
import Testing

/// Names quoted as GNU `ls --quoting-style=shell-escape` quotes them (the expected strings are
/// what coreutils 9.1 printed for the same names), messages escaped as `--quoting-style=escape`.
@Suite struct TerminalTextTests {
    @Test(arguments: [
        ("esc\u{1B}[31mRED.txt", #"'esc'$'\033''[31mRED.txt'"#),
        ("\u{1B}x", #"''$'\033''x'"#),
        ("a\nb", #"'a'$'\n''b'"#),
        ("it's\tx", #"'it'\''s'$'\t''x'"#),
        ("c1\u{9B}x", #"'c1'$'\302\233''x'"#),
        ("x\u{7F}", #"'x'$'\177'"#),
        ("cr\r\u{7}", #"'cr'$'\r\a'"#),
        // Bidirectional controls too (GNU ls prints these as they are).
        ("u\u{202E}txt.exe", #"'u'$'\342\200\256''txt.exe'"#),
    ])
    func namesWithControlCharactersAreQuotedAsGNULsQuotesThem(_ name: String, _ expected: String) {
        #expect(TerminalText.quoted(name) == expected)
        #expect(TerminalText.quoted(bytes: Array(name.utf8)) == expected)
    }

    @Test(arguments: ["plain.txt", "with space", "it's", "ünïcödé ✓", "$HOME", ""])
    func otherNamesStayAsTheyAre(_ name: String) {
        #expect(TerminalText.quoted(name) == name)
        #expect(TerminalText.escaped(name) == name)
    }

    @Test func bytesThatAreNotUTF8AreEscaped() {
        #expect(TerminalText.quoted(bytes: Array("bad".utf8) + [0xFF] + Array("name".utf8)) == #"'bad'$'\377''name'"#)
        // A truncated sequence: each byte on its own.
        #expect(TerminalText.quoted(bytes: [0x61, 0xE2, 0x82]) == #"'a'$'\342\202'"#)
        #expect(TerminalText.quoted(bytes: Array("ok é".utf8)) == "ok é")
    }

    @Test func messagesKeepTheirLayoutAndLoseTheirEscapes() {
        #expect(TerminalText.escaped("no item at d:/esc\u{1B}[31mRED.txt") == #"no item at d:/esc\033[31mRED.txt"#)
        #expect(TerminalText.escaped("two\nlines\tand a tab") == "two\nlines\tand a tab")
        #expect(TerminalText.escaped("cr\rhidden") == #"cr\rhidden"#)
    }
}
