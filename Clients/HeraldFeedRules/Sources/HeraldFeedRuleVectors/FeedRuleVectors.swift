public import Foundation

/// The answers every implementation of the feed rules must give (feed-rules.json beside this
/// file): npm's answers for ranges, how app versions are read, and which feed messages are
/// eligible in what order. Herald's tests check the server against them, HeraldKit's the device.
public struct FeedRuleVectors: Decodable, Sendable {
    /// A range, a version, and whether the version satisfies it.
    public struct Range: Decodable, Sendable {
        /// The range.
        public var range: String
        /// The version.
        public var version: String
        /// npm's answer.
        public var satisfied: Bool
    }

    /// What an app's reported version reads as; nil when it is refused.
    public struct Coerced: Decodable, Sendable {
        /// As the app reports it.
        public var text: String
        /// As read, in full; nil when it does not read.
        public var version: String?
    }

    /// A feed message, with only what eligibility reads.
    public struct Message: Decodable, Sendable {
        /// Its id.
        public var id: String
        /// Higher first.
        public var priority: Int
        /// RFC 3339.
        public var postedAt: Date
        /// RFC 3339.
        public var expiresAt: Date
        /// Region codes; "CA" is every region.
        public var targetRegions: [String]
        /// A semver range; nil for every version.
        public var targetVersion: String?
    }

    /// One device's check and its answers.
    public struct Check: Decodable, Sendable {
        /// The device's region; nil for none.
        public var region: String?
        /// The app's version as it reports it; nil for none.
        public var version: String?
        /// Ids the device has shown.
        public var read: [String]
        /// Every eligible id, in display order.
        public var eligible: [String]
        /// The one to show now; nil for none.
        public var next: String?
    }

    /// The messages, the instant of every check, and the checks.
    public struct Eligibility: Decodable, Sendable {
        /// The instant of every check.
        public var now: Date
        /// The feed.
        public var messages: [Message]
        /// The checks.
        public var checks: [Check]
    }

    /// Ranges and versions with npm's answers.
    public var ranges: [Range]
    /// Ranges that must be refused.
    public var invalidRanges: [String]
    /// App versions and how they read.
    public var coercedVersions: [Coerced]
    /// Feed messages and checks.
    public var eligibility: Eligibility

    /// The vectors shipped with this module.
    public static func load() throws -> FeedRuleVectors {
        guard let url = Bundle.module.url(forResource: "feed-rules", withExtension: "json") else {
            throw CocoaError(.fileNoSuchFile)
        }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(FeedRuleVectors.self, from: Data(contentsOf: url))
    }
}
