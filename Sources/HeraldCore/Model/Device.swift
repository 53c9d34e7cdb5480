public import Foundation

/// A push token owned by one user. A token moves to the last user that registered it.
public struct Device: Sendable, Equatable {
    public var id: ObjectID
    public var userID: String
    public var fcmToken: String
    public var platform: String?
    public var appVersion: String?
    public var region: String?
    public var locale: String?
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        id: ObjectID, userID: String, fcmToken: String, platform: String? = nil, appVersion: String? = nil,
        region: String? = nil, locale: String? = nil, createdAt: Date, updatedAt: Date
    ) {
        self.id = id
        self.userID = userID
        self.fcmToken = fcmToken
        self.platform = platform
        self.appVersion = appVersion
        self.region = region
        self.locale = locale
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// `POST /api/notifications/register`: the token plus optional device facts.
public struct DeviceRegistration: Decodable, Sendable {
    public static let maxTokenBytes = 4_096
    public static let maxFieldBytes = 64

    public var fcmToken: String?
    public var platform: String?
    public var appVersion: String?
    public var region: String?
    public var locale: String?

    enum CodingKeys: String, CodingKey {
        case platform, region, locale
        case fcmToken = "fcm_token"
        case appVersion = "app_version"
    }

    public init(fcmToken: String?, platform: String? = nil, appVersion: String? = nil, region: String? = nil, locale: String? = nil) {
        self.fcmToken = fcmToken
        self.platform = platform
        self.appVersion = appVersion
        self.region = region
        self.locale = locale
    }

    /// The token, checked: present, non-empty, bounded, no spaces or control characters.
    public func validatedToken() throws -> String {
        guard let token = fcmToken else { throw HeraldError.missingField("fcm_token") }
        try Self.validateToken(token)
        for (name, value) in [("platform", platform), ("app_version", appVersion), ("region", region), ("locale", locale)] {
            if let value, value.utf8.count > Self.maxFieldBytes {
                throw HeraldError.invalidField(name, "must be at most \(Self.maxFieldBytes) bytes")
            }
        }
        return token
    }

    public static func validateToken(_ token: String, field: String = "fcm_token") throws {
        guard !token.isEmpty else { throw HeraldError.invalidField(field, "must not be empty") }
        guard token.utf8.count <= maxTokenBytes else {
            throw HeraldError.invalidField(field, "must be at most \(maxTokenBytes) bytes")
        }
        guard token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f }) else {
            throw HeraldError.invalidField(field, "must be printable ASCII without spaces")
        }
    }
}

/// Attributes a backend sets on a user (`PUT /api/users/{id}`), used by audiences and content.
public struct UserAttributes: Sendable, Equatable, Codable {
    public var tierID: String?
    public var groupIDs: [String]
    public var region: String?
    public var appVersion: String?
    public var locale: String?

    public static let fieldNames: Set<String> = ["tier_id", "group_ids", "region", "app_version", "locale"]

    enum CodingKeys: String, CodingKey {
        case region, locale
        case tierID = "tier_id"
        case groupIDs = "group_ids"
        case appVersion = "app_version"
    }

    public init(tierID: String? = nil, groupIDs: [String] = [], region: String? = nil, appVersion: String? = nil, locale: String? = nil) {
        self.tierID = tierID
        self.groupIDs = groupIDs
        self.region = region
        self.appVersion = appVersion
        self.locale = locale
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        tierID = try container.decodeIfPresent(LenientID.self, forKey: .tierID)?.value
        groupIDs = try container.decodeIfPresent([LenientID].self, forKey: .groupIDs)?.map(\.value) ?? []
        region = try container.decodeIfPresent(String.self, forKey: .region)
        appVersion = try container.decodeIfPresent(String.self, forKey: .appVersion)
        locale = try container.decodeIfPresent(String.self, forKey: .locale)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(tierID, forKey: .tierID)
        try container.encode(groupIDs, forKey: .groupIDs)
        try container.encode(region, forKey: .region)
        try container.encode(appVersion, forKey: .appVersion)
        try container.encode(locale, forKey: .locale)
    }

    public func validate() throws {
        guard groupIDs.count <= 1_000 else { throw HeraldError.invalidField("group_ids", "must have at most 1000 entries") }
        for (name, value) in [("tier_id", tierID), ("region", region), ("app_version", appVersion), ("locale", locale)] {
            if let value, value.isEmpty || value.utf8.count > 128 {
                throw HeraldError.invalidField(name, "must be 1-128 bytes")
            }
        }
        for (index, group) in groupIDs.enumerated() where group.isEmpty || group.utf8.count > 128 {
            throw HeraldError.invalidField("group_ids[\(index)]", "must be 1-128 bytes")
        }
    }
}
