import Foundation
import ProviderConformance
import ProviderCore
import ProviderEngine
import Testing

/// A backend that runs more transfers at once than the engine's defaults
/// (``BackendCapabilities/concurrentTransfers``) gets that many: download batches and uploads
/// at once, at most 64, never fewer than the defaults, whatever number it gives.
@Suite(.timeLimit(.minutes(10))) struct TransferDepthsTests {
    /// Holds the arriving calls until `target` of them are in at once (or ``release()`` is
    /// called), then lets every call through; remembers the most that were in at once.
    actor Gathering {
        let target: Int
        private(set) var inside = 0
        private(set) var most = 0
        private var open = false
        private var waiting: [CheckedContinuation<Void, Never>] = []

        init(target: Int) { self.target = target }

        func arrive() async {
            inside += 1
            most = max(most, inside)
            if inside >= target { release() }
            if !open { await withCheckedContinuation { waiting.append($0) } }
            inside -= 1
        }

        /// Lets every waiting call go, and every later one through.
        func release() {
            open = true
            let all = waiting
            waiting = []
            for continuation in all { continuation.resume() }
        }
    }

    @Test func downloadDepthFollowsTheBackendWithinBounds() async throws {
        for (asked, expected) in [(nil, 8), (2, 8), (-3, 8), (16, 16), (1_000_000, 64)] as [(Int?, Int)] {
            try await Fixture.with(memory: MemoryBackend(hasChangeFeed: false, pageSize: 7, concurrentTransfers: asked)) { f in
                let controller = try await f.addDomain()
                #expect(controller.downloadDepth == expected, "concurrentTransfers \(String(describing: asked))")
            }
        }
    }

    @Test func uploadsGoAsManyAtOnceAsTheBackendRuns() async throws {
        try await Fixture.with(memory: MemoryBackend(hasChangeFeed: false, pageSize: 7, concurrentTransfers: 12)) { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = try f.memory.mkdir(path: "new")
            try await controller.sync()
            for index in 0..<30 { try Data("file \(index)\n".utf8).write(to: f.url(controller, "new/n\(index).txt")) }
            let gathering = Gathering(target: 12)
            f.memory.setHook(for: .createItem) { identifier in
                guard identifier != nil else { return }
                await gathering.arrive()
            }
            // Patience: should the engine never run 12 at once, the calls go on after 60 s and
            // the expectation below says how many did.
            let patience = Task {
                try? await Task.sleep(for: .seconds(60))
                await gathering.release()
            }
            defer { patience.cancel() }
            try await controller.sync()
            let most = await gathering.most
            #expect(most == 12, "uploads at once: \(most)")
            for index in 0..<30 {
                #expect(f.memory.contents(of: "new/n\(index).txt") == Data("file \(index)\n".utf8))
            }
        }
    }
}
