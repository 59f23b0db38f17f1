import Foundation
import Testing

/// SplitMix64: a small deterministic generator, so a failing seed replays exactly.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// True with probability `percent`/100.
    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &self) < percent }

    /// Picks an index by weight.
    mutating func weighted(_ weights: [Int]) -> Int {
        var roll = Int.random(in: 0..<weights.reduce(0, +), using: &self)
        for (index, weight) in weights.enumerated() {
            if roll < weight { return index }
            roll -= weight
        }
        return weights.count - 1
    }
}

/// Seeds for the randomized suites: `CHAOS_SEEDS=1,2,3` overrides the defaults.
func chaosSeeds(default defaults: [UInt64]) -> [UInt64] {
    guard let text = ProcessInfo.processInfo.environment["CHAOS_SEEDS"], !text.isEmpty else { return defaults }
    let seeds = text.split(separator: ",").compactMap { UInt64($0.trimmingCharacters(in: .whitespaces)) }
    return seeds.isEmpty ? defaults : seeds
}

/// An integer from the environment, or a default.
func chaosSetting(_ name: String, default value: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap { Int($0) } ?? value
}

/// Random bytes from a seeded generator.
func randomBytes(_ count: Int, using rng: inout SeededGenerator) -> Data {
    var out = [UInt8](repeating: 0, count: count)
    var index = 0
    while index < count {
        var word = rng.next()
        for _ in 0..<8 where index < count {
            out[index] = UInt8(truncatingIfNeeded: word)
            word >>= 8
            index += 1
        }
    }
    return Data(out)
}

/// Every regular file and folder below `root`, by relative path: files with their bytes,
/// folders as `nil`. Does not follow symlinks.
func snapshot(of root: URL) -> [String: Data?] {
    var result: [String: Data?] = [:]
    func walk(_ url: URL, _ prefix: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        for name in names {
            let child = url.appendingPathComponent(name)
            let relative = prefix.isEmpty ? name : prefix + "/" + name
            switch entry(at: child) {
            case .folder:
                result[relative] = .some(nil)
                walk(child, relative)
            case .file:
                result[relative] = .some(try? Data(contentsOf: child))
            default:
                result[relative] = .some(Data("<other>".utf8))
            }
        }
    }
    walk(root, "")
    return result
}

/// Paths that look like temporary or staging files of the engine or a backend.
func strayTemporaryFiles(in root: URL) -> [String] {
    snapshot(of: root).keys.filter { path in
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return name.hasPrefix(".fp-tmp-") || name.hasPrefix(".fileprovider-staging-") || name.hasSuffix(".part")
    }.sorted()
}

/// A short description of bytes for failure messages.
func describe(_ data: Data) -> String {
    let head = data.prefix(24)
    let text = String(decoding: head.prefix { $0 != 0x0a }, as: UTF8.self)
    return "\(text.debugDescription) (\(data.count) bytes)"
}
