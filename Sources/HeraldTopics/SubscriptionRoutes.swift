import Foundation
public import HeraldCore
public import HeraldHTTP
public import Hummingbird

/// A user's subscriptions to subjects (docs/topics.md).
public struct SubscriptionRoutes: Sendable {
    let store: any TopicStore

    public init(store: any TopicStore) {
        self.store = store
    }

    public func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .get, "/api/notifications/subscriptions", list)
        table.add(router, .put, "/api/notifications/subscriptions/{topic_key}", subscribe)
        table.add(router, .delete, "/api/notifications/subscriptions/{topic_key}", unsubscribe)
    }

    struct Item: Encodable {
        var topic_key: String
        var channel: String
        var area: String
        var subject: String
        var level: String
        var subscribed: Bool
    }

    @Sendable func list(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let items = try await store.subscriptions(userID: userID).map { status in
            Item(
                topic_key: status.entry.subject.topicKey, channel: status.entry.channel, area: status.entry.area, subject: status.entry.subject.name,
                level: status.entry.subject.opt.level.rawValue, subscribed: status.subscribed
            )
        }
        return try JSONBody.response(items)
    }

    @Sendable func subscribe(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let entry = try await subject(context)
        if entry.subject.opt.level != .forced {
            try await store.subscribe(userID: userID, topicKey: entry.subject.topicKey, at: Date())
        }
        return Response(status: .noContent)
    }

    @Sendable func unsubscribe(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let entry = try await subject(context)
        guard entry.subject.opt.level != .forced else {
            throw HeraldError(.conflict, code: "forced_subscription", "'\(entry.subject.name)' is a Forced subject: every user stays subscribed")
        }
        try await store.unsubscribe(userID: userID, topicKey: entry.subject.topicKey)
        return Response(status: .noContent)
    }

    private func subject(_ context: HeraldRequestContext) async throws -> SubjectEntry {
        let key = try context.parameters.require("topic_key")
        guard let entry = try await store.subject(topicKey: key) else { throw HeraldError.notFound("topic '\(key)'") }
        return entry
    }
}
