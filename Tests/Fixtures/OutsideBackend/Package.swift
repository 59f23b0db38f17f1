// swift-tools-version: 6.0
import PackageDescription

// A backend in a package of its own, as an outside developer writes one
// (Docs/WritingAnAdapter.md, "A backend in its own package"): it depends on FileProviderKit's
// ProviderCore and, for its tests, ProviderTesting, nothing else. scripts/test-outside-backend.sh
// (run by `make test`) builds it, runs the conformance suite, and checks that no server stack
// (Hummingbird, SwiftNIO, swift-crypto) is among its resolved dependencies.
//
// Outside this repository the dependency is the kit's URL or folder instead of "../../..".
let package = Package(
    name: "OutsideBackend",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "JSONStoreBackend", targets: ["JSONStoreBackend"])
    ],
    dependencies: [
        .package(name: "FileProviderKit", path: "../../..")
    ],
    targets: [
        .target(
            name: "JSONStoreBackend",
            dependencies: [.product(name: "ProviderCore", package: "FileProviderKit")]
        ),
        .testTarget(
            name: "JSONStoreBackendTests",
            dependencies: [
                "JSONStoreBackend",
                .product(name: "ProviderCore", package: "FileProviderKit"),
                .product(name: "ProviderTesting", package: "FileProviderKit"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
