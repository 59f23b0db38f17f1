import Foundation
import ProviderCore
import Testing

@Suite struct StagingNameTests {
    @Test func onlyTheExactNamesAdaptersMakeMatch() {
        let made = StagingName.make()
        #expect(StagingName.matches(made))
        let uuid = String(made.dropFirst(StagingName.prefix.count))
        for name in [
            StagingName.prefix + uuid.lowercased(), StagingName.prefix + "notes.txt", made + ".replaced", made + " ",
            "x" + made, String(made.dropLast()), StagingName.prefix, "fileprovider-staging-" + uuid,
        ] {
            #expect(!StagingName.matches(name), "\(name)")
        }
    }

    @Test func abandonedMeansBothTimesOlderThanTheAge() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let old = Int64(now.timeIntervalSince1970 - StagingName.abandonedAge) - 1
        let fresh = Int64(now.timeIntervalSince1970) - 60
        let name = StagingName.make()
        #expect(StagingName.isAbandoned(name, modified: old, accessed: old, now: now))
        #expect(!StagingName.isAbandoned(name, modified: fresh, accessed: old, now: now))
        #expect(!StagingName.isAbandoned(name, modified: old, accessed: fresh, now: now))
        #expect(!StagingName.isAbandoned(StagingName.prefix + "notes.txt", modified: old, accessed: old, now: now))
    }
}
