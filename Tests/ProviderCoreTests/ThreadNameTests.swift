import Foundation
import ProviderCore
import Testing

@Suite struct ThreadNameTests {
    @Test func namesFitTheKernelsFifteenBytes() {
        #expect(ThreadName.system("fileprovider-engine-12") == "fp-engine-12")
        #expect(ThreadName.system("local-backend-10") == "local-backend-1")
        #expect(ThreadName.system("wal-checkpoint") == "wal-checkpoint")
        #expect(ThreadName.system("sftp-ünïcødé-host") == "sftp-ünïcød")
    }

    /// An executor's threads carry their names for `top -H` and `/proc/<pid>/task/*/comm`.
    @Test func executorThreadsAreNamedForTheSystem() async throws {
        let executor = BlockingExecutor(name: "fileprovider-test", threads: 2)
        defer { executor.shutDown() }
        for _ in 0..<4 {
            let name = try await executor.run { ThreadName.current() }
            #expect(name == "fp-test-0" || name == "fp-test-1")
        }
    }
}
