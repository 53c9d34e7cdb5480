import Foundation
import HeraldCore
import HeraldHTTP
import Hummingbird

/// The portal's "why?" page (docs/portal.md): one recipient's explanation of an accepted
/// notification, as `GET /api/notifications/{id}/recipients/{user_id}` gives it, linked from
/// each user's delivery on the status page, for admins and the communicator who sent it.
extension PortalRoutes {
    /// The link to a recipient's explanation, its query escaped (user ids may hold `&` or `#`).
    static func whyLink(id: String, userID: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&+=#")
        return "/portal/why?id=\(id)&user=\(userID.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
    }

    func whyPage(_ request: Request, _ session: PortalSession) async throws -> Response {
        let text = (try request.queryText("id") ?? "").trimmingCharacters(in: .whitespaces)
        let userID = try request.queryText("user") ?? ""
        var values: [String: Any] = ["id": text, "user": userID]
        guard let id = ObjectID(text), (try? UserID.validate(userID, field: "user")) != nil, try await maySee(id, session),
            let (explanation, deliveries) = try await service.explainRecipient(of: id, userID: userID)
        else {
            values["notFound"] = true
            return pages.page("why", values, session: session, status: .notFound)
        }
        let notification = explanation.notification
        values["notification"] = [
            "title": notification.title, "type": notification.type, "time": Timestamp.format(notification.timestamp),
            "recipient": explanation.recipient ? "yes" : "no", "distribution": explanation.distribution.rawValue,
        ]
        values["sinks"] = explanation.decisions.map { decision -> [String: Any] in
            [
                "sink": decision.sink, "channel": decision.channel.description,
                "chosen": decision.used ? "yes" : "no",
                "reasons": decision.reasons.map { reason in
                    ["step": reason.step, "value": reason.value ? "for" : "against", "source": reason.source, "detail": reason.verdict.reason]
                },
            ]
        }
        if let basis = explanation.basis { values["decidedWith"] = Self.decidedWith(basis) }
        values["deliveries"] = deliveries.map { d -> [String: Any] in
            ["sink": d.sink, "state": d.state.rawValue, "attempts": d.attempts, "error": d.lastError ?? "", "updated": Timestamp.format(d.updatedAt)]
        }
        return pages.page("why", values, session: session)
    }

    /// Whether `session` may see notification `id`'s status and explanations: an admin every
    /// notification, a communicator the Message Hub messages it sent (the archive's sender).
    /// Anything else is answered as an unknown id, so a communicator learns nothing of others'.
    func maySee(_ id: ObjectID, _ session: PortalSession) async throws -> Bool {
        if session.isAdmin { return true }
        return try await store.archivedMessage(msiKey: id.hex)?.sender == session.role.sender(keyName: session.keyName)
    }

    /// What the explanation was decided with, in words.
    static func decidedWith(_ basis: RoutingExplanation.Basis) -> String {
        let routing =
            basis.routingInputs.map { "the routing configuration it was accepted under (\($0))" }
            ?? "today's routing configuration (none was recorded at its accept)"
        let settings: String =
            switch basis.settings {
            case nil: "the default settings (the user had saved none by then)"
            case .some(let version):
                version.savedAt.map { "the user's settings saved \(Timestamp.format($0))" } ?? "the user's settings saved before versions were kept"
            }
        return "Decided with \(routing) and \(settings); devices as registered now."
    }
}
