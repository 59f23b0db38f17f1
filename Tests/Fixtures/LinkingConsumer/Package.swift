// swift-tools-version: 6.0
import PackageDescription

// A separate package that links FileProviderKit's library products the way a third-party tool
// would: by package dependency, not as a target of the main package.
let package = Package(
    name: "LinkingConsumer",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "FileProviderKit", path: "../../..")
    ],
    targets: [
        .executableTarget(
            name: "linking-consumer",
            dependencies: [
                .product(name: "ProviderCore", package: "FileProviderKit"),
                .product(name: "ProviderStore", package: "FileProviderKit"),
                .product(name: "ProviderEngine", package: "FileProviderKit"),
                .product(name: "LocalAdapter", package: "FileProviderKit"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
