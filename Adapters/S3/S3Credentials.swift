import AdapterKit
import Foundation
import ProviderCore

/// The credentials and region of a domain, found the AWS way when the backend connects (never
/// stored): `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`, or a profile
/// of `~/.aws/credentials` and `~/.aws/config` (the files `aws configure` writes;
/// `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE` name others).
struct S3Credentials: Sendable, Equatable {
    var accessKey: String
    var secretKey: String
    var sessionToken: String?
    /// Where they came from, for messages (`the environment`, `profile work of ~/.aws/credentials`).
    var source: String

    /// The credentials for `profile`, or from the environment without one (then the profile
    /// named by `AWS_PROFILE`, else `default`, when the environment has none).
    ///
    /// - Returns: the credentials and the profile's region (`nil` when it has none); no
    ///   credentials when nothing gives any (requests are then sent unsigned, for a public
    ///   bucket).
    /// - Throws: `invalidArgument` when a named `profile` is in neither file, or gives an
    ///   access key without a secret key (or the other way round); the same for the
    ///   environment's variables.
    static func find(profile: String?, environment: [String: String]) throws(FileProviderError) -> (
        credentials: S3Credentials?, region: String?
    ) {
        let home = environment["HOME"] ?? NSHomeDirectory()
        let credentialsFile = environment["AWS_SHARED_CREDENTIALS_FILE"] ?? "\(home)/.aws/credentials"
        let configFile = environment["AWS_CONFIG_FILE"] ?? "\(home)/.aws/config"
        let credentialsSections = IniFile.read(credentialsFile)
        let configSections = IniFile.read(configFile)
        if profile == nil {
            let key = environment["AWS_ACCESS_KEY_ID"].flatMap { $0.isEmpty ? nil : $0 }
            let secret = environment["AWS_SECRET_ACCESS_KEY"].flatMap { $0.isEmpty ? nil : $0 }
            if key != nil || secret != nil {
                guard let key, let secret else {
                    throw FileProviderError(
                        .invalidArgument,
                        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together (one of them is empty or missing)")
                }
                let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
                return (S3Credentials(accessKey: key, secretKey: secret, sessionToken: token, source: "the environment"), nil)
            }
        }
        let name = profile ?? environment["AWS_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
        let fromCredentials = credentialsSections[name] ?? [:]
        // In the config file every profile but the default is `[profile NAME]`.
        let fromConfig = configSections[name == "default" ? "default" : "profile \(name)"] ?? configSections[name] ?? [:]
        if profile != nil && credentialsSections[name] == nil && fromConfig.isEmpty {
            throw FileProviderError(
                .invalidArgument,
                "--profile \(name): no such profile in \(credentialsFile) or \(configFile) (aws configure --profile \(name) writes one)")
        }
        let region = fromConfig["region"].flatMap { $0.isEmpty ? nil : $0 }
        let key = fromCredentials["aws_access_key_id"] ?? fromConfig["aws_access_key_id"]
        let secret = fromCredentials["aws_secret_access_key"] ?? fromConfig["aws_secret_access_key"]
        let token = fromCredentials["aws_session_token"] ?? fromConfig["aws_session_token"]
        if key == nil && secret == nil { return (nil, region) }
        guard let key, !key.isEmpty, let secret, !secret.isEmpty else {
            throw FileProviderError(
                .invalidArgument, "profile \(name): aws_access_key_id and aws_secret_access_key must both be given (in \(credentialsFile))")
        }
        let file = fromCredentials["aws_access_key_id"] != nil ? credentialsFile : configFile
        return (
            S3Credentials(
                accessKey: key, secretKey: secret, sessionToken: token.flatMap { $0.isEmpty ? nil : $0 },
                source: "profile \(name) of \(file)"),
            region
        )
    }
}

/// The INI files of the AWS CLI: `[section]` lines, `name = value` lines, `#` and `;`
/// comments. Indented lines (a nested `s3 =` block's settings) are skipped.
enum IniFile {
    /// The sections of a file, each a dictionary of its settings; empty when the file cannot
    /// be read (at most 1 MiB is read).
    static func read(_ path: String) -> [String: [String: String]] {
        guard let handle = FileHandle(forReadingAtPath: path) else { return [:] }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: 1 << 20) else { return [:] }
        return parse(String(decoding: data, as: UTF8.self))
    }

    static func parse(_ text: String) -> [String: [String: String]] {
        var sections: [String: [String: String]] = [:]
        var current: String?
        for raw in text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            if raw.first == " " || raw.first == "\t" { continue }
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                let name = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                current = name
                if sections[name] == nil { sections[name] = [:] }
                continue
            }
            guard let current, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            sections[current, default: [:]][key] = value
        }
        return sections
    }
}
