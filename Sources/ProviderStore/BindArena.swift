import Foundation

/// One buffer that holds copies of the text and blob values of a statement's rows while the
/// statement runs, so they are bound with `SQLITE_STATIC` instead of `SQLITE_TRANSIENT`: a
/// transient bind makes SQLite allocate and free a buffer per value, eight per item row, which
/// was most of the binding cost of a first sync.
///
/// Bound pointers stay valid until the next ``reset(reserving:)``; the statement's bindings must
/// be cleared (or all bound again) before that.
final class BindArena {
    private var base: UnsafeMutableRawPointer?
    private var capacity = 0
    private var used = 0

    deinit { base?.deallocate() }

    /// Empties the arena and makes room for `bytes` bytes. Pointers handed out before are
    /// invalid afterwards.
    func reset(reserving bytes: Int) {
        used = 0
        if bytes <= capacity { return }
        base?.deallocate()
        capacity = max(bytes, capacity * 2, 4096)
        base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
    }

    /// Copies `bytes` into the arena and returns where; `nil` for no bytes. Needs the room
    /// reserved by ``reset(reserving:)``.
    func copy(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawPointer? {
        guard let source = bytes.baseAddress, !bytes.isEmpty, let base else { return nil }
        precondition(used + bytes.count <= capacity, "BindArena: more bytes than reserved")
        let target = base + used
        target.copyMemory(from: source, byteCount: bytes.count)
        used += bytes.count
        return UnsafeRawPointer(target)
    }
}
