import Foundation
import HeraldCore
import HeraldHTTP
import HeraldInbox
import Hummingbird
import Logging

/// The user-facing endpoints existing mobile apps call (openapi.yaml), acting for one user.
struct UserRoutes {
    let store: any (UserStore & HistoryStore)
    /// The inbox's marks and filtered reads (docs/inbox.md).
    let inbox: InboxRoutes
    let router: NotificationRouter
    let sinks: SinkRegistry
    let ids: ObjectIDGenerator
    let maxDevicesPerUser: Int
    let metrics: HeraldMetrics
    let timestamps: TimestampStyle
    /// This process's deliveries accepted and waiting in memory for a worker
    /// (``NotificationService/handOff``): a device removed or moved takes its copies back.
    let handOff: DeliveryHandOff?
    let registrations: RegistrationLimiter
    /// The providers' own address forms (``SinkFactory/registrationForms``).
    let forms: [RegistrationForm]

    func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .post, "/api/notifications/register", registerDevice)
        table.add(router, .delete, "/api/notifications/register", unregisterDevice)
        table.add(router, .get, "/api/notifications/history", history)
        table.add(router, .post, "/api/notifications/read", markRead)
    }

    @Sendable func registerDevice(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        if let refusal = limitRegistrations(userID: userID, context: context) { return refusal }
        let body = try await JSONBody.decode(DeviceRegistrationBody.self, from: request, context: context)
        var registration = try body.registration(among: forms)
        // A device token names the installation that signed in: its devices tell apart.
        registration.installationID = context.deviceID
        if let sink = try pushSink(for: registration) {
            // The provider's sink checks the address and may fill in defaults.
            try sink.prepare(&registration)
            try await sink.admit(registration)
        } else {
            // No sink serves this provider yet: the device is kept, bounded, for when one is.
            try registration.validateCommonFields()
        }
        let now = Date()
        // One more than the limit: the least recently registered device goes.
        let registered = try await store.registerDevice(
            userID: userID, registration: registration, newID: ids.next(at: now), at: now, keepingAtMost: maxDevicesPerUser)
        let (device, evicted) = (registered.device, registered.evicted)
        // What was queued for the device's previous owner, or for a device evicted by the
        // limit, is failed in the store; the copies waiting in memory must not go either.
        let evictedIDs = Set(evicted.map(\.id))
        handOff?.withdraw { delivery in
            guard let target = delivery.recipient.device?.id else { return false }
            return evictedIDs.contains(target) || (target == device.id && !UserID.same(delivery.recipient.userID, userID))
        }
        if !evicted.isEmpty {
            context.logger.notice(
                "removed the least recently registered devices of a user over devices.max_per_user",
                metadata: ["device_ids": "\(evicted.map(\.id.hex).joined(separator: ","))", "limit": "\(maxDevicesPerUser)"]
            )
            metrics.devicesRemoved(reason: "limit", count: evicted.count)
        }
        return try JSONBody.response(DeviceRegistrationBody.answer(device, form: try body.form(among: forms)))
    }

    @Sendable func unregisterDevice(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        if let refusal = limitRegistrations(userID: userID, context: context) { return refusal }
        let body = try await JSONBody.decode(DeviceRegistrationBody.self, from: request, context: context)
        var registration = try body.registration(among: forms)
        if let sink = try pushSink(for: registration) { try sink.prepare(&registration) } else { try registration.validateCommonFields() }
        // Idempotent: removing a device that is already gone is not an error.
        let address = registration.address
        if try await store.unregisterDevice(userID: userID, provider: address.provider, addressKey: address.key, at: Date()) {
            handOff?.withdraw { delivery in
                guard let target = delivery.recipient.device?.address else { return false }
                return delivery.recipient.userID == userID && target.provider == address.provider && target.key == address.key
            }
        }
        return Response(status: .noContent)
    }

    /// 429 past `devices.registrations_per_user_per_minute` or `…_per_key_per_minute`.
    private func limitRegistrations(userID: String, context: HeraldRequestContext) -> Response? {
        guard let wait = registrations.take(userID: userID, caller: context.caller) else { return nil }
        return RateLimitedAnswer.response(wait: wait, "too many device registrations for this user or key; retry in \(wait) s (devices.registrations_per_*)")
    }

    /// The push sink that will serve the device, which validates it; nil when none is
    /// configured for its provider. A device that names a sink (`app`) must name one that serves
    /// its provider.
    private func pushSink(for registration: DeviceRegistration) throws -> (any NotificationSink)? {
        let provider = registration.address.provider
        guard let chosen = router.pushSink(provider: provider, app: registration.app) else {
            if registration.app != nil {
                let serving = router.sinks.filter { $0.capabilities.contains(.push) && $0.providers.contains(provider) }.map(\.name)
                throw HeraldError.invalidField(
                    "app",
                    "names no sink that serves provider '\(provider)' (\(serving.isEmpty ? "none is configured" : "configured: " + serving.joined(separator: ", ")))"
                )
            }
            return nil
        }
        return sinks[chosen.name]
    }

    @Sendable func history(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let query = try PageQuery(request)
        let (state, type) = try inbox.historyFilter(request)
        let page =
            state == nil && type == nil
            ? try await store.history(userID: userID, limit: query.limit, before: query.before)
            : try await inbox.store.items(userID: userID, state: state, type: type, limit: query.limit, before: query.before)
        return JSONBody.response(bytes: HistoryResponse(page, timestamps: timestamps, states: state != nil).json)
    }

    @Sendable func markRead(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        struct Body: Decodable { var ids: [String]? }
        let body = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: ["ids"])
        guard let texts = body.ids else { throw HeraldError.missingField("ids") }
        let ids = try InboxRoutes.notificationIDs(texts)
        struct Unread: Encodable { var unread: Int }
        // The inbox's read mark: the same counts, stream event and sync push.
        let result = try await inbox.mark(userID: userID, .ids(ids), .read, at: Date(), madeBy: context.deviceID)
        return try JSONBody.response(Unread(unread: result.counts.total.unread))
    }
}
