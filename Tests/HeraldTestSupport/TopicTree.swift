import Foundation
import HeraldCore
import HeraldStore
import HeraldTopics

/// One channel with one area holding a Forced and an opt-in subject: the hierarchy topic tests
/// start from.
public struct TopicTree: Sendable {
    public var channel: Channel
    public var area: Area
    public var forced: Subject
    public var optIn: Subject

    /// Creates the tree in the topics module's tables of `database`.
    public static func make(in database: any SharedSQLDatabase, ids: ObjectIDGenerator, distribution: TopicDistribution = .alert) async throws -> TopicTree {
        try await make(in: SharedTopicStore(database: database), ids: ids, distribution: distribution)
    }

    /// Creates the tree in `store`. - Throws: when a level cannot be created.
    public static func make(in store: any TopicStore, ids: ObjectIDGenerator, distribution: TopicDistribution = .alert) async throws -> TopicTree {
        let channel = Channel(id: ids.next(), name: "c", desc: "cd")
        let area = Area(id: ids.next(), name: "a", desc: "ad")
        try await store.createChannel(channel)
        guard try await store.createArea(area, channelID: channel.id) else { throw HeraldError.notFound("area") }
        func subject(_ name: String, _ level: SubscriptionLevel) async throws -> Subject {
            let id = ids.next()
            let subject = Subject(
                id: id, name: name, desc: "", topicKey: TopicKey(channelID: channel.id, areaID: area.id, subjectID: id).description,
                opt: .init(level: level, distribution: distribution)
            )
            guard try await store.createSubject(subject, channelID: channel.id, areaID: area.id) else { throw HeraldError.notFound("subject") }
            return subject
        }
        return TopicTree(channel: channel, area: area, forced: try await subject("f", .forced), optIn: try await subject("o", .optIn))
    }
}

extension SharedSQLDatabase {
    /// Subscribes the user through the topics module's store on this database, as test setup
    /// does before a fan-out.
    public func subscribe(userID: String, topicKey: String, at date: Date) async throws {
        try await SharedTopicStore(database: self).subscribe(userID: userID, topicKey: topicKey, at: date)
    }
}
