import Foundation
import ProviderCore
import Testing

@testable import S3Adapter

#if canImport(Glibc)
    import Glibc
#endif

/// Where an `s3` domain's keys come from: the AWS variables, else a profile of the files the
/// AWS CLI writes (`~/.aws/credentials`, `~/.aws/config`).
@Suite("S3 credentials the AWS way")
struct CredentialsTests {
    /// The homes made, removed when the test process exits.
    static let homes = FileManager.default.temporaryDirectory.appendingPathComponent("s3-homes-\(getpid())")

    /// A home with the two files (in ``homes``), and the environment naming it.
    static func home(credentials: String, config: String = "") throws -> [String: String] {
        _ = cleanup
        let home = homes.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: home.appendingPathComponent(".aws"), withIntermediateDirectories: true)
        try Data(credentials.utf8).write(to: home.appendingPathComponent(".aws/credentials"))
        try Data(config.utf8).write(to: home.appendingPathComponent(".aws/config"))
        return ["HOME": home.path]
    }

    private static let cleanup: Void = {
        atexit { try? FileManager.default.removeItem(at: CredentialsTests.homes) }
    }()

    static let files = """
        # written by aws configure
        [default]
        aws_access_key_id = DEFAULTKEY
        aws_secret_access_key = defaultsecret

        [work]
        aws_access_key_id=WORKKEY
        aws_secret_access_key=work/secret+with=signs
        aws_session_token = TOKEN
        ; a comment
        """

    @Test func theVariablesComeFirst() throws {
        var environment = try Self.home(credentials: Self.files)
        environment["AWS_ACCESS_KEY_ID"] = "ENVKEY"
        environment["AWS_SECRET_ACCESS_KEY"] = "envsecret"
        environment["AWS_SESSION_TOKEN"] = "envtoken"
        let found = try S3Credentials.find(profile: nil, environment: environment)
        #expect(found.credentials?.accessKey == "ENVKEY")
        #expect(found.credentials?.secretKey == "envsecret")
        #expect(found.credentials?.sessionToken == "envtoken")
        #expect(found.credentials?.source == "the environment")
    }

    @Test func withoutVariablesTheProfileOfAWSProfileElseDefault() throws {
        var environment = try Self.home(
            credentials: Self.files, config: "[profile work]\nregion = eu-north-1\n[default]\nregion=us-west-2\n")
        let fallback = try S3Credentials.find(profile: nil, environment: environment)
        #expect(fallback.credentials?.accessKey == "DEFAULTKEY")
        #expect(fallback.region == "us-west-2")
        environment["AWS_PROFILE"] = "work"
        let named = try S3Credentials.find(profile: nil, environment: environment)
        #expect(named.credentials?.accessKey == "WORKKEY")
        #expect(named.credentials?.secretKey == "work/secret+with=signs")
        #expect(named.credentials?.sessionToken == "TOKEN")
        #expect(named.region == "eu-north-1")
    }

    @Test func aNamedProfileWinsOverTheVariables() throws {
        var environment = try Self.home(credentials: Self.files)
        environment["AWS_ACCESS_KEY_ID"] = "ENVKEY"
        environment["AWS_SECRET_ACCESS_KEY"] = "envsecret"
        let found = try S3Credentials.find(profile: "work", environment: environment)
        #expect(found.credentials?.accessKey == "WORKKEY")
        #expect(found.credentials?.source.contains("profile work") == true)
    }

    @Test func aMissingProfileOrHalfAPairIsRefusedWithWhatToDo() throws {
        let environment = try Self.home(credentials: Self.files + "\n[half]\naws_access_key_id = ONLYKEY\n")
        let missing = #expect(throws: FileProviderError.self) { try S3Credentials.find(profile: "nope", environment: environment) }
        #expect(missing?.code == .invalidArgument)
        #expect(missing?.message.contains("aws configure --profile nope") == true, "\(missing?.message ?? "")")
        let half = #expect(throws: FileProviderError.self) { try S3Credentials.find(profile: "half", environment: environment) }
        #expect(half?.code == .invalidArgument)
        var variables = environment
        variables["AWS_ACCESS_KEY_ID"] = "ENVKEY"
        let oneVariable = #expect(throws: FileProviderError.self) { try S3Credentials.find(profile: nil, environment: variables) }
        #expect(oneVariable?.message.contains("AWS_SECRET_ACCESS_KEY") == true)
    }

    @Test func noKeysAnywhereMeansUnsignedRequests() throws {
        let environment = try Self.home(credentials: "")
        let found = try S3Credentials.find(profile: nil, environment: environment)
        #expect(found.credentials == nil)
    }

    @Test func bucketNamesAreCheckedAsS3Does() {
        #expect(S3Backend.isValidBucketName("my-bucket.2"))
        for bad in ["ab", "My-Bucket", "-bucket", "bucket-", "b_u_c", String(repeating: "a", count: 64), "bü"] {
            #expect(!S3Backend.isValidBucketName(bad), "\(bad)")
        }
    }
}
