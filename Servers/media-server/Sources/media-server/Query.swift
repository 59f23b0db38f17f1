import Foundation

/// Decodes `application/x-www-form-urlencoded` text (a query string or a form body): `+` is a
/// space, `%XX` a byte; the bytes of every key and value must be UTF-8.
enum FormDecoding {
    struct Malformed: Error {
        var reason: String
    }

    static func decode(_ text: Substring?) throws(Malformed) -> [String: String] {
        guard let text, !text.isEmpty else { return [:] }
        var result: [String: String] = [:]
        for pair in text.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            let key = try component(parts[0])
            let value = parts.count > 1 ? try component(parts[1]) : ""
            if result[key] == nil { result[key] = value }
        }
        return result
    }

    private static func component(_ bytes: Substring.UTF8View.SubSequence) throws(Malformed) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%") {
                let first = bytes.index(after: index)
                guard first < bytes.endIndex, bytes.index(after: first) < bytes.endIndex,
                    let high = hex(bytes[first]), let low = hex(bytes[bytes.index(after: first)])
                else { throw Malformed(reason: "a bad percent escape") }
                out.append(high << 4 | low)
                index = bytes.index(after: first)
            } else {
                out.append(byte)
            }
            index = bytes.index(after: index)
        }
        guard let string = String(validating: out, as: UTF8.self) else {
            throw Malformed(reason: "a value that is not UTF-8")
        }
        return string
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// The value of the field `name` in a `multipart/form-data` body, or `nil`.
    static func multipartField(_ name: String, body: [UInt8], contentType: String) -> String? {
        guard let range = contentType.range(of: "boundary=") else { return nil }
        var boundary = String(contentType[range.upperBound...])
        if let semicolon = boundary.firstIndex(of: ";") { boundary = String(boundary[..<semicolon]) }
        boundary = boundary.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        let delimiter = Array(("--" + boundary).utf8)
        let marker = Array("name=\"\(name)\"".utf8)
        var parts: [ArraySlice<UInt8>] = []
        var start = 0
        var index = 0
        while index + delimiter.count <= body.count {
            if body[index..<index + delimiter.count].elementsEqual(delimiter) {
                parts.append(body[start..<index])
                index += delimiter.count
                start = index
            } else {
                index += 1
            }
        }
        let separator = Array("\r\n\r\n".utf8)
        for part in parts where part.firstRange(of: marker) != nil {
            guard let headerEnd = part.firstRange(of: separator) else { continue }
            var value = part[headerEnd.upperBound...]
            if value.last == UInt8(ascii: "\n") { value = value.dropLast() }
            if value.last == UInt8(ascii: "\r") { value = value.dropLast() }
            return String(validating: value, as: UTF8.self)
        }
        return nil
    }
}
