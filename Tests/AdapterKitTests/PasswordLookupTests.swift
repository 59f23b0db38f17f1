import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

/// ``NetrcFile`` reads what ftp, curl and git write; ``PasswordLookup`` asks its sources in the
/// documented order and says why each had nothing.
@Suite("Password lookup")
struct PasswordLookupTests {
    @Test func netrcEntriesQuotedWordsAndMacrosAreRead() {
        let netrc = NetrcFile(
            text: """
                default login anyone password everywhere
                machine a.example login alice password "two words \\"quoted\\""
                macdef init
                machine a.example login mallory password from-a-macro

                machine a.example
                    login bob
                    password b0b
                machine b.example login carol
                """)
        #expect(netrc.entry(forAnyOf: ["a.example"], login: "alice")?.password == "two words \"quoted\"")
        #expect(netrc.entry(forAnyOf: ["a.example"], login: "bob")?.password == "b0b")
        #expect(netrc.entry(forAnyOf: ["a.example"], login: "mallory") == nil, "a macro's body was read as entries")
        #expect(netrc.entry(forAnyOf: ["a.example"], login: nil)?.login == "alice")
        // No password: no entry; a default entry is never used.
        #expect(netrc.entry(forAnyOf: ["b.example"], login: "carol") == nil)
        #expect(netrc.entry(forAnyOf: ["c.example"], login: nil) == nil)
        #expect(netrc.entry(forAnyOf: ["c.example", "a.example"], login: "bob")?.password == "b0b")
    }

    @Test func theSourcesAreAskedInOrderAndTheFirstWins() throws {
        let temp = try TemporaryFolder()
        try temp.write("credentials/fileprovider.d", Data("from systemd\n".utf8))
        try temp.write("home/.netrc", Data("machine host.example login u password from-netrc\n".utf8))
        let lookup = PasswordLookup(domain: "d", user: "u", machines: ["host.example"], environmentVariable: "FPK_PW")
        let base = [
            "HOME": temp.url("home").path, "DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": "",
        ]
        var environment = base.merging(["FPK_PW": "from the variable", "CREDENTIALS_DIRECTORY": temp.url("credentials").path]) {
            _, new in new
        }
        #expect(lookup.find(environment: environment).found?.source == "$FPK_PW")
        #expect(lookup.find(environment: environment).found?.password == "from the variable")

        environment["FPK_PW"] = nil
        let credential = lookup.find(environment: environment)
        #expect(credential.found?.password == "from systemd")
        #expect(credential.tried == ["the variable FPK_PW named by --password-env is not set"])

        environment["CREDENTIALS_DIRECTORY"] = nil
        let netrc = lookup.find(environment: environment)
        #expect(netrc.found?.password == "from-netrc")
        #expect(netrc.found?.source == "netrc \(temp.url("home").path)/.netrc")
        #expect(netrc.tried.count == 3)
        #expect(netrc.tried[1] == "the systemd credential fileprovider.d ($CREDENTIALS_DIRECTORY is not set)")
        #expect(netrc.tried[2].hasPrefix("the Secret Service ("), "\(netrc.tried)")

        let other = PasswordLookup(domain: "d", user: "someone-else", machines: ["host.example"])
        let none = other.find(environment: environment)
        #expect(none.found == nil)
        #expect(none.tried.last == "netrc \(temp.url("home").path)/.netrc (no entry for machine host.example with login someone-else)")
        // Outside a domain only the variable and netrc are asked.
        let anonymous = PasswordLookup(domain: nil, user: nil, machines: ["nowhere.example"], netrcFile: temp.url("missing").path)
        #expect(anonymous.find(environment: base).tried == ["netrc \(temp.url("missing").path) (no such file)"])
    }
}
