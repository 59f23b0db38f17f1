import Foundation
import PackagePlugin

/// Gives `fileproviderctl` the commit it is built from: before each build, a shell writes
/// `BuildInfo.swift` (`let buildCommit = "8aefee3c2a1b"`, `-dirty` appended when tracked files
/// differ from that commit, `unknown` outside a git checkout or without git). The file is
/// rewritten only when its text changes, so an unchanged checkout rebuilds nothing.
@main
struct BuildInfoPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("generated")
        return [
            .prebuildCommand(
                displayName: "Recording the commit in BuildInfo.swift",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", Self.script, "build-info", context.package.directoryURL.path, output.path],
                outputFilesDirectory: output)
        ]
    }

    /// `$1`: the package folder; `$2`: the folder to write `BuildInfo.swift` into.
    static let script = #"""
        commit=unknown
        if cd "$1" 2>/dev/null && head=$(git rev-parse --short=12 HEAD 2>/dev/null); then
            commit=$head
            git diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
        fi
        mkdir -p "$2" || exit 1
        printf '/// The commit this program was built from (written before each build).\nlet buildCommit = "%s"\n' "$commit" >"$2/BuildInfo.swift.new" || exit 1
        if cmp -s "$2/BuildInfo.swift.new" "$2/BuildInfo.swift"; then rm -f "$2/BuildInfo.swift.new"; else mv "$2/BuildInfo.swift.new" "$2/BuildInfo.swift"; fi
        """#
}
