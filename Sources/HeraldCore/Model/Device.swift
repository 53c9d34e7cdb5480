public import Foundation

/// Where a push provider reaches one device: the provider's name (`fcm`, `apns`, `webpush`, or
/// a name a plugin declares) and its address for the device, as the app sent it: a token
/// string, or an object such as a Web Push subscription.
public struct DeviceAddress: Sendable, Hashable {
    /// The provider's name, as its sink declares it (``DeviceProviders``).
    public var provider: String
    /// The address as the app sent it.
    public var value: JSONValue
    /// What identifies the device within its provider: the token itself, or for an object
    /// address what the provider's sink chooses (a Web Push subscription's endpoint). Unique
    /// per provider: registering the same key again is the same device.
    public var key: String

    /// An address with the key its provider's sink chose.
    public init(provider: String, value: JSONValue, key: String) {
        self.provider = provider
        self.value = value
        self.key = key
    }

    /// A token address: the key is the token.
    public init(provider: String, token: String) {
        self.init(provider: provider, value: .string(token), key: token)
    }

    /// The address when it is a token.
    public var token: String? {
        if case .string(let token) = value { token } else { nil }
    }

    /// The longest provider name.
    public static let maxProviderBytes = 32

    /// Provider names: 1-32 of a-z, 0-9, '_' or '-'.
    public static func isValidProvider(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= maxProviderBytes
            && name.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 || $0 == 45 }
    }
}

/// One device of one user, for one provider. An address moves to the last user that
/// registered it.
public struct Device: Sendable, Equatable {
    /// Herald's id for the device (`device_id` in the API).
    public var id: ObjectID
    /// Its user.
    public var userID: String
    /// Where its provider reaches it.
    public var address: DeviceAddress
    /// The name of the sink instance that serves this device (two FCM projects); nil means the
    /// first configured sink of its provider.
    public var app: String?
    /// Provider-specific facts the provider's sink needs (APNs: `environment`).
    public var options: [String: String]
    /// What the app said it runs on (`ios`, `android`, `web`), as sent.
    public var platform: String?
    /// The app's version, as sent; audiences and the feed may filter on it.
    public var appVersion: String?
    /// The device's region code, as sent.
    public var region: String?
    /// The device's locale, as sent.
    public var locale: String?
    /// The app installation that registered the device with a device token (its `device_id`
    /// claim), telling a user's devices apart; nil when a backend registered it.
    public var installationID: String?
    /// When it was first registered.
    public var createdAt: Date
    /// When it was last registered again (stale devices are pruned by this).
    public var updatedAt: Date

    /// A device as stored.
    public init(
        id: ObjectID, userID: String, address: DeviceAddress, app: String? = nil, options: [String: String] = [:], platform: String? = nil,
        appVersion: String? = nil, region: String? = nil, locale: String? = nil, installationID: String? = nil, createdAt: Date, updatedAt: Date
    ) {
        self.id = id
        self.userID = userID
        self.address = address
        self.app = app
        self.options = options
        self.platform = platform
        self.appVersion = appVersion
        self.region = region
        self.locale = locale
        self.installationID = installationID
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// Its provider's name.
    public var provider: String { address.provider }
    /// The address when it is a token (FCM, APNs).
    public var token: String? { address.token }
}

/// A device as a user registers it (`POST /api/notifications/register`), before it is stored.
/// The sink that serves its provider checks the address and may fill in defaults
/// (``NotificationSink/prepare(_:)``).
public struct DeviceRegistration: Sendable, Equatable {
    /// The longest token, and the longest object address as canonical JSON.
    public static let maxTokenBytes = 4_096
    /// The longest `platform`, `app_version`, `region`, `locale` or `app`.
    public static let maxFieldLength = 64

    /// The address to register.
    public var address: DeviceAddress
    /// The request field the address came from (`fcm_token`, `web_push`, …), for errors.
    public var addressField: String
    /// The sink instance to serve the device, or nil for its provider's first.
    public var app: String?
    /// Provider-specific facts, from the form's options; ``NotificationSink/prepare(_:)`` may
    /// fill in defaults.
    public var options: [String: String]
    /// As ``Device/platform``.
    public var platform: String?
    /// As ``Device/appVersion``.
    public var appVersion: String?
    /// As ``Device/region``.
    public var region: String?
    /// As ``Device/locale``.
    public var locale: String?
    /// The `device_id` of the device token the registration was made with (set by the server,
    /// never from the request body).
    public var installationID: String?

    /// A registration as the route reads it from the request.
    public init(
        address: DeviceAddress, addressField: String = "address", app: String? = nil, options: [String: String] = [:], platform: String? = nil,
        appVersion: String? = nil, region: String? = nil, locale: String? = nil
    ) {
        self.address = address
        self.addressField = addressField
        self.app = app
        self.options = options
        self.platform = platform
        self.appVersion = appVersion
        self.region = region
        self.locale = locale
    }

    /// A token registration for `provider`.
    public static func token(_ token: String, provider: String, platform: String? = nil, appVersion: String? = nil) -> DeviceRegistration {
        DeviceRegistration(address: DeviceAddress(provider: provider, token: token), platform: platform, appVersion: appVersion)
    }

    /// Checks what every provider shares: the optional facts' sizes, and a token or object
    /// address that is bounded. A token's key, unless one was set, is the token; an object's, its
    /// canonical JSON.
    public mutating func validateCommonFields() throws {
        for (name, value) in [("platform", platform), ("app_version", appVersion), ("region", region), ("locale", locale), ("app", app)] {
            if let value, value.unicodeScalars.count > Self.maxFieldLength {
                throw HeraldError.invalidField(name, "must be at most \(Self.maxFieldLength) characters")
            }
        }
        switch address.value {
        case .string(let token):
            try Self.validateToken(token, field: addressField)
            if address.key.isEmpty { address.key = token }
        case .object:
            let canonical = address.value.canonicalText
            guard canonical.utf8.count <= Self.maxTokenBytes else {
                throw HeraldError.invalidField(addressField, "must be at most \(Self.maxTokenBytes) bytes of JSON")
            }
            if address.key.isEmpty { address.key = canonical }
        default:
            throw HeraldError.invalidField(addressField, "must be a token string or an object")
        }
    }

    /// A token: present, non-empty, bounded, printable ASCII without spaces.
    public static func validateToken(_ token: String, field: String) throws {
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
    /// `tier_id`: the user's plan or level, for tier audiences and content.
    public var tierID: String?
    /// `group_ids`: the groups the user belongs to, at most 1000.
    public var groupIDs: [String]
    /// `region`: a region code, for content and feed targeting.
    public var region: String?
    /// `app_version`: the version of the app the user runs.
    public var appVersion: String?
    /// `locale`: a BCP 47 language tag such as `fr-CA`.
    public var locale: String?

    /// The wire names this body accepts; any other field is refused.
    public static let fieldNames: Set<String> = ["tier_id", "group_ids", "region", "app_version", "locale"]

    enum CodingKeys: String, CodingKey {
        case region, locale
        case tierID = "tier_id"
        case groupIDs = "group_ids"
        case appVersion = "app_version"
    }

    /// Attributes as given; ``validate()`` checks them.
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

    /// - Throws: a 422 naming the field when a value is empty or longer than 128 characters, or there are more than 1000 groups.
    public func validate() throws {
        guard groupIDs.count <= 1_000 else { throw HeraldError.invalidField("group_ids", "must have at most 1000 entries") }
        for (name, value) in [("tier_id", tierID), ("region", region), ("app_version", appVersion), ("locale", locale)] {
            if let value, value.isEmpty || value.unicodeScalars.count > 128 {
                throw HeraldError.invalidField(name, "must be 1-128 characters")
            }
        }
        for (index, group) in groupIDs.enumerated() where group.isEmpty || group.unicodeScalars.count > 128 {
            throw HeraldError.invalidField("group_ids[\(index)]", "must be 1-128 characters")
        }
        // Audiences name tiers and groups in NFC (``UserID``) and match them by bytes: an id
        // written otherwise could never be matched.
        if let tierID { try UserID.checkNFC(tierID, field: "tier_id") }
        for (index, group) in groupIDs.enumerated() { try UserID.checkNFC(group, field: "group_ids[\(index)]") }
    }
}

extension Device {
    /// The error a device's pending pushes fail with when registering another put its user over
    /// `devices.max_per_user` (`keep`) and the device, the oldest, was removed.
    public static func removedOverLimit(keep: Int) -> String { "\(overLimitPrefix)\(keep) devices" }

    /// Whether a delivery's error is ``removedOverLimit(keep:)``'s (explanations' `device_limit`).
    public static func wasRemovedOverLimit(_ error: String) -> Bool { error.hasPrefix(overLimitPrefix) }

    private static let overLimitPrefix = "device removed: the user registered more than "
}
