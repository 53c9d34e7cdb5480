import Foundation
import HTTPTypes
import HeraldCore
import HeraldHTTP
import HeraldTopics
import Hummingbird

/// The admin pages: the hierarchy, the archive and delivery status.
extension PortalRoutes {
    // MARK: Hierarchy (admin)

    func channelsPage(_ session: PortalSession, error: String?, status: HTTPResponse.Status = .ok) async throws -> Response {
        let channels = try await topics.channels()
        func options(_ values: [(String, String)], selected: String) -> [[String: Any]] {
            values.map { ["value": $0.0, "label": $0.1, "selected": $0.0 == selected] }
        }
        let levels = [
            (SubscriptionLevel.forced.rawValue, "Forced"), (SubscriptionLevel.recommended.rawValue, "Recommended"),
            (SubscriptionLevel.optIn.rawValue, "Opt-in"),
        ]
        let distributions = [(TopicDistribution.alert.rawValue, "Alert (visible push)"), (TopicDistribution.information.rawValue, "Information (silent)")]
        let model: [[String: Any]] = channels.map { channel in
            [
                "id": channel.id.hex, "name": channel.name, "desc": channel.desc,
                "areas": channel.areas.map { area -> [String: Any] in
                    [
                        "id": area.id.hex, "channel": channel.id.hex, "name": area.name, "desc": area.desc, "count": area.subjects.count,
                        "subjects": area.subjects.map { subject -> [String: Any] in
                            [
                                "id": subject.id.hex, "area": area.id.hex, "channel": channel.id.hex, "name": subject.name, "desc": subject.desc,
                                "topicKey": subject.topicKey, "levels": options(levels, selected: subject.opt.level.rawValue),
                                "distributions": options(distributions, selected: subject.opt.distribution.rawValue),
                            ]
                        },
                        "levels": options(levels, selected: SubscriptionLevel.optIn.rawValue),
                        "distributions": options(distributions, selected: TopicDistribution.alert.rawValue),
                    ]
                },
            ]
        }
        var values: [String: Any] = ["channels": model, "hasChannels": !model.isEmpty]
        if let error { values["error"] = error }
        return pages.page("channels", values, session: session, status: status)
    }

    /// One form per change; each redirects back to the hierarchy (or shows it with the error).
    func changeHierarchy(_ action: String, _ session: PortalSession, _ form: PortalForm) async throws -> Response {
        func id(_ name: String) throws -> ObjectID {
            guard let text = form[name], let id = ObjectID(text) else { throw HeraldError.invalidField(name, "is not an id") }
            return id
        }
        var opt: TopicRoutes.Body.Options?
        if form["level"] != nil || form["distribution"] != nil { opt = .init(level: form["level"], distribution: form["distribution"]) }
        let body = TopicRoutes.Body(name: form.text("name"), desc: form["desc"], opt: opt)
        var anchor = ""
        do {
            switch action {
            case "create-channel":
                let fields = try body.fields(creating: true, withOptions: false)
                let channel = Channel(id: ids.next(), name: fields.name ?? "", desc: fields.desc ?? "")
                try await topics.createChannel(channel)
                anchor = "channel-\(channel.id.hex)"
            case "create-area":
                let fields = try body.fields(creating: true, withOptions: false)
                let area = Area(id: ids.next(), name: fields.name ?? "", desc: fields.desc ?? "")
                guard try await topics.createArea(area, channelID: try id("channel")) else { throw HeraldError.notFound("channel") }
                anchor = "area-\(area.id.hex)"
            case "update-area":
                guard
                    try await topics.updateArea(channelID: try id("channel"), areaID: try id("area"), try body.fields(creating: false, withOptions: false))
                        != nil
                else {
                    throw HeraldError.notFound("area")
                }
                anchor = "area-\(try id("area").hex)"
            case "delete-area":
                guard try await topics.deleteArea(channelID: try id("channel"), areaID: try id("area")) else { throw HeraldError.notFound("area") }
            case "create-subject":
                let (channelID, areaID) = (try id("channel"), try id("area"))
                let fields = try body.fields(creating: true, withOptions: true)
                let subjectID = ids.next()
                let subject = Subject(
                    id: subjectID, name: fields.name ?? "", desc: fields.desc ?? "",
                    topicKey: TopicKey(channelID: channelID, areaID: areaID, subjectID: subjectID).description, opt: fields.opt ?? SubjectOptions()
                )
                guard try await topics.createSubject(subject, channelID: channelID, areaID: areaID) else { throw HeraldError.notFound("area") }
                anchor = "area-\(areaID.hex)"
            case "update-subject":
                let fields = try body.fields(creating: false, withOptions: true)
                guard try await topics.updateSubject(channelID: try id("channel"), areaID: try id("area"), subjectID: try id("subject"), fields) != nil else {
                    throw HeraldError.notFound("subject")
                }
                anchor = "area-\(try id("area").hex)"
            case "delete-subject":
                guard try await topics.deleteSubject(channelID: try id("channel"), areaID: try id("area"), subjectID: try id("subject")) else {
                    throw HeraldError.notFound("subject")
                }
                anchor = "area-\(try id("area").hex)"
            default:
                throw HeraldError.notFound("portal action '\(action)'")
            }
        } catch let error as HeraldError where error.kind == .unprocessable || error.kind == .notFound {
            return try await channelsPage(session, error: error.message, status: ErrorAnswer.status(error.kind))
        }
        return PortalPages.redirect(to: "/portal/channels" + (anchor.isEmpty ? "" : "#\(anchor)"))
    }

    // MARK: Archive and status (admin)

    func messagesPage(_ request: Request, _ session: PortalSession) async throws -> Response {
        let topic = try request.nonEmptyQueryText("topic")
        let before = try request.queryText("before")
        let entries = Self.subjects(of: try await topics.channels())
        let names = Dictionary(entries.map { ($0.subject.topicKey, $0.label) }, uniquingKeysWith: { first, _ in first })
        let topics: [[String: Any]] = entries.map { ["topicKey": $0.subject.topicKey, "label": $0.label, "selected": $0.subject.topicKey == topic] }
        let page = try await store.messages(topicKey: topic, limit: 50, before: before)
        let rows: [[String: Any]] = page.messages.map { message in
            [
                "msiKey": message.msiKey, "title": message.title, "desc": message.desc, "distribution": message.distribution.rawValue,
                "sender": message.sender, "topic": names[message.topicKey] ?? message.topicKey,
                "time": Timestamp.format(Date(timeIntervalSince1970: Double(message.timestamp) / 1000)),
            ]
        }
        var values: [String: Any] = ["topics": topics, "messages": rows, "hasMessages": !rows.isEmpty, "filtered": topic != nil]
        if let cursor = page.next {
            values["next"] = "/portal/messages?before=\(cursor)" + (topic.map { "&topic=\($0)" } ?? "")
        }
        return pages.page("messages", values, session: session)
    }

    func statusPage(_ request: Request, _ session: PortalSession) async throws -> Response {
        let text = (try request.queryText("id") ?? "").trimmingCharacters(in: .whitespaces)
        var values: [String: Any] = ["id": text]
        var sinks: [[String: Any]] = []
        let now = Date()
        for report in session.isAdmin ? await SinkHealthReport.collect(service.sinks, circuits: circuits, queue: store, now: now) : [] {
            let history = timeline.history(of: report.name, now: now)
            sinks.append([
                "chart": TimelineChart.svg(sink: report.name, minutes: history.minutes, changes: history.changes, now: now),
                "name": report.name, "kind": report.kind, "channel": report.channelLabel,
                "status": report.status, "reason": report.reason ?? "",
                "circuit": report.circuitOpen
                    ? "open" : report.openEndpoints.isEmpty ? "closed" : "open for \(report.openEndpoints.map(\.endpoint).joined(separator: ", "))",
                "opened": report.circuitOpened,
                "failures": report.judged == 0 ? "—" : "\(Int((report.failureRate * 100).rounded())) % of \(report.judged)",
                "waiting": report.oldestWaitingSeconds.map { "\(Int($0.rounded())) s" } ?? "—",
            ])
        }
        values["sinks"] = sinks
        if !text.isEmpty {
            if let id = ObjectID(text), try await maySee(id, session), let status = try await store.status(of: id) {
                let n = status.notification
                values["notification"] = [
                    "id": n.id.hex, "title": n.title, "type": n.type, "distribution": n.distribution.rawValue, "recipients": status.recipients,
                    "time": Timestamp.format(n.timestamp),
                ]
                values["summary"] = status.summary.keys.sorted().map { sink -> [String: Any] in
                    let counts = status.summary[sink] ?? [:]
                    return [
                        "sink": sink,
                        "counts": counts.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue): \($0.value)" }.joined(separator: ", "),
                    ]
                }
                values["deliveries"] = status.deliveries.map { d -> [String: Any] in
                    [
                        "sink": d.sink, "recipient": d.topic.map { "topic \($0)" } ?? d.userID, "state": d.state.rawValue, "attempts": d.attempts,
                        "error": d.lastError ?? "", "updated": Timestamp.format(d.updatedAt),
                        "hasWhy": !d.userID.isEmpty, "why": d.userID.isEmpty ? "" : Self.whyLink(id: n.id.hex, userID: d.userID),
                    ]
                }
                let total = status.summary.values.reduce(0) { sum, counts in sum + counts.values.reduce(0, +) }
                values["truncated"] = total > status.deliveries.count
            } else {
                values["notFound"] = true
            }
        }
        return pages.page("status", values, session: session)
    }
}
