import AdapterKit
import Foundation
import ProviderCore
import Testing

/// The kit's HTTP options: one list for every HTTP adapter, parsed and range-checked once;
/// a bad value is refused with a message naming the option and what it allows.
@Suite struct HTTPOptionsTests {
    static func parse(_ values: [String: String]) throws(FileProviderError) -> HTTPOptions {
        try HTTPOptions(configuration: BackendConfiguration(values))
    }

    /// The error for `values`, or `nil` when they are taken.
    static func refusal(_ values: [String: String]) -> FileProviderError? {
        do {
            _ = try parse(values)
            return nil
        } catch {
            return error
        }
    }

    @Test func theOptionsAndTheirDefaults() {
        let options = HTTPOptions.backendOptions
        #expect(options.map(\.name) == ["ca-file", "connect-timeout", "timeout", "connections", "retries"])
        let defaults = Dictionary(uniqueKeysWithValues: options.map { ($0.name, $0.defaultValue) })
        #expect(defaults["connect-timeout"] == "10")
        #expect(defaults["timeout"] == "30")
        #expect(defaults["connections"] == "4")
        #expect(defaults["retries"] == "4")
        #expect(defaults["ca-file"] == .some(nil))
        #expect(options.first { $0.name == "ca-file" }?.type == .path)
        #expect(options.dropFirst().allSatisfy { $0.type == .integer })
    }

    @Test func unsetOptionsTakeTheirDefaults() throws {
        let options = try Self.parse([:])
        #expect(options == HTTPOptions(caFile: nil, connectTimeout: 10, timeout: 30, connections: 4, retries: 4))
        let settings = options.clientSettings(baseURL: "http://127.0.0.1:1")
        #expect(settings.connectTimeout == 10 && settings.stallTimeout == 30)
        #expect(settings.connections == 4 && settings.retries == 4 && settings.caFile == nil)
    }

    @Test func valuesInRangeAreTaken() throws {
        let options = try Self.parse([
            "connect-timeout": "1", "timeout": "86400", "connections": "64", "retries": "0", "ca-file": "/dev/null",
        ])
        #expect(options == HTTPOptions(caFile: "/dev/null", connectTimeout: 1, timeout: 86400, connections: 64, retries: 0))
        #expect(try Self.parse(["connections": "1", "retries": "10"]).retries == 10)
    }

    @Test(arguments: [
        ("connections", "0", "--connections must be 1 to 64, not 0"),
        ("connections", "-3", "--connections must be 1 to 64, not -3"),
        ("connections", "65", "--connections must be 1 to 64, not 65"),
        ("connections", "9223372036854775807", "--connections must be 1 to 64, not 9223372036854775807"),
        ("retries", "-1", "--retries must be 0 to 10, not -1"),
        ("retries", "11", "--retries must be 0 to 10, not 11"),
        ("timeout", "0", "--timeout must be more than 0 and at most 86400 seconds, not 0"),
        ("timeout", "-5", "--timeout must be more than 0 and at most 86400 seconds, not -5"),
        ("timeout", "86401", "--timeout must be more than 0 and at most 86400 seconds, not 86401"),
        ("connect-timeout", "0", "--connect-timeout must be more than 0 and at most 86400 seconds, not 0"),
        (
            "connect-timeout", "9223372036854775807",
            "--connect-timeout must be more than 0 and at most 86400 seconds, not 9.223372036854776e+18"
        ),
    ])
    func outOfRangeValuesAreRefused(_ name: String, _ value: String, _ message: String) throws {
        let error = try #require(Self.refusal([name: value]), "--\(name) \(value) was taken")
        #expect(error.code == .invalidArgument)
        #expect(error.message == message)
    }

    @Test(arguments: ["connections", "retries", "timeout", "connect-timeout"])
    func wordsAndHugeNumbersAreRefusedNamingTheOption(_ name: String) throws {
        for value in ["four", "1.5", "", "99999999999999999999999"] {
            let error = try #require(Self.refusal([name: value]), "--\(name) '\(value)' was taken")
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("--\(name)"), "\(error.message)")
            #expect(error.message.contains("whole number"), "\(error.message)")
        }
    }

    @Test func aCAFileThatCannotBeReadIsRefused() throws {
        let error = try #require(Self.refusal(["ca-file": "/nonexistent/ca.pem"]))
        #expect(error.code == .invalidArgument)
        #expect(error.message == "--ca-file: the file /nonexistent/ca.pem cannot be read")
        // An empty value means the system's CAs.
        #expect(try Self.parse(["ca-file": ""]).caFile == nil)
    }

    /// Values given in code (a backend's `init`) are checked the same way, NaN and infinity
    /// included, and the client itself refuses settings out of range rather than trapping.
    @Test func valuesFromCodeAreCheckedToo() throws {
        for bad in [Double.nan, .infinity, -.infinity, 0, -0.5, 1e300] {
            #expect(throws: FileProviderError.self) { try HTTPOptions(timeout: bad).check() }
            #expect(throws: FileProviderError.self) { try HTTPOptions(connectTimeout: bad).check() }
            let settings = HTTPOptions(connectTimeout: bad).clientSettings(baseURL: "http://127.0.0.1:1")
            #expect(throws: FileProviderError.self) { _ = try HTTPClient(settings: settings) }
        }
        #expect(throws: Never.self) { try HTTPOptions(connectTimeout: 0.5, timeout: 0.25).check() }
        var settings = HTTPOptions().clientSettings(baseURL: "http://127.0.0.1:1")
        settings.connections = 0
        #expect(throws: FileProviderError.self) { _ = try HTTPClient(settings: settings) }
    }
}
