// swift-tools-version:6.2
// herald-phone: a command-line app that acts as a device through HeraldKit (docs/heraldkit.md).
// It depends on HeraldKit by path, as an app would by URL and version.
import PackageDescription

let package = Package(
    name: "herald-phone",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "HeraldKit", path: "../../Clients/HeraldKit"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        .executableTarget(
            name: "herald-phone",
            dependencies: [
                .product(name: "HeraldKit", package: "HeraldKit"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("MemberImportVisibility")]
        )
    ]
)
