import ProviderCore

/// The accessed file as the kernel has it open for the on-access handler (its event's
/// descriptor): what ``OnAccessRequests`` reads or changes of it while it decides. The handler's
/// implementation runs these system calls off the cooperative pool.
package protocol AccessedDescriptor: Sendable {
    /// The item key of the file's dataless mark now, or `nil` when it has none (complete).
    /// - Throws: `cancelled` when it cannot be read any more (serve is ending: the executor is
    ///   shut down).
    func datalessKey() async throws(FileProviderError) -> UInt64?

    /// Removes the file's dataless mark (a file that has none is fine). Returns `nil`, or the
    /// `errno` of the failure.
    func clearDatalessMark() async -> Int32?
}
