import Foundation
import ProviderCore

/// The connection options every adapter on ``HTTPClient`` takes: `ca-file`, `connect-timeout`,
/// `timeout`, `connections` and `retries`, defined once.
///
/// An adapter lists ``backendOptions`` among its descriptor's options, reads the values with
/// ``init(configuration:)`` in its factory, and makes its client's settings with
/// ``clientSettings(baseURL:)``. Every number is range-checked before it reaches libcurl or
/// a computation that could overflow.
public struct HTTPOptions: Sendable, Equatable {
    /// A CA bundle to verify HTTPS certificates with, or `nil` for the system's.
    public var caFile: String?
    /// Seconds to wait for a connection.
    public var connectTimeout: Double
    /// Seconds without any byte moving before a transfer is abandoned (and retried).
    public var timeout: Double
    /// How many connections (each on its own thread) run at once.
    public var connections: Int
    /// How many times a connection error, `429` or `5xx` is retried.
    public var retries: Int

    /// The allowed numbers of connections.
    public static let connectionsRange = 1...64
    /// The allowed numbers of retries.
    public static let retriesRange = 0...10
    /// The longest timeout, in seconds (a day): longer ones mean "never" in practice, and
    /// libcurl takes the connect timeout in milliseconds.
    public static let maximumTimeout: Double = 86_400

    public static let defaultConnectTimeout = 10
    public static let defaultTimeout = 30
    public static let defaultConnections = 4
    public static let defaultRetries = 4

    /// The options, for a descriptor's `options` (the CLI's flags and help, the docs).
    public static let backendOptions: [BackendOption] = [
        BackendOption(name: "ca-file", help: "a CA bundle to verify the server's HTTPS certificate with", type: .path),
        BackendOption(
            name: "connect-timeout", help: "seconds to wait for a connection", type: .integer,
            defaultValue: "\(defaultConnectTimeout)"),
        BackendOption(
            name: "timeout", help: "seconds without any byte moving before a transfer is retried", type: .integer,
            defaultValue: "\(defaultTimeout)"),
        BackendOption(
            name: "connections", help: "how many connections (each on its own thread) run at once", type: .integer,
            defaultValue: "\(defaultConnections)"),
        BackendOption(
            name: "retries", help: "how many times a connection error, 429 or 5xx is retried", type: .integer,
            defaultValue: "\(defaultRetries)"),
    ]

    /// Options with the given values; nothing is checked until ``check()``.
    public init(
        caFile: String? = nil, connectTimeout: Double = Double(defaultConnectTimeout), timeout: Double = Double(defaultTimeout),
        connections: Int = defaultConnections, retries: Int = defaultRetries
    ) {
        self.caFile = caFile
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.connections = connections
        self.retries = retries
    }

    /// Reads and checks the options from a domain's configuration; an option that is not set
    /// takes its default.
    ///
    /// - Throws: `invalidArgument` naming the option and what it allows, for a value that is
    ///   not a whole number or out of range, or a CA file that cannot be read.
    public init(configuration: BackendConfiguration) throws(FileProviderError) {
        let caFile = configuration["ca-file"].flatMap { $0.isEmpty ? nil : $0 }
        let connectTimeout = try configuration.integer("connect-timeout") ?? Self.defaultConnectTimeout
        let timeout = try configuration.integer("timeout") ?? Self.defaultTimeout
        self.init(
            caFile: caFile, connectTimeout: Double(connectTimeout), timeout: Double(timeout),
            connections: try configuration.integer("connections") ?? Self.defaultConnections,
            retries: try configuration.integer("retries") ?? Self.defaultRetries)
        try check()
    }

    /// Checks every value is in range and the CA file can be read.
    ///
    /// - Throws: `invalidArgument` naming the first option out of range and what it allows, or
    ///   a CA file that cannot be read.
    public func check() throws(FileProviderError) {
        try Self.checkTimeout(connectTimeout, name: "connect-timeout")
        try Self.checkTimeout(timeout, name: "timeout")
        guard Self.connectionsRange.contains(connections) else {
            throw FileProviderError(
                .invalidArgument,
                "--connections must be \(Self.connectionsRange.lowerBound) to \(Self.connectionsRange.upperBound), not \(connections)")
        }
        guard Self.retriesRange.contains(retries) else {
            throw FileProviderError(
                .invalidArgument, "--retries must be \(Self.retriesRange.lowerBound) to \(Self.retriesRange.upperBound), not \(retries)")
        }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw FileProviderError(.invalidArgument, "--ca-file: the file \(caFile) cannot be read")
        }
    }

    /// The client settings for these options (the adapter adds credentials, hints and names).
    public func clientSettings(baseURL: String) -> ClientSettings {
        ClientSettings(
            baseURL: baseURL, caFile: caFile, connectTimeout: connectTimeout, stallTimeout: timeout, connections: connections,
            retries: retries)
    }

    private static func checkTimeout(_ seconds: Double, name: String) throws(FileProviderError) {
        // Written so that NaN fails too.
        guard seconds > 0, seconds <= maximumTimeout else {
            let shown = seconds.isFinite && seconds == seconds.rounded() && abs(seconds) < 1e15 ? "\(Int(seconds))" : "\(seconds)"
            throw FileProviderError(
                .invalidArgument, "--\(name) must be more than 0 and at most \(Int(maximumTimeout)) seconds, not \(shown)")
        }
    }
}
