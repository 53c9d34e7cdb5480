import AsyncHTTPClient
import Foundation
import NIOHTTP1

extension Run {
    /// The inbox on a user with `--inbox-items` items (100 000: docs/inbox.md says a mark and the
    /// counts cost the same whatever the history holds): `POST /api/inbox/mark` latency (ids and
    /// `all`, one at a time), and `GET /api/inbox/counts` under wrk against the GET ceiling.
    func measureInbox(report: inout Report, driver: LoadDriver, wrk: Wrk, server: ChildProcess, admin: String, getCeiling: Double) async throws {
        let user = "bench-inbox-user"
        progress("inbox: \(inboxItems) items in one user's history")
        let written = await driver.run(count: inboxItems, concurrency: concurrency, expect: 202) { index in
            let type = ["comment", "like", "reply"][index % 3]
            return LoadDriver.post(
                "\(server.url)/api/notifications", json: #"{"type":"\#(type)","title":"Inbox \#(index)","body":"b","user_ids":["\#(user)"]}"#,
                token: admin)
        }
        guard written.errors == 0 else { throw BenchError("\(written.errors) of the inbox's notifications were refused") }
        let acting = [("Authorization", "Bearer \(admin)"), ("X-User-ID", user)]
        let (_, page, _) = try await driver.call(LoadDriver.get("\(server.url)/api/notifications/history?limit=200", headers: acting))
        let ids = ((page["history"] as? [[String: Any]]) ?? []).compactMap { ($0["data"] as? [String: Any])?["id"] as? String }
        guard ids.count == 200 else { throw BenchError("the inbox user's history listed \(ids.count) items, not 200") }
        // Most items read, as in a used inbox; the marks below then change a few at a time.
        var readAll = LoadDriver.post("\(server.url)/api/inbox/mark", json: #"{"all":true,"change":"read"}"#, token: admin)
        readAll.headers.add(name: "X-User-ID", value: user)
        let (status, _, _) = try await driver.call(readAll)
        guard status == 200 else { throw BenchError("marking every item read answered \(status)") }

        progress("inbox: marks, one at a time")
        let bodies = [
            #"{"ids":%@,"change":"unread"}"#, #"{"ids":%@,"change":"read"}"#, #"{"all":true,"change":"seen"}"#, #"{"ids":%@,"change":"archived"}"#,
            #"{"ids":%@,"change":"unarchived"}"#, #"{"all":true,"type":"comment","change":"read"}"#,
        ]
        let marks = await driver.run(count: 3_000, concurrency: 1, expect: 200) { index in
            let chosen = (0..<10).map { "\"\(ids[(index * 10 + $0) % ids.count])\"" }.joined(separator: ",")
            var request = LoadDriver.post(
                "\(server.url)/api/inbox/mark", json: bodies[index % bodies.count].replacingOccurrences(of: "%@", with: "[\(chosen)]"), token: admin)
            request.headers.add(name: "X-User-ID", value: user)
            return request
        }
        guard marks.errors == 0 else { throw BenchError("\(marks.errors) marks failed") }
        let p99 = marks.percentileMilliseconds(99)
        report.add("inbox: mark p99, \(inboxItems) items", p99, unit: "ms", target: "<= 10 ms", met: p99 <= 10)
        report.add("inbox: mark p50", marks.percentileMilliseconds(50), unit: "ms")

        let counts = try await wrk.run("\(server.url)/api/inbox/counts", .get(headers: Dictionary(uniqueKeysWithValues: acting)))
        report.add(
            "inbox: counts", counts.perSecond, unit: "/s", ratio: counts.perSecond / getCeiling, target: ">= 0.50 of GET ceiling",
            met: counts.perSecond >= 0.5 * getCeiling)
    }
}
