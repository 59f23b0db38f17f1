// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "FileProviderKit",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "ProviderCore", targets: ["ProviderCore"]),
        .library(name: "ProviderStore", targets: ["ProviderStore"]),
        .library(name: "ProviderEngine", targets: ["ProviderEngine"]),
        .library(name: "ProviderTesting", targets: ["ProviderTesting"]),
        .library(name: "LocalAdapter", targets: ["LocalAdapter"]),
        .executable(name: "fileproviderctl", targets: ["fileproviderctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
    ],
    targets: [
        .target(name: "ProviderCore"),
        .target(name: "CSystemShims"),
        .target(
            name: "ProviderStore",
            dependencies: ["ProviderCore", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .target(
            name: "ProviderEngine",
            dependencies: [
                "ProviderCore", "ProviderStore", "CSystemShims",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "ProviderTesting", dependencies: ["ProviderCore"]),
        .target(name: "LocalAdapter", dependencies: ["ProviderCore"], path: "Adapters/Local"),
        .executableTarget(
            name: "fileproviderctl",
            dependencies: [
                "ProviderCore", "ProviderStore", "ProviderEngine", "LocalAdapter",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "ProviderCoreTests", dependencies: ["ProviderCore"]),
        .testTarget(name: "ProviderStoreTests", dependencies: ["ProviderStore", "ProviderCore"]),
        .testTarget(
            name: "ProviderEngineTests",
            dependencies: ["ProviderEngine", "ProviderStore", "ProviderCore", "ProviderTesting"]
        ),
        .testTarget(
            name: "LocalAdapterTests", dependencies: ["LocalAdapter", "ProviderCore", "ProviderTesting"]
        ),
        .testTarget(name: "CLITests", dependencies: ["ProviderCore"]),
    ],
    swiftLanguageModes: [.v6]
)
