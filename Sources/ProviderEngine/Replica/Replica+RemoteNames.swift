import ProviderCore

extension Replica {
    /// Why a name from the store cannot be used in the replica, or `nil`.
    static func problem(withRemoteName name: String, inRoot: Bool) -> String? {
        do {
            try Filename.validate(name)
        } catch {
            return error.message
        }
        if name.hasSuffix(Replica.placeholderSuffix) {
            return "\(name.debugDescription) ends in .placeholder, which is reserved for placeholders"
        }
        if name.hasPrefix(".fp-tmp-") || (inRoot && name == ".fileprovider-staging") {
            return "\(name.debugDescription) is reserved for the engine's temporary files"
        }
        return nil
    }
}
