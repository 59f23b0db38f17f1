import Foundation
import ProviderCore
import ProviderStore

/// Checks one downloaded file of a domain against its record, for `verify`: blocking, on a
/// thread of its own.
struct IntegrityCheck: Sendable {
    let domain: String
    let replica: Replica

    enum Verdict: Sendable {
        /// The bytes have the recorded hash.
        case verified
        /// Read, but no hash was recorded to compare with.
        case unhashed
        /// Not read (missing, edited, unreadable).
        case skipped
    }

    struct Outcome: Sendable {
        var verdict: Verdict
        var bytesRead: Int64 = 0
        var problems: [IntegrityProblem] = []
    }

    /// The file's verdict and what is wrong with it.
    func check(_ record: ItemRecord) -> Outcome {
        let target = replica.path(record.path)
        let recorded = record.localSHA256.map { "sha256:" + $0 }
        // The store's hash describes the store's current contents: compared only while the
        // downloaded file is of that version.
        let storeHash = record.localContentVersion == record.contentVersion ? record.contentHash.flatMap(ContentHash.init) : nil
        func problem(_ kind: IntegrityProblem.Kind, found: String? = nil, _ detail: String) -> IntegrityProblem {
            IntegrityProblem(
                domain: domain, path: record.path, kind: kind, recordedHash: recorded, foundHash: found,
                storeHash: storeHash.map { "\($0.algorithm):\($0.hex)" }, detail: detail)
        }
        guard let print = replica.fingerprint(atPath: target), print.isRegularFile else {
            return Outcome(
                verdict: .skipped,
                problems: [
                    problem(
                        .missing,
                        "recorded as downloaded, but the replica has no file there; 'fileproviderctl sync \(domain)' downloads it again")
                ])
        }
        if replica.hasLocalChanges(record, print) {
            return Outcome(
                verdict: .skipped,
                problems: [
                    problem(.unsentEdit, "changed here (size, date or inode) and not sent yet; the next sync uploads it")
                ])
        }
        let found: String
        do {
            found = try FastSHA256.ofFile(target)
        } catch {
            return Outcome(verdict: .skipped, problems: [problem(.unreadable, error.message)])
        }
        var outcome = Outcome(verdict: recorded == nil ? .unhashed : .verified, bytesRead: print.size)
        let foundHash = "sha256:" + found
        if let recorded, recorded != foundHash {
            outcome.verdict = .skipped
            outcome.problems.append(
                problem(
                    .bitRot, found: foundHash,
                    "the bytes changed though size and modification time did not (bit rot, or a program that put the date back); evict it and materialize it again to get the store's bytes"
                ))
        }
        // What the store should hold: the bytes as recorded, else the bytes as they are.
        if let storeHash, storeHash.isCheckable {
            let reference: String?
            if storeHash.algorithm == "sha256" {
                reference = record.localSHA256 ?? found
            } else {
                reference = try? storeHash.ofFile(target)
            }
            if let reference, reference != storeHash.hex {
                outcome.problems.append(
                    problem(
                        .storeHashDiffers, found: foundHash,
                        "the store gives another \(storeHash.algorithm) hash than the one of the bytes downloaded; the store's copy may be damaged, or changed without a new version"
                    ))
            }
        }
        return outcome
    }
}
