/// One item's outcome as `materialize`, `evict` and `pin --json` print it.
struct BusOutcome: Encodable {
    var path: String
    var ok: Bool
    var error: String?
    var code: String?
}
