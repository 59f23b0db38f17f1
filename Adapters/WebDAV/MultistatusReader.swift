import CXML2
import Foundation

/// Feeds a multistatus body to libxml2's push parser in chunks and hands its SAX2 callbacks
/// (element starts and ends with their local names and namespaces, text) to a
/// ``MultistatusParser`` as bytes. FoundationXML's `XMLParser`, which wraps the same parser,
/// made a `String` of every name, namespace and text and a dictionary of attributes: about a
/// third of a WebDAV first sync's CPU (Docs/Performance.md, WebDAV).
///
/// The network is never used (`XML_PARSE_NONET`), and entities are not substituted: a body
/// that uses an entity of its own (declared in a DTD; no server sends one) is not well-formed
/// here. libxml2's own limits on depth and sizes apply. Errors are kept, never printed.
enum MultistatusReader {
    /// How many bytes are read and parsed at a time.
    static let chunkSize = 128 << 10

    /// What the callbacks reach through libxml2's user data.
    private final class Session {
        let parser: MultistatusParser
        var error: String?
        init(_ parser: MultistatusParser) { self.parser = parser }
    }

    /// Parses the body `next` gives (it fills the buffer and returns the bytes it put there, 0
    /// at the end) into `parser`, until the end or until the parser has seen enough.
    /// `bufferSize`: at most ``chunkSize``; a body known to be smaller (a reply in memory) asks
    /// for less, so that its buffer is not mapped and unmapped (glibc maps 128 KiB and more: per
    /// `PROPFIND` of one item, a `munmap` whose TLB shootdown interrupted the other core too).
    /// - Throws: what `next` throws; `MultistatusError` when the body is not well-formed XML.
    static func read(
        into parser: MultistatusParser, bufferSize: Int = chunkSize, _ next: (UnsafeMutableRawBufferPointer) throws -> Int
    ) throws {
        let session = Session(parser)
        var handler = xmlSAXHandler()
        handler.initialized = fp_xml_sax2_magic
        handler.startElementNs = { context, name, _, namespace, _, _, _, _, _ in
            guard let context, let name else { return }
            Unmanaged<Session>.fromOpaque(context).takeUnretainedValue().parser.start(name, namespace: namespace)
        }
        handler.endElementNs = { context, name, _, namespace in
            guard let context, let name else { return }
            Unmanaged<Session>.fromOpaque(context).takeUnretainedValue().parser.end(name, namespace: namespace)
        }
        let characters: charactersSAXFunc = { context, bytes, count in
            guard let context, let bytes, count > 0 else { return }
            Unmanaged<Session>.fromOpaque(context).takeUnretainedValue().parser.characters(
                UnsafeBufferPointer(start: bytes, count: Int(count)))
        }
        handler.characters = characters
        handler.cdataBlock = characters
        // Structured errors: kept for the message, never printed on stderr.
        handler.serror = { context, error in
            guard let context, let error else { return }
            let session = Unmanaged<Session>.fromOpaque(context).takeUnretainedValue()
            if session.error == nil, error.pointee.level.rawValue >= XML_ERR_ERROR.rawValue {
                let message = error.pointee.message.map { String(cString: $0) } ?? "error \(error.pointee.code)"
                session.error = "line \(error.pointee.line): \(message.trimmingCharacters(in: .newlines))"
            }
        }
        let context = Unmanaged.passUnretained(session).toOpaque()
        guard let parserContext = xmlCreatePushParserCtxt(&handler, context, nil, 0, nil) else {
            throw MultistatusError(message: "the XML parser could not start")
        }
        defer { xmlFreeParserCtxt(parserContext) }
        _ = xmlCtxtUseOptions(parserContext, Int32(XML_PARSE_NONET.rawValue))
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, min(bufferSize, chunkSize)), alignment: 16)
        defer { buffer.deallocate() }
        var ended = false
        while !ended && !parser.isDone && session.error == nil {
            let count = try next(buffer)
            ended = count == 0
            let status = xmlParseChunk(
                parserContext, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(count), ended ? 1 : 0)
            if status != 0 && session.error == nil { session.error = "error \(status)" }
        }
        withExtendedLifetime(session) {}
        if parser.isDone { return }
        if let error = session.error ?? (parserContext.pointee.wellFormed == 0 ? "not well-formed" : nil) {
            throw MultistatusError(message: "the reply is not well-formed XML (\(error.prefix(200)))")
        }
    }
}
