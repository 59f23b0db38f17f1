import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// One running backend program and the requests in flight to it: the only place that spawns
/// it, writes its standard input and reads its standard output and error.
///
/// Its standard input and output are Unix stream sockets (writes use `MSG_NOSIGNAL`, so a dead
/// program never raises `SIGPIPE` here). A thread of its own reads the replies line by line and
/// hands each to the request with its id; another keeps the tail of the standard error; a third
/// waits for the program's own exit (`waitid`), so a program that dies while a child it started
/// still holds its output is seen to end, and is reaped. Writes run on a writer thread. When the
/// program exits (or closes its output), every pending request fails at once with
/// `serverUnreachable` naming the program, how it ended and the tail of what it wrote to
/// standard error; a request the program could not be sent because it stopped reading fails
/// the same way, once the program has ended.
final class BackendProgram: @unchecked Sendable {
    /// What a request gets: a reply line (to decode) or an error.
    typealias Completion = @Sendable (Result<Data, FileProviderError>) -> Void

    private struct Pending {
        var completion: Completion
        var progress: ProgressHandler?
        /// The most bytes its progress has said are done; only progress beyond it counts as
        /// the program being heard from.
        var completed: Int64 = -1
        /// The start of its request line in the log (``ExternalRequestLog``), when logged.
        var logLine: String?
        /// When it was sent (`DispatchTime` nanoseconds).
        var sentAt: UInt64 = 0
    }

    /// The longest line read from a program: 16 MiB (a page of thousands of items fits).
    static let maximumLineLength = 16 << 20
    /// How much of the program's standard error is kept for messages.
    static let stderrTailLength = 2048

    let path: String
    let displayName: String
    private let pid: pid_t
    private let input: Int32
    private let output: Int32
    private let errors: Int32
    private let writer: SerialWriter

    private let lock = NSLock()
    private var pending: [Int: Pending] = [:]
    private var nextID = 1
    private var deathError: FileProviderError?
    private var stopReason: String?
    private var stderrTail = Data()
    private let stderrDone = DispatchSemaphore(value: 0)
    /// Signalled once the program has been reaped.
    private let reaped = DispatchSemaphore(value: 0)
    /// When the program last sent a reply or progress that advanced, or a request began to
    /// wait while none did.
    private var lastHeard = DispatchTime.now()
    /// Set (under `lock`) once the program has exited, before it is reaped: no signal is sent
    /// to its pid after that.
    private var hasExited = false
    /// How it ended (`exit status 3`), once reaped.
    private var ending: String?
    private var exitWaiters: [@Sendable () -> Void] = []
    /// Written to (never read) when the program has exited: the reader threads poll it.
    private let exitPipe: (read: Int32, write: Int32)
    /// Whether a write to the program's input failed (it stopped reading).
    private var inputFailure: String?
    /// Runs ``checkSilence()``; guarded by `lock`.
    private var watchdog: DispatchSourceTimer?

    /// How long the program may send nothing at all (no reply, no progress) while requests wait
    /// for it, in seconds, before it is stopped (``ExternalBackend/defaultSilenceLimit``).
    let silenceLimit: Double
    /// How long a program whose input was closed has to exit before it gets `SIGTERM`, and then
    /// `SIGKILL`, in seconds (``ExternalBackend/defaultStopGrace``).
    let stopGrace: Double

    /// Starts the program at `path` with no arguments, in a process group of its own.
    ///
    /// - Throws: `serverUnreachable` when it cannot be started.
    init(
        path: String, displayName: String, silenceLimit: Double = ExternalBackend.defaultSilenceLimit,
        stopGrace: Double = ExternalBackend.defaultStopGrace
    ) throws(FileProviderError) {
        self.path = path
        self.displayName = displayName
        self.silenceLimit = silenceLimit
        self.stopGrace = stopGrace
        var inputPair: [Int32] = [-1, -1]
        var outputPair: [Int32] = [-1, -1]
        var errorPair: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &inputPair) == 0 else {
            throw POSIXError.error("socketpair for", path: path)
        }
        guard socketpair(AF_UNIX, type, 0, &outputPair) == 0 else {
            let error = POSIXError.error("socketpair for", path: path)
            close(inputPair[0])
            close(inputPair[1])
            throw error
        }
        guard socketpair(AF_UNIX, type, 0, &errorPair) == 0 else {
            let error = POSIXError.error("socketpair for", path: path)
            for fd in inputPair + outputPair { close(fd) }
            throw error
        }
        // The program reads [1] of the input pair and writes [1] of the other two.
        shutdown(inputPair[1], Int32(SHUT_WR))
        shutdown(outputPair[1], Int32(SHUT_RD))
        shutdown(errorPair[1], Int32(SHUT_RD))
        var pid: pid_t = 0
        var result = Self.spawn(path, stdin: inputPair[1], stdout: outputPair[1], stderr: errorPair[1], pid: &pid)
        // ETXTBSY: the program's file is still open for writing somewhere, most often in a child
        // another thread started the instant it was written (installed, or made by a test): the
        // child holds every descriptor until it executes its own program, a matter of
        // milliseconds. Tried again for up to a fifth of a second.
        var attempts = 1
        while result == ETXTBSY && attempts < 10 {
            usleep(20_000)
            attempts += 1
            result = Self.spawn(path, stdin: inputPair[1], stdout: outputPair[1], stderr: errorPair[1], pid: &pid)
        }
        close(inputPair[1])
        close(outputPair[1])
        close(errorPair[1])
        guard result == 0 else {
            close(inputPair[0])
            close(outputPair[0])
            close(errorPair[0])
            throw FileProviderError(.serverUnreachable, "cannot start \(path): \(String(cString: strerror(result)))")
        }
        self.pid = pid
        input = inputPair[0]
        output = outputPair[0]
        errors = errorPair[0]
        var pipeFDs: [Int32] = [-1, -1]
        if socketpair(AF_UNIX, type, 0, &pipeFDs) != 0 {
            // Without it the readers end at the end of the output, as they did before.
            pipeFDs = [-1, -1]
        }
        exitPipe = (pipeFDs[0], pipeFDs[1])
        writer = SerialWriter(name: "backend-\(displayName)-writer")
        let waiter = Thread { [self] in
            ThreadName.setCurrent("backend-waiter")
            waitForExit()
        }
        waiter.name = "backend-\(displayName)-waiter"
        waiter.stackSize = 1 << 16
        waiter.start()
        let reader = Thread { [self] in
            ThreadName.setCurrent("backend-reader")
            readReplies()
        }
        reader.name = "backend-\(displayName)-reader"
        reader.stackSize = 1 << 20
        reader.start()
        let stderrReader = Thread { [self] in
            ThreadName.setCurrent("backend-stderr")
            readErrors()
        }
        stderrReader.name = "backend-\(displayName)-stderr"
        stderrReader.stackSize = 1 << 18
        stderrReader.start()
    }

    /// Starts stopping the program when it stays silent longer than ``silenceLimit`` while
    /// requests wait (after its handshake, which has a time limit of its own).
    func watchForSilence() {
        let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        let period = max(0.05, min(1, silenceLimit / 4))
        timer.schedule(deadline: .now() + period, repeating: period)
        timer.setEventHandler { [weak self] in self?.checkSilence() }
        let earlier = lock.withLock {
            defer { watchdog = timer }
            lastHeard = .now()
            return watchdog
        }
        earlier?.cancel()
        timer.resume()
    }

    /// Stops the program when requests have waited longer than ``silenceLimit`` without a line
    /// from it.
    private func checkSilence() {
        let waiting = lock.withLock { () -> Int? in
            guard deathError == nil, !pending.isEmpty else { return nil }
            let silent = Double(DispatchTime.now().uptimeNanoseconds - lastHeard.uptimeNanoseconds) / 1e9
            return silent > silenceLimit ? pending.count : nil
        }
        guard let waiting else { return }
        lock.withLock { watchdog }?.cancel()
        stop(
            kill: true,
            reason:
                "sent no reply and no progress that advanced for \(String(format: "%g", silenceLimit)) s while \(waiting) request\(waiting == 1 ? "" : "s") waited (a program sends progress, with more bytes done each time, during long work)"
        )
    }

    deinit {
        lock.withLock { watchdog }?.cancel()
        writer.shutDown()
        close(input)
        if exitPipe.read >= 0 {
            close(exitPipe.read)
            close(exitPipe.write)
        }
    }

    /// Starts the program in a session of its own (a Ctrl-C at the terminal reaches the CLI,
    /// which stops the program by closing its input), with the three descriptors and no other.
    private static func spawn(_ path: String, stdin: Int32, stdout: Int32, stderr: Int32, pid: inout pid_t) -> Int32 {
        var launch = ProgramLaunch(path: path)
        (launch.standardInput, launch.standardOutput, launch.standardError) = (.descriptor(stdin), .descriptor(stdout), .descriptor(stderr))
        switch launch.start() {
        case .success(let started):
            pid = started
            return 0
        case .failure(let failure): return failure.errno
        }
    }

    /// Whether the program has ended (its output closed).
    var hasEnded: Bool { lock.withLock { deathError != nil } }

    /// Sends a request and calls `completion` once with its reply line or error; `progress`
    /// gets the request's progress messages. Returns the request's id.
    @discardableResult
    func send(method: String, params: some Encodable, progress: ProgressHandler? = nil, completion: @escaping Completion) -> Int {
        let id: Int
        let dead: FileProviderError?
        (id, dead) = lock.withLock {
            let id = nextID
            nextID += 1
            if deathError == nil {
                // Time the program spent idle does not count as silence towards this request.
                if pending.isEmpty { lastHeard = .now() }
                pending[id] = Pending(completion: completion, progress: progress)
            }
            return (id, deathError)
        }
        if let dead {
            completion(.failure(dead))
            return id
        }
        let line: Data
        do {
            line = try WireCoding.request(id: id, method: method, params: params)
        } catch {
            finish(id, .failure(FileProviderError(.invalidArgument, "cannot encode a \(method) request: \(error)")))
            return id
        }
        if let logLine = ExternalRequestLog.start(program: displayName, method: method, line: line) {
            let now = DispatchTime.now().uptimeNanoseconds
            lock.withLock {
                pending[id]?.logLine = logLine
                pending[id]?.sentAt = now
            }
        }
        let fd = input
        let name = displayName
        let accepted = writerRun {
            // A program that stopped reading has most often died: the request fails with how it
            // ended once it has (not with the write's `Broken pipe`).
            if let failure = Self.writeAll(fd, line, name: name) { self.stoppedReading(failure) }
        }
        if !accepted { finish(id, .failure(FileProviderError(.serverUnreachable, "\(displayName) is stopped"))) }
        return id
    }

    /// Tells the program to stop working on a request, and fails the request with `cancelled`.
    func cancel(_ id: Int) {
        guard lock.withLock({ pending[id] != nil }) else { return }
        finish(id, .failure(FileProviderError(.cancelled, "cancelled")))
        guard let line = try? WireCoding.notification(method: "cancel", params: ["id": id]) else { return }
        let fd = input
        let name = displayName
        _ = writerRun { _ = Self.writeAll(fd, line, name: name) }
    }

    /// Closes the program's input (a well-behaved program exits); with `kill`, also sends it
    /// SIGKILL. A program still running ``stopGrace`` seconds after its input was closed gets
    /// SIGTERM, and SIGKILL after as long again. Pending requests fail when it has ended, with
    /// `reason` (what the program did wrong) in their message when it is given.
    func stop(kill killNow: Bool = false, reason: String? = nil) {
        if let reason { lock.withLock { if stopReason == nil { stopReason = reason } } }
        shutdown(input, Int32(SHUT_WR))
        if killNow {
            signal(SIGKILL)
            return
        }
        let grace = stopGrace
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + grace) { [self] in
            guard signal(SIGTERM) else { return }
            DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + grace) { [self] in signal(SIGKILL) }
        }
    }

    /// Sends `signal` to the program unless it has exited; `true` when it was sent.
    @discardableResult
    private func signal(_ signal: Int32) -> Bool {
        lock.withLock {
            guard !hasExited else { return false }
            kill(pid, signal)
            return true
        }
    }

    /// Returns once the program has exited and been reaped.
    func waitUntilEnded() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = lock.withLock {
                if ending != nil { return true }
                exitWaiters.append { continuation.resume() }
                return false
            }
            if ended { continuation.resume() }
        }
    }

    /// A write to the program failed: it died or closed its input. Its requests fail when it
    /// has ended; one still running after ``stopGrace`` is killed.
    private func stoppedReading(_ failure: FileProviderError) {
        let first = lock.withLock {
            defer { if inputFailure == nil { inputFailure = failure.message } }
            return inputFailure == nil && deathError == nil
        }
        guard first else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + stopGrace) { [self] in
            guard !lock.withLock({ hasExited }) else { return }
            stop(kill: true, reason: "stopped reading its input (\(failure.message))")
        }
    }

    private func writerRun(_ body: @escaping @Sendable () -> Void) -> Bool { writer.enqueue(body) }

    private static func writeAll(_ fd: Int32, _ data: Data, name: String) -> FileProviderError? {
        data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> FileProviderError? in
            guard var pointer = buffer.baseAddress else { return nil }
            var left = buffer.count
            while left > 0 {
                let written = Glibc.send(fd, pointer, left, Int32(MSG_NOSIGNAL))
                if written < 0 {
                    if errno == EINTR { continue }
                    return FileProviderError(.serverUnreachable, "cannot write to \(name): \(String(cString: strerror(errno)))")
                }
                pointer += written
                left -= written
            }
            return nil
        }
    }

    private func finish(_ id: Int, _ result: Result<Data, FileProviderError>) {
        guard let entry = lock.withLock({ pending.removeValue(forKey: id) }) else { return }
        if let logLine = entry.logLine {
            ExternalRequestLog.finish(logLine, result: result, seconds: RequestLogText.seconds(since: entry.sentAt))
        }
        entry.completion(result)
    }

    // MARK: Reading

    private func readReplies() {
        // Bytes of lines not yet complete; the first `scanned` of them hold no newline, so
        // each byte is looked at once however long a line grows.
        var unread: [UInt8] = []
        var scanned = 0
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var violation: FileProviderError?
        var exitSeen: DispatchTime?
        reading: while true {
            let count = chunk.withUnsafeMutableBytes { readUntilExit(output, $0, exitSeen: &exitSeen) }
            if count <= 0 { break }
            unread.append(contentsOf: chunk[0..<count])
            var lineStart = 0
            while let newline = Self.newline(in: unread, from: max(scanned, lineStart)) {
                let line = Data(unread[lineStart..<newline])
                lineStart = newline + 1
                if let error = handle(line) {
                    violation = error
                    break reading
                }
            }
            unread.removeFirst(lineStart)
            scanned = unread.count
            if unread.count > Self.maximumLineLength {
                violation = FileProviderError(
                    .corruptData, "\(displayName) sent a line longer than \(Self.maximumLineLength) bytes")
                break
            }
        }
        if violation != nil { signal(SIGKILL) }
        close(output)
        // A program that closed its output but goes on running gets 2 seconds, then SIGKILL.
        var ending: String
        if reaped.wait(timeout: .now() + 2) == .timedOut {
            signal(SIGKILL)
            reaped.wait()
            ending = "it closed its output and was killed"
        } else {
            ending = lock.withLock { self.ending } ?? "its exit status is unknown"
        }
        reaped.signal()
        _ = stderrDone.wait(timeout: .now() + 2)
        let (tail, reason) = lock.withLock { (stderrTail, stopReason) }
        if reason == nil, violation == nil, let failure = lock.withLock({ inputFailure }) {
            ending += " (\(failure))"
        }
        var message =
            violation.map { "\($0.message); it was stopped" } ?? reason.map { "\(displayName) (\(path)) \($0); it was stopped (\(ending))" }
            ?? "\(displayName) (\(path)) ended: \(ending)"
        let text = TerminalText.escaped(String(decoding: tail, as: UTF8.self)).trimmingCharacters(in: .whitespacesAndNewlines)
        if !text.isEmpty { message += "; its last error output: \(text)" }
        let error = FileProviderError(violation?.code ?? .serverUnreachable, message)
        let failed = lock.withLock {
            deathError = error
            let all = pending
            pending = [:]
            return all
        }
        for entry in failed.values { entry.completion(.failure(error)) }
        lock.withLock { watchdog }?.cancel()
        writer.shutDown()
    }

    /// The index of the first newline in `bytes` at or after `start`, or `nil`.
    private static func newline(in bytes: [UInt8], from start: Int) -> Int? {
        guard start < bytes.count else { return nil }
        return bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress, let found = memchr(base + start, 0x0a, buffer.count - start) else { return nil }
            return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// Hands one line to its request; returns an error when the line breaks the protocol (the
    /// program is then stopped).
    private func handle(_ line: Data) -> FileProviderError? {
        if line.isEmpty { return nil }
        let envelope: WireEnvelope
        do {
            envelope = try WireCoding.decoder.decode(WireEnvelope.self, from: line)
        } catch {
            return FileProviderError(.corruptData, "\(displayName) sent a malformed line: \(Self.excerpt(line))")
        }
        let (entry, issued) = lock.withLock { () -> (Pending?, Bool) in
            // A reply is being heard from; progress only when it advances (below).
            if envelope.progress == nil { lastHeard = .now() }
            return (pending[envelope.id], envelope.id > 0 && envelope.id < nextID)
        }
        guard let entry else {
            // A reply to a request given up (cancelled) is dropped; one to a request never
            // sent breaks the protocol.
            return issued ? nil : FileProviderError(.corruptData, "\(displayName) answered request \(envelope.id), which was never sent")
        }
        if let progress = envelope.progress {
            guard let completed = progress.completed, ItemBounds.problem(withSize: completed) == nil,
                progress.total.map({ ItemBounds.problem(withSize: $0) == nil && $0 >= completed }) ?? true
            else {
                finish(
                    envelope.id, .failure(FileProviderError(.corruptData, "\(displayName) sent impossible progress: \(Self.excerpt(line))"))
                )
                return nil
            }
            if envelope.error != nil || envelope.hasResult {
                finish(
                    envelope.id,
                    .failure(
                        FileProviderError(.corruptData, "\(displayName) sent progress and a reply in one line: \(Self.excerpt(line))")))
                return nil
            }
            let advanced = lock.withLock { () -> Bool in
                guard var current = pending[envelope.id], completed > current.completed else { return false }
                current.completed = completed
                pending[envelope.id] = current
                lastHeard = .now()
                return true
            }
            if advanced { entry.progress?(completed, progress.total) }
            return nil
        }
        if envelope.error != nil && envelope.hasResult {
            finish(
                envelope.id,
                .failure(
                    FileProviderError(
                        .corruptData,
                        "\(displayName) sent a reply with both a result and an error, so whether the request was done is unknown: \(Self.excerpt(line))"
                    )))
        } else if let error = envelope.error {
            finish(envelope.id, .failure(error.fileProviderError(program: displayName)))
        } else if envelope.hasResult {
            finish(envelope.id, .success(line))
        } else {
            finish(
                envelope.id,
                .failure(FileProviderError(.corruptData, "\(displayName) sent a reply with no result or error: \(Self.excerpt(line))")))
        }
        return nil
    }

    static func excerpt(_ line: Data) -> String {
        let text = String(decoding: line.prefix(200), as: UTF8.self)
        return TerminalText.escaped(text) + (line.count > 200 ? "…" : "")
    }

    private func readErrors() {
        var chunk = [UInt8](repeating: 0, count: 4096)
        var exitSeen: DispatchTime?
        while true {
            let count = chunk.withUnsafeMutableBytes { readUntilExit(errors, $0, exitSeen: &exitSeen) }
            if count <= 0 { break }
            lock.withLock {
                stderrTail.append(contentsOf: chunk[0..<count])
                if stderrTail.count > Self.stderrTailLength { stderrTail = Data(stderrTail.suffix(Self.stderrTailLength)) }
            }
        }
        close(errors)
        stderrDone.signal()
    }

    /// How long, in seconds, what a program wrote before it exited is still read (a child it
    /// started may hold its output open and go on writing).
    private static let drainSeconds = 0.2

    /// Reads from `fd` (the program's output or error) into `buffer`, until the program has
    /// exited: after that only what is there already, for ``drainSeconds``. Returns the count
    /// read, 0 at the end (of the stream, or of the program), -1 on an error.
    private func readUntilExit(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, exitSeen: inout DispatchTime?) -> Int {
        while true {
            guard exitPipe.read >= 0 else {
                let count = read(fd, buffer.baseAddress, buffer.count)
                if count < 0 && errno == EINTR { continue }
                return count
            }
            if let exitSeen, DispatchTime.now().uptimeNanoseconds - exitSeen.uptimeNanoseconds > UInt64(Self.drainSeconds * 1e9) {
                return 0
            }
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: exitPipe.read, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, exitSeen == nil ? 2 : 1, exitSeen == nil ? -1 : 0)
            if ready < 0 {
                if errno == EINTR { continue }
                return -1
            }
            if fds[0].revents != 0 {
                let count = read(fd, buffer.baseAddress, buffer.count)
                if count < 0 && errno == EINTR { continue }
                return count
            }
            if exitSeen != nil { return 0 }
            if fds[1].revents != 0 { exitSeen = .now() }
        }
    }

    /// Waits for the program's own exit (not the end of its output, which a child it started
    /// may hold), wakes the readers, then reaps it.
    private func waitForExit() {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
        lock.withLock { hasExited = true }
        if exitPipe.write >= 0 {
            var byte: UInt8 = 1
            _ = write(exitPipe.write, &byte, 1)
        }
        var status: Int32 = 0
        var result: pid_t
        repeat { result = waitpid(pid, &status, 0) } while result == -1 && errno == EINTR
        let text: String
        if result == pid {
            let signal = status & 0x7f
            text = signal == 0 ? "exit status \((status >> 8) & 0xff)" : "killed by signal \(signal)"
        } else {
            text = "its exit status is unknown"
        }
        let waiters = lock.withLock {
            ending = text
            defer { exitWaiters = [] }
            return exitWaiters
        }
        reaped.signal()
        for waiter in waiters { waiter() }
    }
}

/// One thread that runs writes in the order they were queued, so lines never interleave and a
/// program that does not read blocks no caller.
final class SerialWriter: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var isShutDown = false

    init(name: String) {
        let thread = Thread { [self] in
            ThreadName.setCurrent(name)
            loop()
        }
        thread.name = name
        thread.stackSize = 1 << 18
        thread.start()
    }

    /// Queues a job; `false` once shut down.
    func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
        condition.withLock {
            if isShutDown { return false }
            jobs.append(job)
            condition.signal()
            return true
        }
    }

    /// Stops the thread once the queued jobs have run.
    func shutDown() {
        condition.withLock {
            isShutDown = true
            condition.broadcast()
        }
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !isShutDown { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let batch = jobs
            jobs = []
            condition.unlock()
            for job in batch { job() }
        }
    }
}
