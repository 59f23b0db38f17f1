import Foundation
import GRDB
import GRDBSQLite

#if canImport(Glibc)
    import Glibc
#endif

/// The SQL functions `find` filters with, in C on the text SQLite holds (no Swift string per
/// row): `fpk_fnmatch(pattern, text, flags)` is `fnmatch(3)`, `fpk_regexp(pattern, text,
/// ignoresCase)` is `regexec(3)` of an extended expression over the whole text, compiled once
/// per statement (SQLite's auxiliary data). Both match in UTF-8 whatever the process's locale
/// (a `?` is one character, `[é]` one letter), as GNU `find` does in a UTF-8 locale.
enum SearchFunctions {
    /// `FNM_CASEFOLD`, a GNU extension the Glibc module does not always export.
    static let caseFold: Int32 = 1 << 4

    /// A UTF-8 character type locale for the matching threads (`uselocale` per call).
    nonisolated(unsafe) static let utf8Locale: locale_t? = newlocale(LC_CTYPE_MASK, "C.UTF-8", nil)

    /// Registers the functions on a connection.
    static func install(on db: Database) {
        guard let connection = db.sqliteConnection else { return }
        let flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC
        sqlite3_create_function_v2(connection, "fpk_fnmatch", 3, flags, nil, fnmatchFunction, nil, nil, nil)
        sqlite3_create_function_v2(connection, "fpk_regexp", 3, flags, nil, regexpFunction, nil, nil, nil)
    }

    /// Runs `body` with the UTF-8 locale as the thread's.
    @inline(__always)
    static func inUTF8<T>(_ body: () -> T) -> T {
        guard let utf8Locale else { return body() }
        let previous = uselocale(utf8Locale)
        defer { uselocale(previous) }
        return body()
    }

    /// Whether `text` matches a case-sensitive glob made only of literal characters and `*`
    /// (`*.pdf`, `IMG_*`, `*2024*`), compared byte by byte; `nil` when the glob has a `?`, `[`
    /// or `\`, which `fnmatch` must match. The same answer as `fnmatch(pattern, text, 0)`: in
    /// UTF-8 a literal's bytes match only at a character boundary, and a `*` (without
    /// `FNM_PATHNAME` or `FNM_PERIOD`) matches any characters, `/` and a leading `.` included.
    /// About five times faster than `fnmatch` in a UTF-8 locale, which converts the pattern and
    /// each text to wide characters (`find -name '*.pdf'` over a million rows).
    static func starGlobMatch(_ pattern: UnsafeRawBufferPointer, _ text: UnsafeRawBufferPointer) -> Bool? {
        let star = UInt8(ascii: "*")
        for byte in pattern where byte == UInt8(ascii: "?") || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "\\") {
            return nil
        }
        // The pieces between stars: the first must start the text and the last end it (empty
        // when the glob starts or ends with a star); the others come in order, each taken at
        // its first place. No allocation: this runs once per row.
        guard let firstStar = pattern.firstIndex(of: star) else {
            return pattern.count == text.count && zip(pattern, text).allSatisfy { $0 == $1 }
        }
        let lastStar = pattern.lastIndex(of: star) ?? firstStar
        let head = firstStar
        let tail = pattern.count - lastStar - 1
        guard head + tail <= text.count else { return false }
        for index in 0..<head where pattern[index] != text[index] { return false }
        for index in 0..<tail where pattern[lastStar + 1 + index] != text[text.count - tail + index] { return false }
        var offset = head
        let end = text.count - tail
        var start = firstStar + 1
        while start < lastStar {
            var stop = start
            while pattern[stop] != star { stop += 1 }
            let count = stop - start
            if count > 0 {
                var found = false
                while offset + count <= end {
                    var same = true
                    for index in 0..<count where pattern[start + index] != text[offset + index] {
                        same = false
                        break
                    }
                    if same {
                        found = true
                        break
                    }
                    offset += 1
                }
                if !found { return false }
                offset += count
            }
            start = stop + 1
        }
        return true
    }

    /// The message of a regular expression that does not compile, `nil` for a good one.
    static func regexProblem(_ pattern: String, ignoresCase: Bool) -> String? {
        inUTF8 {
            var regex = regex_t()
            let code = regcomp(&regex, "^(" + pattern + ")$", REG_EXTENDED | REG_NOSUB | (ignoresCase ? REG_ICASE : 0))
            if code == 0 {
                regfree(&regex)
                return nil
            }
            var buffer = [CChar](repeating: 0, count: 256)
            regerror(code, &regex, &buffer, buffer.count)
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }
}

private let fnmatchFunction: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = {
    context, _, arguments in
    guard let arguments, let pattern = sqlite3_value_text(arguments[0]), let text = sqlite3_value_text(arguments[1]) else {
        sqlite3_result_int(context, 0)
        return
    }
    let flags = sqlite3_value_int(arguments[2])
    if flags == 0,
        let matched = SearchFunctions.starGlobMatch(
            UnsafeRawBufferPointer(start: pattern, count: Int(sqlite3_value_bytes(arguments[0]))),
            UnsafeRawBufferPointer(start: text, count: Int(sqlite3_value_bytes(arguments[1]))))
    {
        sqlite3_result_int(context, matched ? 1 : 0)
        return
    }
    let matched = SearchFunctions.inUTF8 {
        fnmatch(
            UnsafeRawPointer(pattern).assumingMemoryBound(to: CChar.self), UnsafeRawPointer(text).assumingMemoryBound(to: CChar.self),
            flags) == 0
    }
    sqlite3_result_int(context, matched ? 1 : 0)
}

private let regexpFunction: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = {
    context, _, arguments in
    guard let arguments, let pattern = sqlite3_value_text(arguments[0]), let text = sqlite3_value_text(arguments[1]) else {
        sqlite3_result_int(context, 0)
        return
    }
    var regex = sqlite3_get_auxdata(context, 0)?.assumingMemoryBound(to: regex_t.self)
    if regex == nil {
        let compiled = UnsafeMutablePointer<regex_t>.allocate(capacity: 1)
        let source = "^(" + String(cString: pattern) + ")$"
        let flags = REG_EXTENDED | REG_NOSUB | (sqlite3_value_int(arguments[2]) != 0 ? REG_ICASE : 0)
        guard SearchFunctions.inUTF8({ regcomp(compiled, source, flags) }) == 0 else {
            compiled.deallocate()
            sqlite3_result_error(context, "invalid regular expression", -1)
            return
        }
        sqlite3_set_auxdata(context, 0, compiled) { pointer in
            guard let pointer else { return }
            let regex = pointer.assumingMemoryBound(to: regex_t.self)
            regfree(regex)
            regex.deallocate()
        }
        // SQLite may free the data at once (when it cannot keep it); ask for it again.
        regex = sqlite3_get_auxdata(context, 0)?.assumingMemoryBound(to: regex_t.self)
        guard regex != nil else {
            sqlite3_result_error(context, "cannot keep the compiled regular expression", -1)
            return
        }
    }
    let matched = SearchFunctions.inUTF8 {
        regexec(regex, UnsafeRawPointer(text).assumingMemoryBound(to: CChar.self), 0, nil, 0) == 0
    }
    sqlite3_result_int(context, matched ? 1 : 0)
}
