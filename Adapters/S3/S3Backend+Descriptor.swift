import AdapterKit
import Foundation
import ProviderCore

extension S3Backend {
    /// The `s3` backend kind: a bucket (or a folder in it) on AWS S3 or an S3-compatible store.
    ///
    /// Options: `bucket` (required), `endpoint`, `prefix`, `region`, `path-style`, `profile`,
    /// `multipart-threshold` and `part-size` (MiB) and the kit's HTTP options (``HTTPOptions/backendOptions``). The keys are never stored:
    /// they come from `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN` or from
    /// the `profile` of `~/.aws/credentials` and `~/.aws/config` when the backend connects
    /// (``S3Credentials``); without any, requests go unsigned (a public bucket). The region is
    /// `region`, else `AWS_REGION`/`AWS_DEFAULT_REGION`, else the profile's, else `us-east-1`.
    /// The factory lists the bucket once, so it throws `serverUnreachable` when the server
    /// cannot be reached, `notAuthenticated` when the keys are refused, `noSuchItem` when the
    /// bucket does not exist, and `invalidArgument` for a bad option or profile (a threshold
    /// outside 1 to 5,120 MiB, a part size outside 5 to 5,120 MiB).
    public static let descriptor = BackendDescriptor(
        kind: "s3",
        summary: "a bucket on AWS S3 or an S3-compatible store (SeaweedFS, Ceph RGW, MinIO, Garage, B2, Wasabi, R2)",
        options: [
            BackendOption(name: "bucket", help: "the bucket's name", isRequired: true),
            BackendOption(
                name: "endpoint",
                help: "the store's URL, http:// or https:// (default: AWS S3 in --region, https://s3.REGION.amazonaws.com)",
                type: .url),
            BackendOption(name: "prefix", help: "a folder in the bucket to use as the domain's root (such as team/docs)"),
            BackendOption(
                name: "region",
                help: "the region requests are signed for (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's, or us-east-1)"),
            BackendOption(
                name: "path-style",
                help: "address the bucket as ENDPOINT/BUCKET instead of BUCKET.ENDPOINT (most self-hosted stores want it)",
                type: .boolean),
            BackendOption(
                name: "profile",
                help:
                    "a profile of ~/.aws/credentials and ~/.aws/config to take the keys and region from (default: the AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN variables, else AWS_PROFILE or the default profile)"
            ),
            BackendOption(
                name: "multipart-threshold",
                help:
                    "files larger than this many MiB are uploaded in parts (a multipart upload, resumed after an interruption); 1 to 5120",
                type: .integer, defaultValue: "64"),
            BackendOption(
                name: "flat-listing",
                help:
                    "a sync lists the whole bucket at once (a request per 1,000 keys, one after another) instead of folder by folder (8 at once): faster for deep trees with few files per folder",
                type: .boolean),
            BackendOption(
                name: "part-size",
                help: "the smallest part of a multipart upload in MiB (larger files get larger parts: at most 10,000); 5 to 5120",
                type: .integer, defaultValue: "8"),
        ] + HTTPOptions.backendOptions,
        libraryVersions: { ["libcurl": HTTPClient.libraryVersion] },
        factory: { configuration in
            func value(_ name: String) -> String? { configuration[name].flatMap { $0.isEmpty ? nil : $0 } }
            let environment = ProcessInfo.processInfo.environment
            let found = try S3Credentials.find(profile: value("profile"), environment: environment)
            let region =
                value("region") ?? environment["AWS_REGION"].flatMap { $0.isEmpty ? nil : $0 }
                ?? environment["AWS_DEFAULT_REGION"].flatMap { $0.isEmpty ? nil : $0 } ?? found.region ?? "us-east-1"
            let http = try HTTPOptions(configuration: configuration)
            let threshold = try configuration.integer("multipart-threshold") ?? 64
            guard (1...5120).contains(threshold) else {
                throw FileProviderError(.invalidArgument, "--multipart-threshold takes 1 to 5120 (MiB), not \(threshold)")
            }
            let partSize = try configuration.integer("part-size") ?? 8
            guard (5...5120).contains(partSize) else {
                throw FileProviderError(.invalidArgument, "--part-size takes 5 to 5120 (MiB; S3 refuses smaller parts), not \(partSize)")
            }
            let hint =
                found.credentials.map { "check the access key and secret key (from \($0.source))" }
                ?? "no credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give --profile"
            return try await S3Backend(
                endpoint: value("endpoint"), bucket: try configuration.string("bucket"), prefix: value("prefix") ?? "",
                region: region, pathStyle: configuration.boolean("path-style"),
                credentials: found.credentials.map { ($0.accessKey, $0.secretKey, $0.sessionToken) }, http: http,
                authenticationHint: hint,
                multipart: MultipartSettings(threshold: Int64(threshold) << 20, minimumPartSize: Int64(partSize) << 20),
                listsFlat: configuration.boolean("flat-listing"))
        })
}
