// swift-tools-version:6.2
// The feed rules both ends apply (docs/feed.md): semantic versions, npm-style ranges, region
// codes, and which messages are eligible in what order. Herald's server and HeraldKit depend on
// this package by path, so a device decides eligibility with the very code the server uses;
// TestVectors/feed-rules.json holds the answers both ends' tests check.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "herald-feed-rules",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .library(name: "HeraldFeedRules", targets: ["HeraldFeedRules"]),
        // For tests only: the answers both ends' tests check.
        .library(name: "HeraldFeedRuleVectors", targets: ["HeraldFeedRuleVectors"]),
    ],
    targets: [
        .target(
            name: "HeraldFeedRules",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldFeedRuleVectors",
            resources: [.copy("feed-rules.json")],
            swiftSettings: swiftSettings
        ),
    ]
)
