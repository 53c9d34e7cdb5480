import Foundation
import HeraldCore
import HeraldHTTP
import Hummingbird

/// The portal's "why?" page (docs/portal.md): one recipient's explanation of an accepted
/// notification, as `GET /api/notifications/{id}/recipients/{user_id}` gives it, linked from
/// each user's delivery on the status page.
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
        guard let id = ObjectID(text), (try? UserID.validate(userID, field: "user")) != nil,
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
            let channel = service.sinks[decision.sink].map { service.sinks.channel(of: $0) }
            return [
                "sink": decision.sink, "channel": channel?.description ?? "—",
                "chosen": decision.used ? "yes" : "no",
                "reasons": decision.reasons.map { reason in
                    ["step": reason.step, "value": reason.value ? "for" : "against", "source": reason.source, "detail": reason.verdict.reason]
                },
            ]
        }
        values["deliveries"] = deliveries.map { d -> [String: Any] in
            ["sink": d.sink, "state": d.state.rawValue, "attempts": d.attempts, "error": d.lastError ?? "", "updated": Timestamp.format(d.updatedAt)]
        }
        return pages.page("why", values, session: session)
    }
}
