/// How a subject's subscription works (docs/topics.md).
public enum SubscriptionLevel: String, Sendable, Codable, CaseIterable {
    /// Every user, always; cannot be removed.
    case forced = "Forced"
    /// Subscribed at a user's first device registration; can be removed.
    case recommended = "Recommended"
    /// Opt-in.
    case optIn = ""
}

/// A subject's default distribution, written as Message Hub writes it.
public enum TopicDistribution: String, Sendable, Codable, CaseIterable {
    case alert = "Alert"
    case information = "Information"

    public var distribution: Distribution { self == .alert ? .alert : .information }
}

/// `channelId-areaId-subjectId`.
public struct TopicKey: Hashable, Sendable, CustomStringConvertible {
    public var channelID: ObjectID
    public var areaID: ObjectID
    public var subjectID: ObjectID

    public init(channelID: ObjectID, areaID: ObjectID, subjectID: ObjectID) {
        self.channelID = channelID
        self.areaID = areaID
        self.subjectID = subjectID
    }

    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, let channel = ObjectID(String(parts[0])), let area = ObjectID(String(parts[1])),
            let subject = ObjectID(String(parts[2]))
        else { return nil }
        self.init(channelID: channel, areaID: area, subjectID: subject)
    }

    public var description: String { "\(channelID)-\(areaID)-\(subjectID)" }
}

/// A subject's subscription options: `{"level": "Forced", "distribution": "Alert"}`.
public struct SubjectOptions: Sendable, Equatable, Codable {
    public var level: SubscriptionLevel
    public var distribution: TopicDistribution

    public init(level: SubscriptionLevel = .optIn, distribution: TopicDistribution = .alert) {
        self.level = level
        self.distribution = distribution
    }
}

public struct Subject: Sendable, Equatable, Codable {
    public var id: ObjectID
    public var name: String
    public var desc: String
    public var access: [String]
    public var tags: [String]
    public var topicKey: String
    public var opt: SubjectOptions

    enum CodingKeys: String, CodingKey {
        case id, name, desc, access, tags, opt
        case topicKey = "topic_key"
    }

    public init(id: ObjectID, name: String, desc: String, access: [String] = [], tags: [String] = [], topicKey: String, opt: SubjectOptions) {
        self.id = id
        self.name = name
        self.desc = desc
        self.access = access
        self.tags = tags
        self.topicKey = topicKey
        self.opt = opt
    }
}

public struct Area: Sendable, Equatable, Codable {
    public var id: ObjectID
    public var name: String
    public var desc: String
    public var access: [String]
    public var subjects: [Subject]

    public init(id: ObjectID, name: String, desc: String, access: [String] = [], subjects: [Subject] = []) {
        self.id = id
        self.name = name
        self.desc = desc
        self.access = access
        self.subjects = subjects
    }
}

/// A channel document as Message Hub apps read it (`_id`, nested areas and subjects).
public struct Channel: Sendable, Equatable, Codable {
    public var id: ObjectID
    public var name: String
    public var desc: String
    public var access: [String]
    public var areas: [Area]

    enum CodingKeys: String, CodingKey {
        case id = "_id"
        case name, desc, access, areas
    }

    public init(id: ObjectID, name: String, desc: String, access: [String] = [], areas: [Area] = []) {
        self.id = id
        self.name = name
        self.desc = desc
        self.access = access
        self.areas = areas
    }
}

/// A subject with the names of its channel and area, as subscriptions and messages need it.
public struct SubjectEntry: Sendable, Equatable {
    public var channel: String
    public var area: String
    public var subject: Subject

    public init(channel: String, area: String, subject: Subject) {
        self.channel = channel
        self.area = area
        self.subject = subject
    }
}

/// One row of `GET /api/notifications/subscriptions`.
public struct SubscriptionStatus: Sendable, Equatable {
    public var entry: SubjectEntry
    public var subscribed: Bool

    public init(entry: SubjectEntry, subscribed: Bool) {
        self.entry = entry
        self.subscribed = subscribed
    }
}

/// A name/desc pair as the hierarchy routes take it; PUT replaces only the fields given.
public struct HierarchyFields: Sendable, Equatable {
    public var name: String?
    public var desc: String?
    public var opt: SubjectOptions?

    public init(name: String? = nil, desc: String? = nil, opt: SubjectOptions? = nil) {
        self.name = name
        self.desc = desc
        self.opt = opt
    }
}
