// The conformance suite and MemoryBackend live in ProviderConformance (the CLI links it for
// `backend test` without the server fixtures of this module). Re-exported, so a test or an
// outside package's test target imports ProviderTesting alone, as before.
@_exported import ProviderConformance
