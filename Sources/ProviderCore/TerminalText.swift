/// Text for people, made safe to write to a terminal: a name from a store may hold an escape
/// sequence that recolours or rewrites the screen, a line break that forges a line of output, or
/// a bidirectional control that shows it reversed.
///
/// Every human-readable output prints a name through ``quoted(_:)`` (or ``quoted(bytes:)``
/// for bytes from the file system); messages that may hold names go through ``escaped(_:)`` as
/// they are written. JSON output carries names exactly, never through these.
public enum TerminalText {
    /// A name as GNU `ls --quoting-style=shell-escape` shows it when it holds a character that
    /// must not reach a terminal (see ``isUnsafe(_:)``): in single quotes, those characters as
    /// `$'…'` escapes, so the result pasted into a shell is the name again:
    /// `esc\u{1B}[31mRED.txt` is `'esc'$'\033''[31mRED.txt'`. A name without such characters is
    /// returned as it is (spaces and quotes included), as `ls` prints to a pipe.
    public static func quoted(_ name: String) -> String {
        // Printable ASCII (most names) needs no look at Unicode properties.
        if name.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return name }
        guard name.unicodeScalars.contains(where: isUnsafe) else { return name }
        return quoted(bytes: Array(name.utf8))
    }

    /// ``quoted(_:)`` for a name as bytes, which may not be valid UTF-8 (a file name on disk):
    /// a byte that is not part of a valid UTF-8 sequence is escaped like a control character
    /// (`'bad'$'\377''name'`).
    public static func quoted<Bytes: Collection<UInt8>>(bytes: Bytes) -> String {
        let units = decode(Array(bytes))
        guard units.contains(where: \.isUnsafe) else { return String(decoding: bytes, as: UTF8.self) }
        var result = "'"
        var index = 0
        var endsUnsafe = false
        while index < units.count {
            if units[index].isUnsafe {
                result += "'$'"
                while index < units.count, units[index].isUnsafe {
                    for byte in units[index].bytes { result += escape(byte) }
                    index += 1
                }
                result += "''"
                endsUnsafe = true
            } else {
                let unit = units[index]
                result += unit.bytes == [UInt8(ascii: "'")] ? #"'\''"# : String(decoding: unit.bytes, as: UTF8.self)
                index += 1
                endsUnsafe = false
            }
        }
        result += "'"
        // 'x'$'\177''' ends in an empty quoted string; GNU ls leaves it out.
        if endsUnsafe { result.removeLast(2) }
        return result
    }

    /// Free text (a message that may hold a name) with every character that must not reach a
    /// terminal written as GNU `ls --quoting-style=escape` writes it (`\033`, `\r`, `\302\233`),
    /// except line breaks and tabs, which are the text's own layout.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { isUnsafe($0) && $0 != "\n" && $0 != "\t" }) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if isUnsafe(scalar) && scalar != "\n" && scalar != "\t" {
                for byte in String(scalar).utf8 { result += escape(byte) }
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Whether a character must not reach a terminal as it is: control characters (C0, DEL,
    /// C1: escape sequences, line breaks, carriage returns), line and paragraph separators, and
    /// bidirectional controls (which make a name read in another order than it is).
    public static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.value < 0x80 { return scalar.value < 0x20 || scalar.value == 0x7F }
        let properties = scalar.properties
        switch properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: return true
        default: return properties.isBidiControl
        }
    }

    /// A byte inside `$'…'`: the C escape of a common control character, else three octal digits.
    private static func escape(_ byte: UInt8) -> String {
        switch byte {
        case 0x07: return #"\a"#
        case 0x08: return #"\b"#
        case 0x09: return #"\t"#
        case 0x0A: return #"\n"#
        case 0x0B: return #"\v"#
        case 0x0C: return #"\f"#
        case 0x0D: return #"\r"#
        default:
            let digits = String(byte, radix: 8)
            return "\\" + String(repeating: "0", count: 3 - digits.count) + digits
        }
    }

    /// One character of a name, or one byte that is not part of valid UTF-8.
    private struct Unit {
        var bytes: [UInt8]
        var isUnsafe: Bool
    }

    private static func decode(_ bytes: [UInt8]) -> [Unit] {
        var units: [Unit] = []
        var index = 0
        while index < bytes.count {
            var iterator = bytes[index...].makeIterator()
            var parser = Unicode.UTF8.ForwardParser()
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                let scalar = Unicode.UTF8.decode(encoded)
                units.append(Unit(bytes: Array(bytes[index..<index + encoded.count]), isUnsafe: isUnsafe(scalar)))
                index += encoded.count
            case .error(let length):
                for byte in bytes[index..<index + length] { units.append(Unit(bytes: [byte], isUnsafe: true)) }
                index += length
            case .emptyInput:
                index = bytes.count
            }
        }
        return units
    }
}
