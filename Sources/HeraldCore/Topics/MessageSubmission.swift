/// The body of `POST /message`: a Message Hub message for one subject's subscribers.
public struct MessageSubmission: Decodable, Sendable {
    /// `title`: the push title.
    public var title: String?
    /// `desc`: the push text; may be empty only for Information.
    public var desc: String?
    /// `message`: the full text the app shows when opened.
    public var message: String?
    /// `topic_key`: the subject posted to.
    public var topicKey: String?
    /// `distribution`: `Alert` or `Information`, required.
    public var distribution: String?

    /// The wire names this body accepts; any other field is refused.
    public static let fieldNames: Set<String> = ["title", "desc", "message", "topic_key", "distribution"]
    /// Longest `title`, in code points.
    public static let maxTitleLength = NotificationValidator.maxTitleLength
    /// Longest `desc` and `message`, in code points.
    public static let maxMessageLength = NotificationValidator.maxBodyLength

    enum CodingKeys: String, CodingKey {
        case title, desc, message, distribution
        case topicKey = "topic_key"
    }

    /// A submission with the given fields.
    public init(title: String?, desc: String?, message: String?, topicKey: String?, distribution: String?) {
        self.title = title
        self.desc = desc
        self.message = message
        self.topicKey = topicKey
        self.distribution = distribution
    }

    /// Checks the fields that need no storage; the topic is checked against the hierarchy later.
    public func validated() throws -> (title: String, desc: String, message: String, topicKey: String, distribution: TopicDistribution) {
        guard let title else { throw HeraldError.missingField("title") }
        guard !title.isEmpty else { throw HeraldError.invalidField("title", "must not be empty") }
        guard title.unicodeScalars.count <= Self.maxTitleLength else {
            throw HeraldError.invalidField("title", "must be at most \(Self.maxTitleLength) characters")
        }
        guard let topicKey else { throw HeraldError.missingField("topic_key") }
        guard let text = distribution else { throw HeraldError.missingField("distribution") }
        guard let distribution = TopicDistribution(rawValue: text) else {
            throw HeraldError.invalidField("distribution", "must be \"Alert\" or \"Information\"")
        }
        let desc = self.desc ?? ""
        if desc.isEmpty && distribution == .alert {
            throw HeraldError.invalidField("desc", "may be empty only for Information messages: an Alert shows it as the push text")
        }
        let message = self.message ?? ""
        guard message.unicodeScalars.count <= Self.maxMessageLength, desc.unicodeScalars.count <= Self.maxMessageLength else {
            throw HeraldError.invalidField(
                message.unicodeScalars.count > Self.maxMessageLength ? "message" : "desc", "must be at most \(Self.maxMessageLength) characters")
        }
        return (title, desc, message, topicKey, distribution)
    }
}
