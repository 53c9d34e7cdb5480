public import Foundation
import HeraldFeedRules

/// The body of `POST /api/feed/messages`.
public struct FeedMessageSubmission: Decodable, Sendable {
    /// `title`, required.
    public var title: String?
    /// `body`.
    public var body: String?
    /// `url`, resolved like a notification's.
    public var url: String?
    /// `posted_at` (RFC 3339); the time of the request when absent.
    public var postedAt: String?
    /// `expires_at` (RFC 3339), required, after `posted_at` and in the future.
    public var expiresAt: String?
    /// `priority`, higher first; 0 when absent.
    public var priority: Int?
    /// `target_regions`, required: region codes, `"CA"` for every region.
    public var targetRegions: [String]?
    /// `target_version`: a semver range the app's version must satisfy.
    public var targetVersion: String?

    /// The wire names this body accepts; any other field is refused.
    public static let fieldNames: Set<String> = ["title", "body", "url", "posted_at", "expires_at", "priority", "target_regions", "target_version"]

    enum CodingKeys: String, CodingKey {
        case title, body, url, priority
        case postedAt = "posted_at"
        case expiresAt = "expires_at"
        case targetRegions = "target_regions"
        case targetVersion = "target_version"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        title = try c.decodeIfPresent(String.self, forKey: .title)
        body = try c.decodeIfPresent(String.self, forKey: .body)
        url = try c.decodeIfPresent(String.self, forKey: .url)
        postedAt = try c.decodeIfPresent(String.self, forKey: .postedAt)
        expiresAt = try c.decodeIfPresent(String.self, forKey: .expiresAt)
        priority = try c.decodeIfPresent(WholeNumber.self, forKey: .priority)?.value
        targetRegions = try c.decodeIfPresent([String].self, forKey: .targetRegions)
        targetVersion = try c.decodeIfPresent(String.self, forKey: .targetVersion)
    }

    /// The message to store as `id`.
    /// - Throws: a 422 naming the first field that breaks a rule.
    public func validated(id: ObjectID, now: Date, resources: ResourceResolver) throws -> FeedMessage {
        guard let title, !title.isEmpty else { throw title == nil ? HeraldError.missingField("title") : HeraldError.invalidField("title", "must not be empty") }
        guard title.unicodeScalars.count <= NotificationValidator.maxTitleLength else {
            throw HeraldError.invalidField("title", "must be at most \(NotificationValidator.maxTitleLength) characters")
        }
        let body = self.body ?? ""
        guard body.unicodeScalars.count <= NotificationValidator.maxBodyLength else {
            throw HeraldError.invalidField("body", "must be at most \(NotificationValidator.maxBodyLength) characters")
        }
        var posted = now
        if let text = postedAt {
            guard let date = Timestamp.parse(text) else { throw HeraldError.invalidField("posted_at", "must be an RFC 3339 timestamp") }
            posted = date
        }
        guard let text = expiresAt else { throw HeraldError.missingField("expires_at") }
        guard let expires = Timestamp.parse(text) else { throw HeraldError.invalidField("expires_at", "must be an RFC 3339 timestamp") }
        guard expires > now else { throw HeraldError.invalidField("expires_at", "is in the past") }
        guard expires > posted else { throw HeraldError.invalidField("expires_at", "must be after posted_at") }
        guard let regions = targetRegions else { throw HeraldError.missingField("target_regions") }
        guard !regions.isEmpty else { throw HeraldError.invalidField("target_regions", "must name at least one region (\"CA\" means every region)") }
        for (index, region) in regions.enumerated() where region.isEmpty || region.unicodeScalars.count > 16 {
            throw HeraldError.invalidField("target_regions[\(index)]", "must be a region code of 1-16 characters")
        }
        if let targetVersion {
            do throws(VersionRange.ParseError) {
                _ = try VersionRange(targetVersion)
            } catch {
                throw HeraldError.invalidField("target_version", error.description)
            }
        }
        let priority = self.priority ?? 0
        try NotificationValidator.checkPriority(priority)
        return FeedMessage(
            id: id, title: title, body: body, url: try resources.resolve(url), postedAt: posted, expiresAt: expires, priority: priority,
            targetRegions: regions, targetVersion: targetVersion
        )
    }
}
