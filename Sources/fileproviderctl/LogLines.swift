import Logging

/// The text of one log event as the CLI's handlers write it: the message with the merged
/// metadata (`key=value`, sorted) after it, every line of it behind `prefix`.
enum LogLines {
    /// The event's lines, each ending in a newline. Metadata merges in this order, later
    /// winning: the handler's, the provider's, the event's own.
    static func text(
        of event: LogEvent, metadata: Logger.Metadata, provider: Logger.MetadataProvider?, prefix: String
    ) -> String {
        var merged = metadata
        if let provided = provider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        let suffix =
            merged.isEmpty ? "" : " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        var text = ""
        for line in "\(event.message)\(suffix)".split(separator: "\n", omittingEmptySubsequences: false) {
            text += prefix + line + "\n"
        }
        return text
    }
}
