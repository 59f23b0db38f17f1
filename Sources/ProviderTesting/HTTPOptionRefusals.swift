import Foundation
import ProviderCore

/// Checks that a backend on the adapter kit's HTTP client refuses the kit's HTTP options out of
/// range (`connections`, `timeout`, `retries`) in its factory, before it connects, with the
/// kit's message naming the option and what it allows.
public enum HTTPOptionRefusals {
    /// Values out of range and the message each is refused with.
    public static let cases: [(name: String, value: String, message: String)] = [
        ("connections", "0", "--connections must be 1 to 64, not 0"),
        ("timeout", "-1", "--timeout must be more than 0 and at most 86400 seconds, not -1"),
        ("retries", "99", "--retries must be 0 to 10, not 99"),
    ]

    /// What went wrong when `descriptor`'s factory was given each case with `url` (where no
    /// server should answer); empty when every case was refused as it should be.
    public static func problems(of descriptor: BackendDescriptor, url: String) async -> [String] {
        var problems: [String] = []
        for (name, value, message) in cases {
            do {
                let backend = try await descriptor.factory(BackendConfiguration(["url": url, name: value]))
                await backend.close()
                problems.append("--\(name) \(value) was taken")
            } catch let error as FileProviderError {
                if error.code != .invalidArgument || error.message != message {
                    problems.append("--\(name) \(value): \(error.code) '\(error.message)', not '\(message)'")
                }
            } catch {
                problems.append("--\(name) \(value): \(error)")
            }
        }
        return problems
    }
}
