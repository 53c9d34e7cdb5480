public import Foundation
public import HeraldCore

/// The Message Hub's channel → area → subject hierarchy and users' subscriptions to its
/// subjects (docs/topics.md), as the topics module's routes read and write them. Routing a
/// notification to a topic needs only ``TopicLookup``, which every store implements.
public protocol TopicStore: TopicLookup {
    /// Every channel with its areas and subjects, in creation order.
    func channels() async throws -> [Channel]
    func createChannel(_ channel: Channel) async throws
    /// - Returns: false when the channel does not exist.
    func createArea(_ area: Area, channelID: ObjectID) async throws -> Bool
    /// - Returns: the area after the change, or nil when channel or area does not exist.
    func updateArea(channelID: ObjectID, areaID: ObjectID, _ fields: HierarchyFields) async throws -> Area?
    /// Deletes the area, its subjects and their subscriptions. - Returns: false when not found.
    func deleteArea(channelID: ObjectID, areaID: ObjectID) async throws -> Bool
    /// - Returns: false when channel or area does not exist.
    func createSubject(_ subject: Subject, channelID: ObjectID, areaID: ObjectID) async throws -> Bool
    /// - Returns: the subject after the change, or nil when it does not exist in that area.
    func updateSubject(channelID: ObjectID, areaID: ObjectID, subjectID: ObjectID, _ fields: HierarchyFields) async throws -> Subject?
    /// Deletes the subject and its subscriptions. - Returns: false when not found.
    func deleteSubject(channelID: ObjectID, areaID: ObjectID, subjectID: ObjectID) async throws -> Bool
    /// Every subject, with whether the user is subscribed (Forced subjects always are).
    func subscriptions(userID: String) async throws -> [SubscriptionStatus]
    /// Subscribes the user (giving them a row when they have none); a second time changes nothing.
    func subscribe(userID: String, topicKey: String, at date: Date) async throws
    func unsubscribe(userID: String, topicKey: String) async throws
}

/// One row of `GET /api/notifications/subscriptions`.
public struct SubscriptionStatus: Sendable, Equatable {
    /// The subject, with its channel and area names.
    public var entry: SubjectEntry
    /// Whether the user is subscribed.
    public var subscribed: Bool

    /// A row as listed.
    public init(entry: SubjectEntry, subscribed: Bool) {
        self.entry = entry
        self.subscribed = subscribed
    }
}

/// A name/desc pair as the hierarchy routes take it; PUT replaces only the fields given.
public struct HierarchyFields: Sendable, Equatable {
    /// The new name, when given.
    public var name: String?
    /// The new description, when given.
    public var desc: String?
    /// A subject's new options, when given.
    public var opt: SubjectOptions?

    /// Fields as given; nil ones stay as they are.
    public init(name: String? = nil, desc: String? = nil, opt: SubjectOptions? = nil) {
        self.name = name
        self.desc = desc
        self.opt = opt
    }
}
