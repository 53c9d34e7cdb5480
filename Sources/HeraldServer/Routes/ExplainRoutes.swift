import Foundation
import HeraldCore
import HeraldHTTP
import Hummingbird

/// `POST /api/notifications/explain` (docs/routing.md, "Explaining a decision"): a send's body
/// plus `user_id`; nothing is stored or sent. Every configured sink with whether it would reach
/// the user and the ordered reasons why, the state of its circuit and its health added, and the
/// user's devices with the sink that would serve each. `GET /api/notifications/{id}/recipients/{user_id}`
/// explains an accepted notification the same way, with the user's deliveries and their outcomes.
struct ExplainRoutes {
    let service: NotificationService
    let circuits: CircuitBreakers
    /// `devices.max_per_user`, for the `device_limit` reason.
    let maxDevicesPerUser: Int

    func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .post, "/api/notifications/explain", explain)
        table.add(router, .get, "/api/notifications/{id}/recipients/{user_id}", recipient)
    }

    @Sendable func recipient(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        let text = try context.parameters.require("id")
        let raw = try context.parameters.require("user_id")
        guard let userID = raw.removingPercentEncoding else {
            throw HeraldError.invalidField("user_id", "must be percent-encoded UTF-8 (a '%' itself as %25)")
        }
        try UserID.validate(userID, field: "user_id")
        guard let id = ObjectID(text), let found = try await service.explainRecipient(of: id, userID: userID) else {
            throw HeraldError.notFound("notification '\(text)'")
        }
        var answer = await answer(found.explanation, deliveries: found.deliveries)
        answer.notification_id = id.hex
        answer.deliveries = found.deliveries.map(ExplainedDelivery.init)
        return try JSONBody.response(answer)
    }

    /// A send's body and the explanation's own field, read in one parse.
    struct Body: Decodable {
        var submission: NotificationSubmission
        var userID: String?

        enum CodingKeys: String, CodingKey { case userID = "user_id" }

        init(from decoder: any Decoder) throws {
            submission = try NotificationSubmission(from: decoder)
            userID = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(String.self, forKey: .userID)
        }
    }

    @Sendable func explain(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.backend, .admin])
        let body = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: NotificationSubmission.fieldNames.union(["user_id"]))
        guard let userID = body.userID else { throw HeraldError.missingField("user_id") }
        return try JSONBody.response(await answer(try await service.explain(body.submission, userID: userID)))
    }

    /// - Parameter deliveries: an accepted notification's deliveries to the user.
    func answer(_ explanation: RoutingExplanation, deliveries: [DeliveryRecord] = []) async -> ExplainAnswer {
        var sinks: [ExplainedSink] = []
        for decision in explanation.decisions {
            var reasons = decision.reasons.map(ExplainedReason.init)
            let sinkDeliveries = deliveries.filter { $0.sink == decision.sink }
            if decision.channel == .push, decision.used || !sinkDeliveries.isEmpty {
                reasons += deviceLimit(explanation, deliveries: sinkDeliveries)
            }
            // The engine's view: a chosen sink whose circuit is open or that reports itself
            // degraded still gets the delivery, which waits (docs/durability.md). A sink an
            // accepted notification's configuration had and this one has not has neither.
            if decision.used, let sink = service.sinks[decision.sink] {
                if circuits.state(of: sink.name).isOpen {
                    reasons.append(
                        ExplainedReason(step: "circuit_open", value: true, source: "sink", detail: "the delivery waits until the provider answers again"))
                }
                if case .degraded(let why) = await sink.health() {
                    // A provider's words: bounded as a delivery's are (SinkHealthReport).
                    reasons.append(ExplainedReason(step: "sink_degraded", value: true, source: "sink", detail: FailureReason.storable(why)))
                }
            }
            sinks.append(
                ExplainedSink(
                    sink: decision.sink, channel: decision.channel.name, user_facing: decision.channel.userFacing, chosen: decision.used,
                    reasons: reasons, devices: decision.devices.map(\.hex)))
        }
        let devices = explanation.devices.map { route in
            ExplainedDevice(device_id: route.device.id.hex, provider: route.device.provider, sink: Nullable(route.sink))
        }
        return ExplainAnswer(
            user_id: explanation.userID, type: explanation.notification.type, distribution: explanation.distribution.rawValue,
            recipient: explanation.recipient, sinks: sinks, devices: devices, decided_with: explanation.basis.map(DecidedWith.init))
    }
}

extension ExplainRoutes {
    /// `device_limit`: a push that failed because its device was removed to keep the user's
    /// devices within `devices.max_per_user` (a later registration); else, for a user at the
    /// limit, that registering another device removes the oldest.
    func deviceLimit(_ explanation: RoutingExplanation, deliveries: [DeliveryRecord]) -> [ExplainedReason] {
        let removed = deliveries.filter { $0.lastError.map(Device.wasRemovedOverLimit) ?? false }.count
        if removed > 0 {
            return [
                ExplainedReason(
                    step: "device_limit", value: false, source: "operator",
                    detail:
                        "\(removed) of the user's devices \(removed == 1 ? "was" : "were") removed before the push went out: registering another put them over the limit of \(maxDevicesPerUser) (devices.max_per_user)"
                )
            ]
        }
        guard explanation.devices.count >= maxDevicesPerUser else { return [] }
        return [
            ExplainedReason(
                step: "device_limit", value: true, source: "operator",
                detail:
                    "the user has \(explanation.devices.count) devices, the limit (devices.max_per_user): registering another removes the oldest, and its pending pushes fail"
            )
        ]
    }
}

struct ExplainAnswer: Encodable {
    var user_id: String
    var type: String
    var distribution: String
    var recipient: Bool
    var sinks: [ExplainedSink]
    var devices: [ExplainedDevice]
    /// For an accepted notification: what it was decided with.
    var decided_with: DecidedWith?
    /// For an accepted notification: its id, and the user's deliveries with their outcomes.
    var notification_id: String?
    var deliveries: [ExplainedDelivery]?
}

/// An accepted notification's ``RoutingExplanation/Basis``: the routing inputs it names (null
/// when accepted before Herald recorded them), and which settings of the user decided.
struct DecidedWith: Encodable {
    var routing_inputs: Nullable<String>
    /// `saved` (at `settings_saved_at`), `defaults` (the user had saved none by then), or
    /// `unversioned` (saved before this database kept versions).
    var settings: String
    var settings_saved_at: Nullable<String>

    init(_ basis: RoutingExplanation.Basis) {
        routing_inputs = Nullable(basis.routingInputs)
        switch basis.settings {
        case nil: settings = "defaults"
        case .some(let version) where version.savedAt == nil: settings = "unversioned"
        case .some: settings = "saved"
        }
        settings_saved_at = Nullable(basis.settings?.savedAt.map(Timestamp.format))
    }
}

/// One delivery of an accepted notification to the user, as it stands.
struct ExplainedDelivery: Encodable {
    var id: Int64
    var sink: String
    var device_id: Nullable<String>
    var distribution: String
    var state: String
    var attempts: Int
    var last_error: Nullable<String>
    var updated_at: String

    init(_ record: DeliveryRecord) {
        id = record.id
        sink = record.sink
        device_id = Nullable(record.deviceID?.hex)
        distribution = record.distribution.rawValue
        state = record.state.rawValue
        attempts = record.attempts
        last_error = Nullable(record.lastError)
        updated_at = Timestamp.format(record.updatedAt)
    }
}

struct ExplainedSink: Encodable {
    var sink: String
    var channel: String
    var user_facing: Bool
    var chosen: Bool
    var reasons: [ExplainedReason]
    /// For a push sink chosen: the devices it would send to.
    var devices: [String]
}

/// One reason: which rule (`step`), whether it speaks for the sink (`value`), whose choice it
/// was (`source`), in words (`detail`).
struct ExplainedReason: Encodable {
    var step: String
    var value: Bool
    var source: String
    var detail: String

    init(step: String, value: Bool, source: String, detail: String) {
        (self.step, self.value, self.source, self.detail) = (step, value, source, detail)
    }

    init(_ reason: RoutingDecision.Reason) {
        self.init(step: reason.step, value: reason.value, source: reason.source, detail: reason.verdict.reason)
    }
}

struct ExplainedDevice: Encodable {
    var device_id: String
    var provider: String
    var sink: Nullable<String>
}
