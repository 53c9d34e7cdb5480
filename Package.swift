// swift-tools-version:6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// What a feature module whose store is written once (SharedSQLDatabase) and whose routes are
/// Hummingbird's builds on (docs/architecture.md, "Feature modules").
let featureModuleDependencies: [Target.Dependency] = [
    "HeraldCore",
    "HeraldStore",
    "HeraldHTTP",
    .product(name: "Hummingbird", package: "hummingbird"),
]

/// A feature module that also runs a background service of its own.
let featureServiceDependencies: [Target.Dependency] =
    featureModuleDependencies + [
        .product(name: "Logging", package: "swift-log"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
    ]

let package = Package(
    name: "herald",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "herald", targets: ["herald"]),
        .executable(name: "notifsim", targets: ["notifsim"]),
        .library(name: "HeraldCore", targets: ["HeraldCore"]),
        .library(name: "HeraldStore", targets: ["HeraldStore"]),
        .library(name: "HeraldServer", targets: ["HeraldServer"]),
        .library(name: "HeraldHTTP", targets: ["HeraldHTTP"]),
        .library(name: "HeraldContent", targets: ["HeraldContent"]),
        .library(name: "HeraldFeed", targets: ["HeraldFeed"]),
        .library(name: "HeraldTopics", targets: ["HeraldTopics"]),
        .library(name: "HeraldCards", targets: ["HeraldCards"]),
        .library(name: "HeraldLive", targets: ["HeraldLive"]),
        .library(name: "HeraldInbox", targets: ["HeraldInbox"]),
        .library(name: "HeraldProcessTuning", targets: ["HeraldProcessTuning"]),
        .library(name: "HeraldHistorySink", targets: ["HeraldHistorySink"]),
        .library(name: "HeraldConsoleSink", targets: ["HeraldConsoleSink"]),
        .library(name: "HeraldFCMSink", targets: ["HeraldFCMSink"]),
        .library(name: "HeraldSinkHTTP", targets: ["HeraldSinkHTTP"]),
        .library(name: "HeraldFCMEmulator", targets: ["HeraldFCMEmulator"]),
        .library(name: "HeraldWebPushEmulator", targets: ["HeraldWebPushEmulator"]),
        .library(name: "HeraldWebhookSink", targets: ["HeraldWebhookSink"]),
        .library(name: "HeraldFeedSink", targets: ["HeraldFeedSink"]),
        .library(name: "HeraldWebPushSink", targets: ["HeraldWebPushSink"]),
        .library(name: "HeraldAPNsSink", targets: ["HeraldAPNsSink"]),
        .library(name: "HeraldAPNsEmulator", targets: ["HeraldAPNsEmulator"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: ["YAML"]),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        // The feed rules the server and HeraldKit share (semver ranges, regions, eligibility).
        .package(name: "herald-feed-rules", path: "Clients/HeraldFeedRules"),
        // `swift package generate-documentation` (DocC) for the modules plugin authors use.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        // Domain: notifications, routing, the sink protocol, the delivery engine.
        // Imports no HTTP server, HTTP client or database module.
        .target(
            name: "HeraldCore",
            dependencies: [
                .product(name: "HeraldFeedRules", package: "herald-feed-rules"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // Digest titles and bodies (docs/timing.md).
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldStore",
            dependencies: [
                "HeraldCore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Delivery sinks live under Plugins/: each is a library target of its own.
        .target(
            name: "HeraldHistorySink",
            dependencies: ["HeraldCore"],
            path: "Plugins/HistorySink",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldConsoleSink",
            dependencies: ["HeraldCore"],
            path: "Plugins/ConsoleSink",
            swiftSettings: swiftSettings
        ),
        // The HTTP client every HTTP sink sends through (sized, no redirects, several HTTP/2
        // connections); operators' own sinks may use it too.
        .target(
            name: "HeraldSinkHTTP",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldFCMSink",
            dependencies: [
                "HeraldCore",
                "HeraldSinkHTTP",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Plugins/FCMSink",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldFeedSink",
            dependencies: ["HeraldCore"],
            path: "Plugins/FeedSink",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldWebhookSink",
            dependencies: [
                "HeraldCore",
                "HeraldSinkHTTP",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ],
            path: "Plugins/WebhookSink",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldWebPushSink",
            dependencies: [
                "HeraldCore",
                "HeraldSinkHTTP",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Plugins/WebPushSink",
            swiftSettings: swiftSettings
        ),
        // A local stand-in for Google's token endpoint and FCM v1, for developers and tests.
        .target(
            name: "HeraldFCMEmulator",
            dependencies: [
                "HeraldEmulatorSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldAPNsSink",
            dependencies: [
                "HeraldCore",
                "HeraldSinkHTTP",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Plugins/APNsSink",
            swiftSettings: swiftSettings
        ),
        // What every provider emulator shares: the TLS certificate it mints at start.
        .target(
            name: "HeraldEmulatorSupport",
            dependencies: [
                "HeraldCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        // A local stand-in for APNs (HTTP/2 over TLS), for developers and tests.
        .target(
            name: "HeraldAPNsEmulator",
            dependencies: [
                "HeraldEmulatorSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        // A local stand-in for a browser's Web Push service, for developers and tests.
        .target(
            name: "HeraldWebPushEmulator",
            dependencies: [
                "HeraldCore",
                "HeraldWebPushSink",
                "HeraldEmulatorSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // What a server process tunes about itself (heaps, file limit): for executables only,
        // so embedding HeraldServer changes nothing process-wide.
        .target(
            name: "HeraldProcessTuning",
            dependencies: ["CGlibcMalloc"],
            swiftSettings: swiftSettings
        ),
        // What every module with routes shares: the request context and its caller, the route
        // table, JSON bodies and answers, entity tags, and the HTTP rules middleware enforces.
        .target(
            name: "HeraldHTTP",
            dependencies: [
                "HeraldCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // Personalised content (docs/content.md): its model, its store on both engines, its routes.
        .target(
            name: "HeraldContent",
            dependencies: featureModuleDependencies,
            swiftSettings: swiftSettings
        ),
        // Message Hub topics (docs/topics.md): the channel → area → subject hierarchy and users'
        // subscriptions, their store on both engines, their routes and the message routes, and
        // the worker keeping provider-side topic membership equal to them. The subject lookup
        // routing needs stays in HeraldCore (TopicLookup).
        .target(
            name: "HeraldTopics",
            dependencies: featureServiceDependencies,
            swiftSettings: swiftSettings
        ),
        // The pull feed (docs/feed.md): its store on both engines, its documents, routes and
        // maintenance. Its model and FeedStore stay in HeraldCore, as the feed sink writes it.
        .target(
            name: "HeraldFeed",
            dependencies: [
                "HeraldCore",
                "HeraldStore",
                "HeraldHTTP",
                .product(name: "HeraldFeedRules", package: "herald-feed-rules"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The ranked card pool and engagement events (docs/cards.md): models, the store on
        // each engine (their SQL differs: arrays on PostgreSQL, group commits on SQLite), routes.
        .target(
            name: "HeraldCards",
            dependencies: [
                "HeraldCore",
                "HeraldStore",
                "HeraldHTTP",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // Live updates (`GET /api/stream`, docs/pong.md "Live updates"): the streams open in this
        // process, what wakes them, and the route; the feed and content reach it as closures.
        .target(
            name: "HeraldLive",
            dependencies: [
                "HeraldCore",
                "HeraldHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The inbox (docs/inbox.md): states and counts on history, marks, badges, the sync push
        // that keeps a user's devices in step, snoozes ending; its store on both engines.
        .target(
            name: "HeraldInbox",
            dependencies: featureServiceDependencies,
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldServer",
            dependencies: [
                .product(name: "HeraldFeedRules", package: "herald-feed-rules"),
                "HeraldCore",
                "HeraldHTTP",
                "HeraldContent",
                "HeraldFeed",
                "HeraldInbox",
                "HeraldCards",
                "HeraldLive",
                "HeraldTopics",
                "HeraldStore",
                "HeraldHistorySink",
                "HeraldConsoleSink",
                "HeraldFCMSink",
                "HeraldWebhookSink",
                "HeraldFeedSink",
                "HeraldWebPushSink",
                "HeraldAPNsSink",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            resources: [.copy("Resources/openapi.yaml"), .copy("Resources/feed.schema.json"), .copy("Resources/portal")],
            swiftSettings: swiftSettings
        ),
        // glibc's mallopt, for the server's allocator tuning (Sources/HeraldServer/MallocArenas.swift).
        .systemLibrary(name: "CGlibcMalloc", path: "Sources/CGlibcMalloc"),
        .executableTarget(
            name: "herald",
            dependencies: [
                "HeraldCore",
                "HeraldServer",
                "HeraldProcessTuning",
                "HeraldStore",
                "HeraldFCMEmulator",
                "HeraldWebPushEmulator",
                "HeraldWebPushSink",
                "HeraldAPNsEmulator",
                "HeraldEmulatorSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "notifsim",
            dependencies: [
                "HeraldCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The benchmark harness: `swift run -c release herald-bench` (see Benchmarks/README.md).
        .executableTarget(
            name: "herald-bench",
            dependencies: [
                "HeraldCore",
                "HeraldStore",
                "HeraldFCMSink",
                "HeraldTestSupport",
                "HeraldTopics",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Benchmarks/Harness",
            swiftSettings: swiftSettings
        ),
        // Test fixtures shared by several test targets and the benchmark harness (the throwaway
        // PostgreSQL server, child processes and their output, loopback ports).
        .target(
            name: "HeraldTestSupport",
            dependencies: [
                "HeraldStore", "HeraldCore", "HeraldCards", "HeraldFeed", "HeraldTopics", "HeraldEmulatorSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Tests/HeraldTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldCoreTests",
            dependencies: [
                "HeraldCore", .product(name: "HeraldFeedRules", package: "herald-feed-rules"),
                .product(name: "HeraldFeedRuleVectors", package: "herald-feed-rules"), .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldCardsTests",
            dependencies: [
                "HeraldCards", "HeraldCore", "HeraldStore", "HeraldTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldInboxTests",
            dependencies: ["HeraldInbox", "HeraldCore", "HeraldStore", "HeraldTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldContentTests",
            dependencies: ["HeraldContent", "HeraldCore", "HeraldStore", "HeraldTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldStoreTests",
            dependencies: [
                "HeraldStore", "HeraldCore", "HeraldCards", "HeraldInbox", "HeraldFeed", "HeraldTopics", "HeraldTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldSinkTests",
            dependencies: ["HeraldHistorySink", "HeraldConsoleSink", "HeraldStore", "HeraldCore", "HeraldTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldFCMSinkTests",
            dependencies: [
                "HeraldFCMSink", "HeraldFCMEmulator", "HeraldEmulatorSupport", "HeraldHistorySink", "HeraldStore", "HeraldCore", "HeraldTopics",
                "HeraldTestSupport",
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldWebhookSinkTests",
            dependencies: [
                "HeraldWebhookSink", "HeraldSinkHTTP", "HeraldCore", "HeraldTestSupport", "HeraldStore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldWebPushSinkTests",
            dependencies: [
                "HeraldWebPushSink", "HeraldWebPushEmulator", "HeraldEmulatorSupport", "HeraldCore", "HeraldTestSupport", "HeraldStore",
                "HeraldHistorySink",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldAPNsSinkTests",
            dependencies: [
                "HeraldAPNsSink", "HeraldAPNsEmulator", "HeraldEmulatorSupport", "HeraldCore", "HeraldStore", "HeraldHistorySink", "HeraldTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldServerTests",
            dependencies: [
                .product(name: "HeraldFeedRules", package: "herald-feed-rules"),
                "HeraldServer",
                "HeraldTopics",
                "HeraldFeed",
                "HeraldInbox",
                "HeraldHTTP",
                "HeraldProcessTuning",
                "HeraldTestSupport",
                "HeraldCore",
                "HeraldStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "HeraldTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Yams", package: "Yams"),
            ],
            // Run by the tests with python3, found through #filePath.
            exclude: ["outage_proxy.py", "syscall_filter.py"],
            swiftSettings: swiftSettings
        ),
    ]
)
