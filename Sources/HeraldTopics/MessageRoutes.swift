import Foundation
public import HeraldCore
public import HeraldHTTP
public import Hummingbird

/// Message Hub messages: post to a subject's subscribers, read the archive (openapi.yaml).
public struct MessageRoutes: Sendable {
    let service: NotificationService
    let store: any NotificationStore

    public init(service: NotificationService, store: any NotificationStore) {
        (self.service, self.store) = (service, store)
    }

    public func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .post, "/message", post)
        table.add(router, .get, "/message", archive)
    }

    struct Item: Encodable {
        /// The archive entry's id, as the Message Hub apps read it; the same as `msi_key`.
        var _id: String
        var msi_key: String
        var topic_key: String
        var title: String
        var desc: String
        var message: String
        var distribution: String
        var timestamp: Int64
        var sender: String

        init(_ m: ArchivedMessage) {
            _id = m.msiKey
            msi_key = m.msiKey
            topic_key = m.topicKey
            title = m.title
            desc = m.desc
            message = m.message
            distribution = m.distribution.rawValue
            timestamp = m.timestamp
            sender = m.sender
        }
    }

    @Sendable func post(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let key = try context.requireKey([.communicator, .admin])
        let submission = try await JSONBody.decode(MessageSubmission.self, from: request, context: context, knownFields: MessageSubmission.fieldNames)
        let archived = try await service.postMessage(submission, sender: key.role.sender(keyName: key.name))
        context.logFields.set("notification_id", archived.msiKey)
        struct Body: Encodable {
            var msi_key: String
            var timestamp: Int64
        }
        return try JSONBody.response(Body(msi_key: archived.msiKey, timestamp: archived.timestamp), status: .created)
    }

    @Sendable func archive(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.communicator, .admin])
        let query = try PageQuery(request)
        let topicKey = try request.nonEmptyQueryText("topic_key")
        let page = try await store.messages(topicKey: topicKey, limit: query.limit, before: query.before)
        struct Body: Encodable {
            var messages: [Item]
            var next: Nullable<String>
        }
        return try JSONBody.response(Body(messages: page.messages.map(Item.init), next: Nullable(page.next)))
    }
}
