import ProviderCore

extension FileProviderError {
    /// The error of work a cancellation stopped before it started (or, for a batch, before it
    /// was done): code `cancelled`.
    public static let notStarted = FileProviderError(.cancelled, "interrupted before it was done")
}
