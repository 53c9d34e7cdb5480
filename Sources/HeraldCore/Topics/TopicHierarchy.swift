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
    /// A visible push.
    case alert = "Alert"
    /// Silent data; the message waits in history.
    case information = "Information"

    /// The router's distribution for it: Alert is visible, Information silent.
    public var distribution: Distribution { self == .alert ? .alert : .information }
}

/// `channelId-areaId-subjectId`.
public struct TopicKey: Hashable, Sendable, CustomStringConvertible {
    /// The channel's id.
    public var channelID: ObjectID
    /// The area's id, within the channel.
    public var areaID: ObjectID
    /// The subject's id, within the area.
    public var subjectID: ObjectID

    /// A key from its three ids.
    public init(channelID: ObjectID, areaID: ObjectID, subjectID: ObjectID) {
        self.channelID = channelID
        self.areaID = areaID
        self.subjectID = subjectID
    }

    /// Parses `channelId-areaId-subjectId`; nil unless each part is an id.
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
    /// Who is subscribed.
    public var level: SubscriptionLevel
    /// How its messages are pushed.
    public var distribution: TopicDistribution

    /// Opt-in, Alert, by default.
    public init(level: SubscriptionLevel = .optIn, distribution: TopicDistribution = .alert) {
        self.level = level
        self.distribution = distribution
    }
}

/// A subject: what users subscribe to and communicators post to (docs/topics.md).
public struct Subject: Sendable, Equatable, Codable {
    /// The subject's id.
    public var id: ObjectID
    /// Its name, as apps list it.
    public var name: String
    /// Its description.
    public var desc: String
    /// Kept and returned as the apps wrote it; Herald does not read it.
    public var access: [String]
    /// Kept and returned as the apps wrote them; Herald does not read them.
    public var tags: [String]
    /// `channelId-areaId-subjectId` (``TopicKey``), the name messages and provider-side topics use.
    public var topicKey: String
    /// Its subscription level and distribution.
    public var opt: SubjectOptions

    enum CodingKeys: String, CodingKey {
        case id, name, desc, access, tags, opt
        case topicKey = "topic_key"
    }

    /// A subject as stored.
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

/// An area of a channel, holding subjects.
public struct Area: Sendable, Equatable, Codable {
    /// The area's id.
    public var id: ObjectID
    /// Its name.
    public var name: String
    /// Its description.
    public var desc: String
    /// Kept and returned as the apps wrote it; Herald does not read it.
    public var access: [String]
    /// Its subjects.
    public var subjects: [Subject]

    /// An area as stored.
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
    /// The channel's id (`_id` in JSON).
    public var id: ObjectID
    /// Its name.
    public var name: String
    /// Its description.
    public var desc: String
    /// Kept and returned as the apps wrote it; Herald does not read it.
    public var access: [String]
    /// Its areas.
    public var areas: [Area]

    enum CodingKeys: String, CodingKey {
        case id = "_id"
        case name, desc, access, areas
    }

    /// A channel as stored.
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
    /// The channel's name.
    public var channel: String
    /// The area's name.
    public var area: String
    /// The subject.
    public var subject: Subject

    /// An entry from its names and subject.
    public init(channel: String, area: String, subject: Subject) {
        self.channel = channel
        self.area = area
        self.subject = subject
    }
}
