// swift-tools-version: 6.0
import PackageDescription

// media-server, the reference server of the HTTP media API (Docs/MediaAPI.md), for tests,
// benchmarks and the demo. A package of its own, so that FileProviderKit's package needs no
// server stack: a package that links ProviderCore, ProviderStore, ProviderEngine or
// ProviderTesting resolves none of Hummingbird, SwiftNIO or swift-crypto
// (scripts/test-outside-backend.sh checks it). It takes the thumbnailer from the kit by path.
//
//     swift build --package-path Servers/media-server    # Servers/media-server/.build/debug/media-server
let package = Package(
    name: "MediaServer",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "media-server", targets: ["media-server"])
    ],
    dependencies: [
        .package(name: "FileProviderKit", path: "../.."),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
    ],
    targets: [
        .executableTarget(
            name: "media-server",
            dependencies: [
                .product(name: "Thumbnails", package: "FileProviderKit"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
