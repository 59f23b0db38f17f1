import Foundation
import ProviderCore
import Testing

@Suite struct JSONTextTests {
    @Test func quotedStringsParseBackToTheSameText() throws {
        for text in ["plain", "quote \" and \\ backslash", "new\nline\ttab\r", "\u{1} \u{1f} bell\u{7}", "ünïcødé 📄", ""] {
            let json = "[" + JSONText.quoted(text) + "]"
            let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String]
            #expect(parsed == [text], "\(json)")
        }
    }

    @Test func objectsHaveSortedKeys() throws {
        let json = JSONText.object(["to": "b/\"c\"", "from": "a\n"])
        #expect(json == #"{"from":"a\n","to":"b/\"c\""}"#)
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: String]
        #expect(parsed == ["from": "a\n", "to": "b/\"c\""])
    }
}
