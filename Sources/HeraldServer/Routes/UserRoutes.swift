import Foundation
import Hummingbird
import HeraldCore

/// The user-facing endpoints existing mobile apps call (SPEC §3), acting for one user.
struct UserRoutes {
    let store: any HeraldStorage
    let types: NotificationTypes
    let ids: ObjectIDGenerator

    static let maxReadIDs = 1_000

    func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .post, "/api/notifications/register", registerDevice)
        table.add(router, .delete, "/api/notifications/register", unregisterDevice)
        table.add(router, .get, "/api/notifications/settings", getSettings)
        table.add(router, .patch, "/api/notifications/settings", patchSettings)
        table.add(router, .get, "/api/notifications/history", history)
        table.add(router, .post, "/api/notifications/read", markRead)
    }

    @Sendable func registerDevice(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let registration = try await JSONBody.decode(DeviceRegistration.self, from: request, context: context)
        let token = try registration.validatedToken()
        let now = Date()
        let device = try await store.registerDevice(userID: userID, token: token, registration: registration, newID: ids.next(at: now), at: now)
        struct Body: Encodable {
            var device_id: String
            var fcm_token: String
        }
        return try JSONBody.response(Body(device_id: device.id.hex, fcm_token: device.fcmToken))
    }

    @Sendable func unregisterDevice(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        struct Body: Decodable { var fcm_token: String? }
        let body = try await JSONBody.decode(Body.self, from: request, context: context)
        guard let token = body.fcm_token else { throw HeraldError.missingField("fcm_token") }
        try DeviceRegistration.validateToken(token)
        // Idempotent: removing a token that is already gone is not an error.
        _ = try await store.unregisterDevice(userID: userID, token: token, at: Date())
        return Response(status: .noContent)
    }

    @Sendable func getSettings(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        return try JSONBody.response(try await store.settings(userID: userID))
    }

    @Sendable func patchSettings(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let patch = try await JSONBody.decode(SettingsPatch.self, from: request, context: context, knownFields: SettingsPatch.fieldNames)
        let types = self.types
        // A bad value throws inside the transaction, which rolls back: nothing changes.
        let settings = try await store.updateSettings(userID: userID) { settings in
            try patch.apply(to: &settings, types: types)
        }
        return try JSONBody.response(settings)
    }

    @Sendable func history(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let query = try PageQuery(request)
        let page = try await store.history(userID: userID, limit: query.limit, before: query.before)
        return try JSONBody.response(HistoryResponse(page))
    }

    @Sendable func markRead(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        struct Body: Decodable { var ids: [String]? }
        let body = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: ["ids"])
        guard let texts = body.ids else { throw HeraldError.missingField("ids") }
        guard texts.count <= Self.maxReadIDs else { throw HeraldError.invalidField("ids", "must have at most \(Self.maxReadIDs) entries") }
        let ids = try texts.enumerated().map { index, text in
            guard let id = ObjectID(text) else { throw HeraldError.invalidField("ids[\(index)]", "must be a 24-character lowercase hex notification id") }
            return id
        }
        struct Unread: Encodable { var unread: Int }
        return try JSONBody.response(Unread(unread: try await store.markRead(userID: userID, ids: ids)))
    }
}

/// `{"history":[…],"next":…}` with items in exactly the shape apps parse.
struct HistoryResponse: Encodable {
    struct Item: Encodable {
        struct Content: Encodable {
            var title: String
            var body: String
        }
        struct Data: Encodable {
            var id: String
            var timestamp: String
            var type: String
            var url: Nullable<String>  // null stays null, never absent
        }
        var notification: Content
        var data: Data
        var read: Bool
    }

    var history: [Item]
    var next: Nullable<String>

    init(_ page: HistoryPage) {
        history = page.items.map { item in
            Item(
                notification: .init(title: item.title, body: item.body),
                data: .init(id: item.notificationID.hex, timestamp: Timestamp.format(item.timestamp), type: item.type, url: Nullable(item.url)),
                read: item.read
            )
        }
        next = Nullable(page.next)
    }
}
