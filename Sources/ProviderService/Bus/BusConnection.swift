import CDBus
import Foundation
import ProviderCore
import ProviderEngine

/// A connection to the D-Bus session bus that owns a well-known name and serves one object,
/// through the CDBus shim (sd-bus from libsystemd, loaded with dlopen on first use). The bus
/// runs on a thread of its own, never on Swift's cooperative pool: method calls reach
/// ``open(name:path:interface:introspection:handler:ended:)``'s handler on that thread, which
/// keeps them and answers later from any thread (``reply(_:_:)``, ``fail(_:name:message:)``).
final class BusConnection: @unchecked Sendable {
    /// A method call of the served interface, kept until it is answered (exactly once).
    struct Call: @unchecked Sendable {
        /// The shim's reference to the message (valid until answered).
        let token: UnsafeMutableRawPointer
        let member: String
        /// The call's string argument; `nil` when it carries neither one string nor a string
        /// and a boolean.
        let argument: String?
        /// The call's boolean after its string; `nil` when it carries only the string (or none).
        let flag: Bool?
    }

    /// What the C callback reaches through its context pointer.
    private final class Dispatch: @unchecked Sendable {
        let handler: @Sendable (BusConnection, Call) -> Bool
        /// Set on the bus thread before the bus runs; read only there.
        weak var connection: BusConnection?
        init(_ handler: @escaping @Sendable (BusConnection, Call) -> Bool) { self.handler = handler }
    }

    private let handle: OpaquePointer
    private let dispatch: Unmanaged<Dispatch>
    private let finished = Latch()

    private init(handle: OpaquePointer, dispatch: Unmanaged<Dispatch>) {
        self.handle = handle
        self.dispatch = dispatch
    }

    deinit {
        fp_dbus_free(handle)
        dispatch.release()
    }

    /// Whether a session bus can be looked for: `DBUS_SESSION_BUS_ADDRESS` is set, or
    /// `$XDG_RUNTIME_DIR/bus` exists (where sd-bus and GDBus look without it).
    static func sessionBusConfigured(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return true }
        guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else { return false }
        return FileManager.default.fileExists(atPath: runtime + "/bus")
    }

    /// Connects to the session bus on a new thread, claims `name` and serves `interface` at
    /// `path` (introspected as `introspection`), then runs the bus on that thread until
    /// ``stop()``. `handler` gets each method call of the interface on the bus thread and must
    /// not block: it returns `false` for a member it does not have (answered `UnknownMethod`),
    /// else answers the call later. `ended` is called on the bus thread when the bus stops, with
    /// why when it was not ``stop()``.
    ///
    /// - Throws: `notSupported` when libsystemd cannot be loaded; `serverUnreachable` when the
    ///   session bus cannot be reached or the name is owned by another connection.
    static func open(
        name: String, path: String, interface: String, introspection: String,
        handler: @escaping @Sendable (BusConnection, Call) -> Bool, ended: @escaping @Sendable (String?) -> Void
    ) async throws(FileProviderError) -> BusConnection {
        if let failure = fp_dbus_load_error() {
            throw FileProviderError(
                .notSupported, "cannot load libsystemd (\(String(cString: failure))); install it (Debian/Ubuntu: apt install libsystemd0)")
        }
        let dispatch = Unmanaged.passRetained(Dispatch(handler))
        let opened = await withCheckedContinuation { (continuation: CheckedContinuation<Result<BusConnection, FileProviderError>, Never>) in
            let thread = Thread {
                ThreadName.setCurrent("fileprovider-dbus")
                var error: UnsafeMutablePointer<CChar>?
                let handle = fp_dbus_open(name, path, interface, introspection, Self.callback, dispatch.toOpaque(), &error)
                guard let handle else {
                    let message = error.map { String(cString: $0) } ?? "cannot connect to the session bus"
                    free(error)
                    dispatch.release()
                    continuation.resume(returning: .failure(FileProviderError(.serverUnreachable, message)))
                    return
                }
                let connection = BusConnection(handle: handle, dispatch: dispatch)
                dispatch.takeUnretainedValue().connection = connection
                continuation.resume(returning: .success(connection))
                // This thread holds the connection while the bus runs.
                let result = fp_dbus_run(handle)
                ended(result < 0 ? "the session bus connection failed: \(String(cString: strerror(-result)))" : nil)
                connection.finished.open()
            }
            thread.name = "fileprovider-dbus"
            thread.start()
        }
        return try opened.get()
    }

    private static let callback: fp_dbus_handler = { context, call, member, argument, flag in
        guard let context, let call, let member else { return 0 }
        let dispatch = Unmanaged<Dispatch>.fromOpaque(context).takeUnretainedValue()
        guard let connection = dispatch.connection else { return 0 }
        let kept = Call(
            token: call, member: String(cString: member), argument: argument.map { String(cString: $0) }, flag: flag < 0 ? nil : flag != 0)
        return dispatch.handler(connection, kept) ? 1 : 0
    }

    /// Answers `call` with one string. Any thread.
    func reply(_ call: Call, _ value: String) {
        fp_dbus_reply(handle, call.token, value)
    }

    /// Answers `call` with the D-Bus error `name` (`org.example.Error.Name`) and `message`. Any
    /// thread.
    func fail(_ call: Call, name: String, message: String) {
        fp_dbus_reply_error(handle, call.token, name, message)
    }

    /// Emits the signal `member` with two strings from the served object. Any thread.
    func emit(_ member: String, _ first: String, _ second: String) {
        fp_dbus_emit(handle, member, first, second)
    }

    /// Stops the bus and returns once its thread has let go of it (calls not answered yet are
    /// dropped: their callers get an error from the bus).
    func stop() async {
        fp_dbus_stop(handle)
        await finished.wait()
    }
}
