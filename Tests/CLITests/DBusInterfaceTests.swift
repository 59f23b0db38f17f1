import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// serve's D-Bus interface (Docs/CLI.md, "D-Bus interface"), called with the programs users
/// call it with (`busctl`, `gdbus`) on a session bus of the test's own.
@Suite struct DBusInterfaceTests {
    static let name = "org.fileproviderkit.FileProvider1"
    static let object = "/org/fileproviderkit/FileProvider1"
    static let interface = "org.fileproviderkit.FileProvider1"

    /// A D-Bus error as `gdbus call` reports it.
    struct BusFailure: Equatable {
        var name: String
        var message: String
    }

    /// `busctl --user call` of `method` with `arguments` (a string each) on `bus`; the string
    /// it returns (`--json=short`), or the issue recorded and `nil`.
    static func busctl(_ bus: SessionBus, _ method: String, _ arguments: [String] = [], signature types: String? = nil) async throws
        -> String?
    {
        let signature = arguments.isEmpty ? [] : [types ?? String(repeating: "s", count: arguments.count)]
        let run = try await offThePool {
            try ChildProcess.capture(
                "/usr/bin/busctl", ["--user", "--json=short", "call", name, object, interface, method] + signature + arguments,
                environment: ProcessInfo.processInfo.environment.merging(bus.environment) { _, new in new })
        }
        let output = String(decoding: run.output, as: UTF8.self)
        guard run.ending == .exited(0),
            let reply = try? JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any],
            reply["type"] as? String == "s", let value = (reply["data"] as? [Any])?.first as? String
        else {
            Issue.record("busctl call \(method) \(arguments): \(run.ending) \(output) \(String(decoding: run.errorOutput, as: UTF8.self))")
            return nil
        }
        return value
    }

    /// `busctl` of a method that returns JSON, decoded.
    static func busJSON(_ bus: SessionBus, _ method: String, _ arguments: [String] = [], signature: String? = nil) async throws -> Any? {
        guard let text = try await busctl(bus, method, arguments, signature: signature) else { return nil }
        return try JSONSerialization.jsonObject(with: Data(text.utf8))
    }

    /// `gdbus call` of `method` with one string (`path`; and `false`, not recursive, for the
    /// methods that take the flag), which must fail: the error's name and message, or `nil`
    /// when it did not fail so.
    static func gdbusFailure(_ bus: SessionBus, _ method: String, _ path: String) async throws -> BusFailure? {
        let run = try await offThePool {
            try ChildProcess.capture(
                "/usr/bin/gdbus",
                ["call", "--session", "--dest", name, "--object-path", object, "--method", "\(interface).\(method)", "'\(path)'"]
                    + (["Materialize", "Evict"].contains(method) ? ["false"] : []),
                environment: ProcessInfo.processInfo.environment.merging(bus.environment) { _, new in new })
        }
        let error = String(decoding: run.errorOutput, as: UTF8.self)
        guard run.ending != .exited(0), let start = error.range(of: "GDBus.Error:") else { return nil }
        let rest = error[start.upperBound...]
        guard let colon = rest.range(of: ": ") else { return nil }
        return BusFailure(
            name: String(rest[..<colon.lowerBound]),
            message: String(rest[colon.upperBound...]).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// A served domain's state in `ListDomains`.
    static func state(_ bus: SessionBus, _ domain: String) async throws -> String? {
        let domains = try await busJSON(bus, "ListDomains") as? [[String: Any]]
        return domains?.first { $0["name"] as? String == domain }?["state"] as? String
    }

    @Test func methodsDoWhatTheCLIDoesAndRefusePathsOutsideTheServedDomains() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("alpha".utf8))
        try temp.write("src/b.txt", Data("bravo".utf8))
        try temp.write("src/c.txt", Data("charlie".utf8))
        try temp.write("src/sub/d.txt", Data("delta".utf8))
        try temp.write("src/sub/deeper/e.txt", Data("echo".utf8))
        try temp.write("other/x.txt", Data("x-ray".utf8))
        try await cli.addLocalDomain(
            "d", root: temp.url.appendingPathComponent("src"), options: ["--mode", "placeholder-files"], sync: true)
        try await cli.addLocalDomain(
            "other", root: temp.url.appendingPathComponent("other"), options: ["--mode", "placeholder-files"], sync: true)
        let replica = cli.home.appendingPathComponent("domains/d")
        let otherReplica = cli.home.appendingPathComponent("domains/other")
        let bus = try await offThePool { try SessionBus() }
        defer { bus.stop() }

        let serve = try ServeProcess(
            cli, ["d", "--poll-interval", "3600"], log: temp.url.appendingPathComponent("serve.log"), environment: bus.environment)
        #expect(await waitUntil { serve.output.contains("serving d") }, "\(serve.output)")
        #expect(serve.output.contains("D-Bus interface \(Self.interface) at \(Self.object) on the session bus as \(Self.name)"))

        // The served domains only, with their mode; in sync once the first sync is done.
        #expect(await waitUntil { (try? await Self.state(bus, "d")) == "in-sync" }, "\(serve.output)")
        let domains = try #require(try await Self.busJSON(bus, "ListDomains") as? [[String: Any]])
        #expect(domains.map { $0["name"] as? String } == ["d"])
        #expect(domains.first?["mode"] as? String == "placeholder-files")
        #expect(domains.first?["replica"] as? String == replica.path)

        // Materialize: the file is downloaded, its placeholder gone; the reply is materialize --json's.
        let materialized = try await Self.busctl(bus, "Materialize", [replica.appendingPathComponent("a.txt").path])
        let cliMaterialized = try await cli.run(["materialize", "--json", "d:/c.txt"])
        #expect(cliMaterialized.status == 0, "\(cliMaterialized.stderr)")
        #expect(materialized == #"[{"ok":true,"path":"d:/a.txt"}]"#)
        #expect(cliMaterialized.stdout == #"[{"ok":true,"path":"d:/c.txt"}]"# + "\n")
        #expect(try String(contentsOf: replica.appendingPathComponent("a.txt"), encoding: .utf8) == "alpha")
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("a.txt.placeholder").path))

        // Why: the same JSON as why --json, for the materialized file and for a placeholder
        // (given by its placeholder file's path, as the CLI takes it). Asked again while they
        // differ: a sync between the two (serve saw the downloads) changes the last sync's time.
        for (path, item) in [("a.txt", "d:/a.txt"), ("b.txt.placeholder", "d:/b.txt")] {
            var last = ""
            let same = try await waitUntil {
                let why = try await Self.busctl(bus, "Why", [replica.appendingPathComponent(path).path])
                let cliWhy = try await cli.run(["why", "--json", item])
                last = "\(why ?? "nil")\n\(cliWhy.stdout)"
                return why.map { $0 + "\n" } == cliWhy.stdout
            }
            #expect(same, "\(last)")
        }
        let why = try #require(try await Self.busJSON(bus, "Why", [replica.appendingPathComponent("a.txt").path]) as? [String: Any])
        #expect(why["state"] as? String == "materialized")

        // Evict: the file is a placeholder again.
        let evicted = try await Self.busctl(bus, "Evict", [replica.appendingPathComponent("a.txt").path])
        #expect(evicted == #"[{"ok":true,"path":"d:/a.txt"}]"#)
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("a.txt").path))
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("a.txt.placeholder").path))
        let listed = try #require(try await cli.json(["ls", "d:/"]) as? [[String: Any]])
        #expect(listed.first { $0["path"] as? String == "/a.txt" }?["state"] as? String == "placeholder")

        // Pin: downloaded and pinned, as pin does; a pinned file is not evicted, with the CLI's error.
        let pinned = try await Self.busctl(bus, "Pin", [replica.appendingPathComponent("b.txt.placeholder").path])
        #expect(pinned == #"[{"ok":true,"path":"d:/b.txt"}]"#)
        #expect(try String(contentsOf: replica.appendingPathComponent("b.txt"), encoding: .utf8) == "bravo")
        let pinnedWhy = try #require(try await cli.json(["why", "d:/b.txt"]) as? [String: Any])
        #expect(pinnedWhy["pinned"] as? Bool == true)
        let refused = try await Self.gdbusFailure(bus, "Evict", replica.appendingPathComponent("b.txt").path)
        let cliRefused = try await cli.run(["evict", "d:/b.txt"])
        #expect(cliRefused.status == 1)
        #expect(refused?.name == "\(Self.interface).Error.NonEvictable", "\(String(describing: refused))")
        #expect(refused.map { "error: \($0.message)\n" } == cliRefused.stderr)
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("b.txt").path))

        // Unpin: no longer pinned, and evicted, as unpin does.
        let unpinned = try await Self.busctl(bus, "Unpin", [replica.appendingPathComponent("b.txt").path])
        #expect(unpinned == #"[{"ok":true,"path":"d:/b.txt"}]"#)
        let unpinnedWhy = try #require(try await cli.json(["why", "d:/b.txt"]) as? [String: Any])
        #expect(unpinnedWhy["pinned"] as? Bool == false, "\(unpinnedWhy)")
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("b.txt").path))

        // The recursive flag: a folder's files at every depth, as materialize -R and evict -R.
        let sub = replica.appendingPathComponent("sub").path
        let tree = try await Self.busJSON(bus, "Materialize", [sub, "true"], signature: "sb") as? [[String: Any]]
        #expect(
            Set((tree ?? []).compactMap { $0["path"] as? String }).isSuperset(of: ["d:/sub/d.txt", "d:/sub/deeper/e.txt"]), "\(tree ?? [])")
        #expect(try String(contentsOf: replica.appendingPathComponent("sub/deeper/e.txt"), encoding: .utf8) == "echo")
        _ = try await Self.busctl(bus, "Evict", [sub, "true"], signature: "sb")
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("sub/deeper/e.txt.placeholder").path))
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("sub/d.txt").path))
        // Not recursive: the folder's own files, not those of its subfolders (materialize without -R).
        _ = try await Self.busctl(bus, "Materialize", [sub, "false"], signature: "sb")
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("sub/d.txt").path))
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("sub/deeper/e.txt").path))
        // A flag where the method takes none: D-Bus's InvalidArgs.
        let flagged = try await offThePool {
            try ChildProcess.capture(
                "/usr/bin/busctl", ["--user", "call", Self.name, Self.object, Self.interface, "Pin", "sb", sub, "true"],
                environment: ProcessInfo.processInfo.environment.merging(bus.environment) { _, new in new })
        }
        #expect(flagged.ending != .exited(0))
        #expect(String(decoding: flagged.errorOutput, as: UTF8.self).contains("takes one string"), "\(flagged)")

        // An item that does not exist: the CLI's error.
        let missing = try await Self.gdbusFailure(bus, "Why", replica.appendingPathComponent("missing.txt").path)
        #expect(missing?.name == "\(Self.interface).Error.NoSuchItem", "\(String(describing: missing))")
        #expect(missing?.message.contains("no item at d:/missing.txt") == true)

        // Paths outside the served domains are refused: another domain of the same database,
        // a system file, a relative path, and a way out of the replica with '..'.
        let outside = [
            otherReplica.appendingPathComponent("x.txt.placeholder").path, "/etc/passwd", "a.txt",
            replica.path + "/../other/x.txt.placeholder",
        ]
        for path in outside {
            for method in ["Materialize", "Evict", "Pin", "Why"] {
                let failure = try await Self.gdbusFailure(bus, method, path)
                #expect(failure?.name == "\(Self.interface).Error.OutsideDomains", "\(method) \(path): \(String(describing: failure))")
            }
        }
        #expect(FileManager.default.fileExists(atPath: otherReplica.appendingPathComponent("x.txt.placeholder").path))
        #expect(!FileManager.default.fileExists(atPath: otherReplica.appendingPathComponent("x.txt").path))
        // A call without its path: D-Bus's InvalidArgs.
        let bare = try await offThePool {
            try ChildProcess.capture(
                "/usr/bin/busctl", ["--user", "call", Self.name, Self.object, Self.interface, "Why"],
                environment: ProcessInfo.processInfo.environment.merging(bus.environment) { _, new in new })
        }
        #expect(bare.ending != .exited(0))
        #expect(String(decoding: bare.errorOutput, as: UTF8.self).contains("takes one string"))

        // Introspection names every method and the signal.
        let introspected = try await offThePool {
            try ChildProcess.capture(
                "/usr/bin/gdbus", ["introspect", "--session", "--dest", Self.name, "--object-path", Self.object],
                environment: ProcessInfo.processInfo.environment.merging(bus.environment) { _, new in new })
        }
        let xml = String(decoding: introspected.output, as: UTF8.self)
        for member in ["ListDomains", "Materialize", "Evict", "Pin", "Unpin", "Why", "StateChanged", "in  b recursive"] {
            #expect(xml.contains(member), "\(xml)")
        }

        #expect(await serve.stop(SIGTERM) == 0, "\(serve.output)")
    }

    @Test func stateChangedFollowsADisconnectAndAConnect() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("alpha".utf8))
        try await cli.addLocalDomain(
            "d", root: temp.url.appendingPathComponent("src"), options: ["--mode", "placeholder-files"], sync: true)
        let bus = try await offThePool { try SessionBus() }
        defer { bus.stop() }
        let serve = try ServeProcess(
            cli, ["d", "--poll-interval", "3600"], log: temp.url.appendingPathComponent("serve.log"), environment: bus.environment)
        // The name is claimed before serve says it serves.
        #expect(await waitUntil { serve.output.contains("serving d") }, "\(serve.output)")
        #expect(await waitUntil { (try? await Self.state(bus, "d")) == "in-sync" }, "\(serve.output)")

        // gdbus monitor prints the signals once it has found the name's owner (its match rule
        // is in place by then: the bus answers in order).
        let monitorLog = temp.url.appendingPathComponent("monitor.log")
        let monitor = TestProcess()
        monitor.executableURL = URL(fileURLWithPath: "/usr/bin/gdbus")
        monitor.arguments = ["monitor", "--session", "--dest", Self.name, "--object-path", Self.object]
        monitor.environment = ProcessInfo.processInfo.environment.merging(bus.environment) { _, new in new }
        _ = FileManager.default.createFile(atPath: monitorLog.path, contents: nil)
        monitor.standardOutput = try FileHandle(forWritingTo: monitorLog)
        let monitorExit = ProcessExit(monitor)
        try monitor.run()
        defer {
            kill(monitor.processIdentifier, SIGKILL)
            monitorExit.wait()
        }
        let monitored = { (try? String(contentsOf: monitorLog, encoding: .utf8)) ?? "" }
        #expect(await waitUntil { monitored().contains("is owned by") }, "\(monitored())")

        // Disconnected: paused, in the signal and in ListDomains.
        #expect(try await cli.run(["domain", "disconnect", "d"]).status == 0)
        #expect(await waitUntil { monitored().contains("StateChanged ('d', 'paused')") }, "\(monitored())\n\(serve.output)")
        #expect(try await Self.state(bus, "d") == "paused")
        // Connected again: it syncs, then it is in sync.
        #expect(try await cli.run(["domain", "connect", "d"]).status == 0)
        #expect(
            await waitUntil { monitored().components(separatedBy: "('d', 'paused')").last?.contains("('d', 'in-sync')") == true },
            "\(monitored())\n\(serve.output)")
        #expect(await waitUntil { (try? await Self.state(bus, "d")) == "in-sync" }, "\(serve.output)")

        #expect(await serve.stop(SIGTERM) == 0, "\(serve.output)")
    }

    @Test func serveRunsWithoutTheBusWhenThereIsNoneOrWhenTurnedOff() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("alpha".utf8))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"), options: ["--mode", "placeholder-files"])
        let runtime = temp.url.appendingPathComponent("runtime")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true)

        // No session bus: one line, and serve syncs.
        let alone = try ServeProcess(
            cli, ["d", "--poll-interval", "3600"], log: temp.url.appendingPathComponent("alone.log"),
            environment: ["DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": runtime.path])
        #expect(await waitUntil { alone.output.contains("d: 0 sent") }, "\(alone.output)")
        #expect(alone.output.components(separatedBy: "no D-Bus session bus").count == 2, "\(alone.output)")
        #expect(await alone.stop(SIGTERM) == 0, "\(alone.output)")

        let bus = try await offThePool { try SessionBus() }
        defer { bus.stop() }
        // libsystemd missing: said, and serve goes on.
        let noLibrary = try ServeProcess(
            cli, ["d", "--poll-interval", "3600"], log: temp.url.appendingPathComponent("nolib.log"),
            environment: bus.environment.merging(["FILEPROVIDER_LIBSYSTEMD": "/nonexistent/libsystemd.so.0"]) { _, new in new })
        #expect(await waitUntil { noLibrary.output.contains("d: 0 sent") }, "\(noLibrary.output)")
        #expect(noLibrary.output.contains("cannot load libsystemd"), "\(noLibrary.output)")
        #expect(await noLibrary.stop(SIGTERM) == 0, "\(noLibrary.output)")

        // --no-dbus: the name is not on the bus.
        let off = try ServeProcess(
            cli, ["d", "--poll-interval", "3600", "--no-dbus"], log: temp.url.appendingPathComponent("off.log"),
            environment: bus.environment)
        #expect(await waitUntil { off.output.contains("d: 0 sent") }, "\(off.output)")
        let names = try await offThePool {
            try ChildProcess.capture(
                "/usr/bin/busctl", ["--user", "list", "--no-legend"],
                environment: ProcessInfo.processInfo.environment.merging(bus.environment) { _, new in new })
        }
        #expect(names.ending == .exited(0))
        #expect(!String(decoding: names.output, as: UTF8.self).contains(Self.name))
        #expect(!off.output.contains("D-Bus"), "\(off.output)")
        #expect(await off.stop(SIGTERM) == 0, "\(off.output)")

        // The bus goes away while serve runs: said, and serve goes on syncing.
        let left = try ServeProcess(
            cli, ["d", "--poll-interval", "3600"], log: temp.url.appendingPathComponent("left.log"), environment: bus.environment)
        #expect(await waitUntil { left.output.contains("D-Bus interface") && left.output.contains("d: 0 sent") }, "\(left.output)")
        bus.stop()
        #expect(await waitUntil { left.output.contains("the D-Bus interface is off until serve starts again") }, "\(left.output)")
        let before = left.output.components(separatedBy: "d: 0 sent").count
        #expect(try await cli.run(["signal", "d"]).status == 0)
        #expect(await waitUntil { left.output.components(separatedBy: "d: 0 sent").count > before }, "\(left.output)")
        #expect(await left.stop(SIGTERM) == 0, "\(left.output)")
    }
}
