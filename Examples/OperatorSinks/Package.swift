// swift-tools-version:6.2
// An operator's own sinks, written the way any outside package would: it depends on Herald's
// library products (here by path; a real package would name Herald's repository and a version)
// and never edits Herald's code.
import PackageDescription

let package = Package(
    name: "herald-operator-sinks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "herald", path: "../.."),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        // A chat room sink: one file.
        .target(
            name: "ChatSink",
            dependencies: [
                .product(name: "HeraldCore", package: "herald"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
        // A push provider Herald does not know, with its own registration field: one file.
        .target(
            name: "NtfySink",
            dependencies: [
                .product(name: "HeraldCore", package: "herald"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
        // Herald's server with the built-in sinks plus these two.
        .executableTarget(
            name: "herald-chat",
            dependencies: [
                "ChatSink", "NtfySink", .product(name: "HeraldServer", package: "herald"), .product(name: "HeraldCore", package: "herald"),
                .product(name: "HeraldProcessTuning", package: "herald"),
            ]
        ),
    ]
)
