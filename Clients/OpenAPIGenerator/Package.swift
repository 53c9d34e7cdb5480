// swift-tools-version:6.2
// Runs swift-openapi-generator at a pinned version for scripts/generate-heraldkit-client, which
// writes HeraldKit's HTTP layer from openapi.yaml (and scripts/test checks it is not stale).
// A package of its own so that neither Herald's server nor HeraldKit resolves the generator.
import PackageDescription

let package = Package(
    name: "herald-openapi-generator",
    dependencies: [
        .package(url: "https://github.com/apple/swift-openapi-generator.git", from: "1.14.3")
    ],
    targets: []
)
