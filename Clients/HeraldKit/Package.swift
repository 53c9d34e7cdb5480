// swift-tools-version:6.2
// HeraldKit: the device half of an app Herald serves (docs/heraldkit.md). Its HTTP layer is
// generated from Herald's openapi.yaml (Sources/HeraldAPI/Generated, kept fresh by
// scripts/generate-heraldkit-client); its local state is one SQLite file through GRDB. An app
// that adds it resolves no server dependency: the transport is the app's choice
// (swift-openapi-urlsession on Apple platforms); AsyncHTTPClient's transport serves only the
// tests and Examples/HeraldPhone, on Linux, where URLSession cannot stream.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "HeraldKit",
    platforms: [.iOS(.v16), .macOS(.v13)],
    products: [
        .library(name: "HeraldKit", targets: ["HeraldKit"])
    ],
    dependencies: [
        .package(name: "herald-feed-rules", path: "../HeraldFeedRules"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // Tests only: HMAC for the backend proofs they mint.
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
    ],
    targets: [
        // Generated from openapi.yaml: the operations a device calls. Never edited by hand.
        .target(
            name: "HeraldAPI",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            exclude: ["openapi-generator-config.yaml"]
        ),
        // The facade apps use: sign-in, devices, settings, the private feed, offline cards and
        // queued events, history and inbox, the live stream, Message Hub.
        .target(
            name: "HeraldKit",
            dependencies: [
                "HeraldAPI",
                .product(name: "HeraldFeedRules", package: "herald-feed-rules"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldKitTests",
            dependencies: [
                "HeraldKit",
                "HeraldAPI",
                .product(name: "HeraldFeedRules", package: "herald-feed-rules"),
                .product(name: "HeraldFeedRuleVectors", package: "herald-feed-rules"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
