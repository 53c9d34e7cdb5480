import Foundation
import GRDB
import HTTPTypes
import HeraldCore
import HeraldFeed
import HeraldInbox
import HeraldServer
import HeraldStore
import HeraldTestSupport
import HeraldTopics
import HummingbirdTesting
import Logging
import Testing

/// No background work scans a table that grows (issue 62): what runs beside the requests, with
/// no request waiting on it but holding the writer all the same (fan-out pages, scheduled
/// recipients, held deliveries folded into digests, digests released, snoozes ended, topic
/// membership, the feed's maintenance, the look for the next instant each loop sleeps until, and
/// every kind of retention), recorded and planned as ``QueryPlanTests`` does the requests'.
@Suite(.cleansUp) struct BackgroundWorkQueryPlanTests {
    @Test func noBackgroundWorkScansAGrowingTable() async throws {
        let (store, recorder) = try await QueryPlanTests.recordedHerald(configure: Self.configure) { try await Self.exercise($0) }
        let statements = recorder.all
        let scans = try await store.writer.read { db in try QueryPlanTests.fullScans(statements, in: db) }
        Self.expectEveryKindReached(statements)
        #expect(scans.isEmpty, "\(scans.joined(separator: "\n"))")
    }

    /// A statement of each kind of work the workload must have reached, or its plans are not
    /// the ones background work runs (a table each writes or reads).
    static let expectedStatements = [
        "fanout_jobs", "scheduled_recipients", "digest_items", "DELETE FROM history", "DELETE FROM deliveries", "DELETE FROM idempotency_keys",
        "DELETE FROM devices", "DELETE FROM events", "DELETE FROM notifications",
    ]

    /// Expects a statement of each of ``expectedStatements`` among `statements`, on either engine.
    static func expectEveryKindReached(_ statements: Set<String>) {
        for part in expectedStatements {
            #expect(statements.contains { $0.contains(part) }, "the workload ran \(part): \(statements.sorted().joined(separator: "\n"))")
        }
    }

    /// Pages for audiences of more than one user, a cap of one vote a second, and every retention
    /// set, so that the workload's sends take the background's paths.
    static func configure(_ configuration: inout HeraldConfiguration) {
        configuration.fanOutInlineLimit = 1
        configuration.caps = [
            FrequencyCap(name: "votes", types: ["upvote"], max: 1, seconds: 1, digestType: "upvote", title: "{{count}} votes", body: "{{first_title}}")
        ]
        let day = Duration.seconds(86_400)
        configuration.historyRetention = day
        configuration.archiveRetention = day
        configuration.inboxArchivedRetention = day
        configuration.inboxReadRetention = day
    }

    /// Sends that leave background work (an audience paged with each user's local time, votes
    /// past their cap, a digest key, a user's quiet hours that hold, a snooze), then every
    /// worker's round until nothing is left, and one storage maintenance pass three years on,
    /// when everything written is past its retention.
    static func exercise(_ herald: TestHerald) async throws {
        try await herald.test { client in
            let backend = headers(herald.backend)
            for (user, zone) in [("ada", "Europe/Paris"), ("bob", "UTC"), ("cy", "Asia/Tokyo")] {
                _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: user), json: js(["fcm_token": "t-\(user)"]))
                _ = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: user), json: js(["timezone": zone]))
            }
            let quiet = ["start": "00:00", "end": "23:59", "tz": "UTC", "mode": "hold"]
            _ = try await client.call(.patch, "/api/notifications/settings", headers(herald.backend, user: "cy"), json: js(["quiet_hours": quiet]))
            func send(_ body: [String: Any]) async throws -> String {
                let accepted = try await client.call(.post, "/api/notifications", backend, json: js(body))
                #expect(accepted.status == .accepted, "\(body): \(accepted.object)")
                return accepted.object["id"] as? String ?? ""
            }
            let minute = String(Timestamp.format(Date()).dropFirst(11).prefix(5))
            _ = try await send(["type": "generic", "title": "Morning", "audience": ["all": true], "send_at_local": minute])
            _ = try await send(["type": "generic", "title": "Everyone", "audience": ["all": true]])
            var votes: [String] = []
            for index in 1...3 { votes.append(try await send(["type": "upvote", "title": "Vote \(index)", "user_ids": ["ada"]])) }
            for index in 1...2 {
                _ = try await send(["type": "message", "title": "Message \(index)", "user_ids": ["bob"], "digest_key": "chat", "digest_window": 1])
            }
            _ = try await send(["type": "comment", "title": "Held", "user_ids": ["cy"]])
            let until = Timestamp.format(Date().addingTimeInterval(1))
            _ = try await client.call(
                .post, "/api/inbox/mark", headers(herald.backend, user: "ada"), json: js(["ids": [votes[0]], "change": "snooze", "until": until]))
            _ = try await client.call(.post, "/api/inbox/mark", headers(herald.backend, user: "ada"), json: js(["ids": [votes[1]], "change": "archived"]))
            _ = try await client.call(.put, "/api/cards/c1", backend, json: js(["metadata": [:], "posted_at": Timestamp.format(Date()), "hot": 0.5]))
            let event = ["event_id": "e1", "type": "reaction", "reaction": "tfu", "card": "c1", "at": Timestamp.format(Date())]
            _ = try await client.call(.post, "/api/events", headers(herald.backend, user: "ada"), json: js(["events": [event]]))
        }
        let server = herald.server
        try await server.fanOut.drain()
        try await herald.deliver()
        // The cap's window and the digest key's end.
        try await Task.sleep(for: .milliseconds(1_100))
        try await herald.deliver()
        _ = try await server.store.untilNextScheduledFanOut()
        _ = try await server.store.untilNextDigest()
        _ = try await server.store.nextDueDate(sinks: .all)
        _ = try await server.inbox.endSnoozes(dueBy: Date(), limit: 100)
        try await server.membership.drain()
        try await FeedMaintenance(store: server.feedStore, snapshot: server.feed, logger: Logger(label: "test")).runOnce()
        let report = try await server.storageMaintenance().pass(now: Date().addingTimeInterval(3 * 365 * 86_400))
        #expect(report.removed["history", default: 0] > 0 && report.removed["deliveries", default: 0] > 0, "retention ran: \(report.removed)")
    }
}
