// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "FileProviderKit",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "ProviderCore", targets: ["ProviderCore"]),
        .library(name: "ProviderStore", targets: ["ProviderStore"]),
        .library(name: "ProviderSystem", targets: ["ProviderSystem"]),
        .library(name: "ProviderEngine", targets: ["ProviderEngine"]),
        .library(name: "ProviderService", targets: ["ProviderService"]),
        .library(name: "ProviderConformance", targets: ["ProviderConformance"]),
        .library(name: "ProviderTesting", targets: ["ProviderTesting"]),
        .library(name: "LocalAdapter", targets: ["LocalAdapter"]),
        .library(name: "SFTPAdapter", targets: ["SFTPAdapter"]),
        .library(name: "MediaAPIAdapter", targets: ["MediaAPIAdapter"]),
        .library(name: "WebDAVAdapter", targets: ["WebDAVAdapter"]),
        .library(name: "S3Adapter", targets: ["S3Adapter"]),
        .library(name: "ExternalAdapter", targets: ["ExternalAdapter"]),
        .library(name: "Thumbnails", targets: ["Thumbnails"]),
        .executable(name: "fileproviderctl", targets: ["fileproviderctl"]),
        .executable(name: "fileprovider-guard", targets: ["fileprovider-guard"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        // `swift package generate-documentation` for the DocC catalogs (scripts/test-docc.sh);
        // a command plugin: nothing links it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", exact: "1.5.0"),
    ],
    targets: [
        .target(name: "ProviderCore"),
        .target(name: "CSystemShims"),
        .target(name: "CSQLiteConfig", dependencies: [.product(name: "GRDBSQLite", package: "GRDB.swift")]),
        .target(
            name: "ProviderStore",
            dependencies: [
                "ProviderCore", "CSQLiteConfig", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        // Every kernel call the engine, the CLI and the fixtures make (fanotify, mounts, inotify,
        // leases, extended attributes, ...): the only Swift module that imports CSystemShims.
        .target(name: "ProviderSystem", dependencies: ["ProviderCore", "CSystemShims", "CFUSE"]),
        // Loading a shared library on first use, for the C shims that call one through function
        // pointers (CCurl, CSecret, CGD, CDBus, CFUSE): a header.
        .target(name: "CLibraryLoader"),
        // libfuse 3's low-level API for ProviderSystem's FUSE sessions, loaded with dlopen at the
        // first mount (so the programs start without libfuse); its headers come from apt's
        // libfuse3-dev.
        .target(name: "CFUSE", dependencies: ["CLibraryLoader"], linkerSettings: [.linkedLibrary("dl")]),
        // OpenSSL's libcrypto (already loaded by libcurl and libssh2), for the SHA-256 the engine
        // computes of every download and upload as the bytes stream (Docs/Reliability.md,
        // "Content hashes"): with the CPU's SHA extensions, about 1.7 GB/s here; and for the
        // MD5 and SHA-256 adapters send with their uploads (AdapterKit's LibCryptoDigest).
        .systemLibrary(name: "CLibCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(
            name: "ProviderEngine",
            dependencies: [
                "ProviderCore", "ProviderStore", "ProviderSystem", "Thumbnails",
                .product(name: "Logging", package: "swift-log"), "CLibCrypto",
            ]
        ),
        // The long-running side, Apple's fileproviderd: serve, its watchers, the on-access
        // handler and the eviction loop, over the engine's package-level API.
        .target(
            name: "ProviderService",
            dependencies: [
                "ProviderCore", "ProviderStore", "ProviderSystem", "ProviderEngine", "CDBus", "Thumbnails",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // sd-bus (libsystemd) for serve's D-Bus interface, loaded with dlopen when serve starts
        // the interface (so the programs start without libsystemd); built without its headers.
        .target(name: "CDBus", dependencies: ["CLibraryLoader"], linkerSettings: [.linkedLibrary("dl")]),
        // The conformance suite and MemoryBackend: what `fileproviderctl backend test` links.
        .target(name: "ProviderConformance", dependencies: ["ProviderCore"]),
        // Test support that starts real servers on loopback (tests and fixtures only; never the
        // CLI). Re-exports ProviderConformance, so a test imports one module.
        .target(name: "ProviderTesting", dependencies: ["ProviderCore", "ProviderConformance"]),
        .target(
            name: "LocalAdapter", dependencies: ["ProviderCore", "AdapterKit", .product(name: "Logging", package: "swift-log")],
            path: "Adapters/Local"),
        .systemLibrary(
            name: "CLibSSH2", path: "Adapters/CLibSSH2", pkgConfig: "libssh2", providers: [.apt(["libssh2-1-dev"])]),
        .target(
            name: "SFTPAdapter", dependencies: ["ProviderCore", "AdapterKit", "CLibSSH2", .product(name: "Logging", package: "swift-log")],
            path: "Adapters/SFTP"),
        // libcurl, loaded with dlopen on first use (so the programs start without it and the
        // libraries it needs); built with its header (libcurl4-openssl-dev).
        .target(name: "CCurl", dependencies: ["CLibraryLoader"], path: "Adapters/CCurl", linkerSettings: [.linkedLibrary("dl")]),
        // Shared adapter plumbing (Adapters/Kit): the libcurl HTTP client, session pools,
        // cancellation, password lookup. Adapters import it; the engine and store never need to,
        // the CLI only for the Secret Service.
        .target(
            name: "AdapterKit",
            dependencies: [
                "ProviderCore", "CCurl", "CSecret", "CLibCrypto", "CKitShims", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Adapters/Kit"),
        // The kit's extended-attribute calls (a ranged download's prefix record), which Glibc's
        // module does not offer.
        .target(name: "CKitShims", path: "Adapters/CKitShims"),
        // The Secret Service through libsecret, loaded with dlopen on first use (so the programs
        // start without libsecret or GLib installed); built without their headers.
        .target(name: "CSecret", dependencies: ["CLibraryLoader"], path: "Adapters/CSecret", linkerSettings: [.linkedLibrary("dl")]),
        .target(name: "MediaAPIAdapter", dependencies: ["ProviderCore", "AdapterKit"], path: "Adapters/MediaAPI"),
        // libxml2's SAX2 parser for WebDAV's multistatus replies (FoundationXML's XMLParser made a
        // String of every element's name and text: a third of a first sync's CPU).
        .systemLibrary(name: "CXML2", path: "Adapters/CXML2", pkgConfig: "libxml-2.0", providers: [.apt(["libxml2-dev"])]),
        .target(name: "WebDAVAdapter", dependencies: ["ProviderCore", "AdapterKit", "CXML2"], path: "Adapters/WebDAV"),
        .target(name: "S3Adapter", dependencies: ["ProviderCore", "AdapterKit"], path: "Adapters/S3"),
        // Backends that are programs of their own, spoken to over a line protocol
        // (Docs/ExternalBackends.md).
        .target(
            name: "ExternalAdapter", dependencies: ["ProviderCore", .product(name: "Logging", package: "swift-log")],
            path: "Adapters/External"),
        // libgd is loaded with dlopen on first use (see Sources/CGD); its headers come from
        // apt's libgd-dev.
        .target(name: "CGD", dependencies: ["CLibraryLoader"], linkerSettings: [.linkedLibrary("dl")]),
        .target(name: "Thumbnails", dependencies: ["ProviderCore", "CGD"]),
        // media-server (the media API's reference server, on Hummingbird) is a package of its
        // own, Servers/media-server, so that linking the kit needs no server stack.
        .executableTarget(
            name: "fileproviderctl",
            dependencies: [
                "ProviderCore", "ProviderStore", "ProviderEngine", "ProviderService", "LocalAdapter", "SFTPAdapter",
                "MediaAPIAdapter", "WebDAVAdapter", "S3Adapter", "ExternalAdapter", "ProviderConformance", "ProviderSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                // The Secret Service, for the passwords of domain add, set --password and remove.
                "AdapterKit",
            ],
            plugins: ["BuildInfo"]
        ),
        // Writes the commit the CLI is built from into it (`fileproviderctl version`).
        .plugin(name: "BuildInfo", capability: .buildTool(), path: "Plugins/BuildInfo"),
        // Keeps a pre-content fanotify group guarded when serve dies (Docs/OnAccess.md). C: a
        // small process with no runtime to start.
        .executableTarget(name: "fileprovider-guard", dependencies: ["CSystemShims"]),
        // The second reference external backend (Docs/ExternalBackends.md): a local folder, in C
        // with the C library only; the first is Backends/python/fileprovider-backend-pyfolder.
        .executableTarget(name: "fileprovider-backend-cfolder", path: "Backends/c"),
        // A minimal on-access provider (the kernel layer alone) the kill -9 tests run and kill.
        .executableTarget(
            name: "precontent-listener", dependencies: ["ProviderSystem", "ProviderCore"],
            path: "Tests/Fixtures/PreContentListener"),
        // A FUSE file system over a local folder with dataless files, and the program that
        // mounts it in a process of its own (the FUSE tests kill it, and run it as another user).
        .target(name: "FUSEFolder", dependencies: ["ProviderSystem", "ProviderCore"], path: "Tests/Fixtures/FUSEFolder"),
        .executableTarget(
            name: "fuse-folder-server", dependencies: ["FUSEFolder", "ProviderSystem"], path: "Tests/Fixtures/FUSEFolderServer"),
        .testTarget(name: "ProviderCoreTests", dependencies: ["ProviderCore"]),
        .testTarget(
            name: "ProviderSystemTests", dependencies: ["ProviderSystem", "ProviderCore", "ProviderTesting", "FUSEFolder"]),
        .testTarget(
            name: "ProviderStoreTests",
            dependencies: ["ProviderStore", "ProviderCore", "ProviderTesting", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "ProviderEngineTests",
            dependencies: [
                "ProviderEngine", "ProviderService", "ProviderStore", "ProviderCore", "ProviderSystem", "ProviderTesting", "LocalAdapter",
                "SFTPAdapter", "MediaAPIAdapter",
            ]
        ),
        // The service's logic through fakes: no root, no fanotify, no servers.
        .testTarget(
            name: "ProviderServiceTests", dependencies: ["ProviderService", "ProviderEngine", "ProviderStore", "ProviderCore"]),
        .testTarget(
            name: "LocalAdapterTests", dependencies: ["LocalAdapter", "ProviderCore", "ProviderTesting"]
        ),
        .testTarget(name: "CLITests", dependencies: ["ProviderCore", "ProviderStore", "ProviderTesting"]),
        .testTarget(
            name: "SFTPAdapterTests", dependencies: ["SFTPAdapter", "AdapterKit", "ProviderCore", "ProviderTesting"]
        ),
        .testTarget(
            name: "ExternalAdapterTests", dependencies: ["ExternalAdapter", "ProviderCore", "ProviderTesting"]),
        .testTarget(name: "AdapterKitTests", dependencies: ["AdapterKit", "ProviderCore", "ProviderTesting"]),
        .testTarget(
            name: "WebDAVAdapterTests",
            dependencies: ["WebDAVAdapter", "ProviderCore", "ProviderTesting", "ProviderEngine", "ProviderStore"]
        ),
        .testTarget(
            name: "S3AdapterTests",
            dependencies: ["S3Adapter", "AdapterKit", "ProviderCore", "ProviderTesting", "ProviderEngine", "ProviderStore"]
        ),
        .testTarget(
            name: "MediaAPIAdapterTests",
            dependencies: [
                "MediaAPIAdapter", "ProviderCore", "ProviderTesting", "Thumbnails", "ProviderEngine", "ProviderStore",
                "LocalAdapter",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
