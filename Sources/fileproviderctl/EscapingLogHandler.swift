import Logging
import ProviderCore

/// Passes log messages on with the characters that must not reach a terminal escaped
/// (``TerminalText/escaped(_:)``): a name from a store in a log line cannot recolour or rewrite
/// the screen, or forge a line.
struct EscapingLogHandler: LogHandler {
    var wrapped: any LogHandler

    var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { wrapped.metadataProvider }
        set { wrapped.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        event.message = Logger.Message(stringLiteral: TerminalText.escaped(event.message.description))
        wrapped.log(event: event)
    }
}

extension Logger {
    /// This logger with its messages escaped for a terminal (``EscapingLogHandler``).
    func escapingText() -> Logger {
        var logger = self
        logger.handler = EscapingLogHandler(wrapped: handler)
        return logger
    }
}
