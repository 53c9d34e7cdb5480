/// The body of `POST /api/notifications`, as decoded from JSON and before validation.
///
/// Field names are the wire names; ``NotificationValidator`` turns a submission into a
/// ``HeraldNotification`` or a ``HeraldError`` naming the offending field.
public struct NotificationSubmission: Decodable, Sendable {
    /// `type`: a built-in or configured notification type (``NotificationTypes``).
    public var type: String?
    /// `title`: the visible title; required for the alert distribution.
    public var title: String?
    /// `body`: the visible text, at most ``NotificationValidator/maxBodyLength`` bytes.
    public var body: String?
    /// `url`: where opening the notification leads, absolute or resolved against the public base URL.
    public var url: String?
    /// `data`: string pairs handed to the app as they are.
    public var data: [String: String]?
    /// `distribution`: `alert` (a visible push) or `information` (silent data).
    public var distribution: String?
    /// `priority`: 1-10, the provider's urgency.
    public var priority: Int?
    /// `expires_at`: an RFC 3339 time after which the notification is no longer sent.
    public var expiresAt: String?
    /// `collapse_key`: newer notifications under the same key replace older ones on the device.
    public var collapseKey: String?
    /// `idempotency_key`: the same request under the same key within 24 hours returns the first receipt.
    public var idempotencyKey: String?
    /// `user_ids`: the recipients, at most ``NotificationValidator/maxRecipients``.
    public var userIDs: [String]?
    /// `topic`: a Message Hub topic whose subscribers receive it.
    public var topic: String?
    /// `audience`: users picked by tier, group or id, or everyone.
    public var audience: Audience?
    /// `broadcast`: a message for the pull feed, optionally narrowed.
    public var broadcast: BroadcastTarget?
    /// Validate, route and ask the push providers to validate; store and send nothing.
    public var dryRun: Bool?
    /// `send_at`: when to send, RFC 3339 with an offset (docs/timing.md); absent to send now.
    public var sendAt: String?
    /// `send_at_local`: `HH:MM` or `YYYY-MM-DDTHH:MM`, each recipient's wall-clock time in
    /// their own zone (docs/timing.md); not with `send_at`.
    public var sendAtLocal: String?
    /// `digest_key`: notifications with the same key for the same user inside `digest_window`
    /// are one push at the window's end (docs/timing.md).
    public var digestKey: String?
    /// `digest_window`: how long a `digest_key` window lasts (`"90s"`, `"10m"`, `"1h"`, seconds).
    public var digestWindow: WindowLength?

    /// The wire names this body accepts; any other field is refused.
    public static let fieldNames: Set<String> = Set(CodingKeys.allCases.map(\.rawValue))

    enum CodingKeys: String, CodingKey, CaseIterable {
        case type, title, body, url, data, distribution, priority, topic, audience, broadcast
        case expiresAt = "expires_at"
        case collapseKey = "collapse_key"
        case idempotencyKey = "idempotency_key"
        case userIDs = "user_ids"
        case dryRun = "dry_run"
        case sendAt = "send_at"
        case sendAtLocal = "send_at_local"
        case digestKey = "digest_key"
        case digestWindow = "digest_window"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        type = try c.decodeIfPresent(String.self, forKey: .type)
        title = try c.decodeIfPresent(String.self, forKey: .title)
        body = try c.decodeIfPresent(String.self, forKey: .body)
        url = try c.decodeIfPresent(String.self, forKey: .url)
        data = try c.decodeIfPresent([String: String].self, forKey: .data)
        distribution = try c.decodeIfPresent(String.self, forKey: .distribution)
        priority = try c.decodeIfPresent(WholeNumber.self, forKey: .priority)?.value
        expiresAt = try c.decodeIfPresent(String.self, forKey: .expiresAt)
        collapseKey = try c.decodeIfPresent(String.self, forKey: .collapseKey)
        idempotencyKey = try c.decodeIfPresent(String.self, forKey: .idempotencyKey)
        userIDs = try c.decodeIfPresent([String].self, forKey: .userIDs)
        topic = try c.decodeIfPresent(String.self, forKey: .topic)
        audience = try c.decodeIfPresent(Audience.self, forKey: .audience)
        broadcast = try c.decodeIfPresent(BroadcastTarget.self, forKey: .broadcast)
        dryRun = try c.decodeIfPresent(Bool.self, forKey: .dryRun)
        sendAt = try c.decodeIfPresent(String.self, forKey: .sendAt)
        sendAtLocal = try c.decodeIfPresent(String.self, forKey: .sendAtLocal)
        digestKey = try c.decodeIfPresent(String.self, forKey: .digestKey)
        digestWindow = try c.decodeIfPresent(WindowLength.self, forKey: .digestWindow)
    }

    /// A submission with the given fields, as a body with them would decode.
    public init(
        type: String? = nil, title: String? = nil, body: String? = nil, url: String? = nil,
        data: [String: String]? = nil, distribution: String? = nil, priority: Int? = nil,
        expiresAt: String? = nil, collapseKey: String? = nil, idempotencyKey: String? = nil,
        userIDs: [String]? = nil, topic: String? = nil, audience: Audience? = nil, broadcast: BroadcastTarget? = nil
    ) {
        self.type = type
        self.title = title
        self.body = body
        self.url = url
        self.data = data
        self.distribution = distribution
        self.priority = priority
        self.expiresAt = expiresAt
        self.collapseKey = collapseKey
        self.idempotencyKey = idempotencyKey
        self.userIDs = userIDs
        self.topic = topic
        self.audience = audience
        self.broadcast = broadcast
    }
}

/// `broadcast`: `true`, or an object with optional `regions`, `version` and `expires_at`.
public struct BroadcastTarget: Decodable, Sendable, Equatable {
    /// Region codes the message is for; nil for every region.
    public var regions: [String]?
    /// The app versions it is for (a range such as `>=2.1 <3`); nil for every version.
    public var version: String?
    /// When it leaves the feed (RFC 3339); nil for the notification's `expires_at`, else the
    /// default lifetime.
    public var expiresAt: String?

    enum CodingKeys: String, CodingKey {
        case regions, version
        case expiresAt = "expires_at"
    }

    public init(from decoder: any Decoder) throws {
        if let flag = try? decoder.singleValueContainer().decode(Bool.self) {
            guard flag else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "must be true or an object"))
            }
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        regions = try container.decodeIfPresent([String].self, forKey: .regions)
        version = try container.decodeIfPresent(String.self, forKey: .version)
        expiresAt = try container.decodeIfPresent(String.self, forKey: .expiresAt)
    }
}

extension Audience {
    enum CodingKeys: String, CodingKey {
        case all
        case tierIDs = "tier_ids"
        case groupIDs = "group_ids"
        case userIDs = "user_ids"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            all: try container.decodeIfPresent(Bool.self, forKey: .all) ?? false,
            tierIDs: try container.decodeIfPresent([LenientID].self, forKey: .tierIDs)?.map(\.value) ?? [],
            groupIDs: try container.decodeIfPresent([LenientID].self, forKey: .groupIDs)?.map(\.value) ?? [],
            userIDs: try container.decodeIfPresent([String].self, forKey: .userIDs) ?? []
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if all { try container.encode(true, forKey: .all) }
        if !tierIDs.isEmpty { try container.encode(tierIDs, forKey: .tierIDs) }
        if !groupIDs.isEmpty { try container.encode(groupIDs, forKey: .groupIDs) }
        if !userIDs.isEmpty { try container.encode(userIDs, forKey: .userIDs) }
    }
}

/// A tier or group id: a string, or an integer taken as its decimal text (docs/content.md).
public struct LenientID: Decodable, Sendable, Equatable {
    /// The id as text.
    public var value: String

    /// An id given as text.
    public init(_ value: String) { self.value = value }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            value = text
        } else if let number = try? container.decode(Int64.self) {
            value = String(number)
        } else {
            throw DecodingError.typeMismatch(String.self, .init(codingPath: decoder.codingPath, debugDescription: "expected a string or an integer"))
        }
    }
}

/// An integer field read as a number first: Foundation reports a fractional or huge number for
/// an `Int` without the field's path (or with an error of its own), so this names the field.
public struct WholeNumber: Decodable, Sendable {
    /// The number read.
    public var value: Int

    public init(from decoder: any Decoder) throws {
        let number = try decoder.singleValueContainer().decode(Double.self)
        guard number.rounded() == number, let value = Int(exactly: number) else {
            throw DecodingError.typeMismatch(Int.self, .init(codingPath: decoder.codingPath, debugDescription: "not an integer"))
        }
        self.value = value
    }
}
