import Foundation
import HeraldTestSupport
import NIOHTTP1
import Testing

/// Scheduled sends on the real binary (docs/timing.md): a kill -9 before the instant loses
/// nothing, and a send goes out once, whichever processes are running when it is due.
@Suite(.serialized, .cleansUp) struct ScheduledSendCrashTests {
    let directory: URL

    init() throws {
        directory = try TestResources.temporaryDirectory("herald-scheduled")
    }

    /// - Parameter lease: `delivery.lease`, for a test whose kill may leave pushes leased by
    ///   the killed process (the next retries them when it ends).
    func start(_ database: String, emulator: RunningHerald, account: String, lease: String = "60") async throws -> RunningHerald {
        try await RunningHerald(
            arguments: ["--database", database],
            environment: [
                "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": emulator.url, "HERALD_DELIVERY_BACKOFF": "0.2", "HERALD_DELIVERY_LEASE": lease,
            ], in: directory)
    }

    /// Schedules `count` sends to every user for `instant`. - Returns: their ids.
    func schedule(_ count: Int, users: [String], at instant: Date, to url: String, key: String) async throws -> [String] {
        var ids: [String] = []
        let list = users.map { "\"\($0)\"" }.joined(separator: ",")
        for index in 0..<count {
            let sendAt = ISO8601DateFormatter().string(from: instant)
            let body = "{\"type\":\"comment\",\"title\":\"later \(index)\",\"user_ids\":[\(list)],\"send_at\":\"\(sendAt)\"}"
            let (status, reply) = try await LoadHarness.request(.POST, "\(url)/api/notifications", key: key, body: body)
            #expect(status == 202, "\(reply)")
            // The instant goes as whole seconds; on a loaded machine a late request finds it past
            // and is sent at once (as documented), so only an early one must say scheduled.
            if Date() < instant.addingTimeInterval(-1) {
                #expect(reply["status"] as? String == "scheduled", "\(reply)")
            }
            if let id = reply["id"] as? String { ids.append(id) }
        }
        return ids
    }

    /// Waits until every id reached every user, then a moment more for a repeat to show.
    /// - Parameter once: whether each must have gone out exactly once; a push a killed process
    ///   was sending is sent again (at least once, docs/durability.md), so a test whose kill may
    ///   have come after the instant can only ask for every push.
    func expectEachPushed(_ ids: [String], users: [String], emulator: RunningHerald, once: Bool = true) async throws {
        let pushed = try await LoadHarness.waitForPushes(of: Set(ids), emulator: emulator.url, timeout: .seconds(60))
        #expect(Set(ids).isSubset(of: Set(pushed)), "\(Set(ids).subtracting(pushed).count) scheduled sends never went out")
        // Every id seen once is not every delivery: one the killed process had leased goes
        // when its lease ends.
        var final: [String] = []
        let deadline = ContinuousClock.now + .seconds(30)
        repeat {
            try await Task.sleep(for: .seconds(1))
            final = try await LoadHarness.pushes(emulator: emulator.url).filter(Set(ids).contains)
        } while final.count < ids.count * users.count && ContinuousClock.now < deadline
        if once {
            #expect(final.count == ids.count * users.count, "\(final.count) pushes for \(ids.count * users.count) deliveries")
        } else {
            #expect(final.count >= ids.count * users.count)
        }
    }

    @Test(arguments: DatabaseKind.available)
    func aScheduledSendSurvivesKillDashNineAndGoesOutOnce(_ kind: DatabaseKind) async throws {
        let database = try await kind.make(in: directory)
        let account = directory.appendingPathComponent("fcm-\(kind).json").path
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        let key = try await LoadHarness.backendKey(database: database, in: directory)
        let first = try await start(database, emulator: emulator, account: account)
        let users = (0..<4).map { "sched-\(kind)-\($0)" }
        try await LoadHarness.registerUsers(users, at: first.url, key: key)

        // Far enough ahead that the kill comes first even on a loaded machine: then the work is
        // pending, never in flight, and must go out exactly once.
        let instant = Date().addingTimeInterval(8)
        let ids = try await schedule(10, users: users, at: instant, to: first.url, key: key)
        first.process.signal(SIGKILL)
        _ = await first.stop()
        let killedBeforeInstant = Date() < instant
        if killedBeforeInstant {
            #expect(try await LoadHarness.pushes(emulator: emulator.url).filter(Set(ids).contains).isEmpty, "nothing before the instant")
        }

        let second = try await start(database, emulator: emulator, account: account)
        try await expectEachPushed(ids, users: users, emulator: emulator, once: killedBeforeInstant)
        let history = try await waitForHistory(of: users, at: second.url, key: key, expecting: ids.count * users.count)
        #expect(history.count == ids.count * users.count && Set(history) == Set(ids), "each send once in each history")
        await second.expectCleanStop()
        _ = await emulator.stop()
    }

    /// `send_at_local` at this UTC minute: come already for users in UTC and ahead of it,
    /// hours away for those behind. A kill -9 right after the accepts loses nobody: the ones due
    /// are pushed and in history once each, the ones waiting still wait, on the next process.
    @Test(arguments: DatabaseKind.available)
    func aLocalTimeSendSurvivesKillDashNine(_ kind: DatabaseKind) async throws {
        let database = try await kind.make(in: directory)
        let account = directory.appendingPathComponent("fcm-local-\(kind).json").path
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        let key = try await LoadHarness.backendKey(database: database, in: directory)
        let first = try await start(database, emulator: emulator, account: account, lease: "3")
        let zones = ["local-\(kind)-utc": "UTC", "local-\(kind)-east": "Asia/Tokyo", "local-\(kind)-west": "America/Los_Angeles"]
        let users = zones.keys.sorted()
        try await LoadHarness.registerUsers(users, at: first.url, key: key)
        for (user, zone) in zones {
            let (status, reply) = try await LoadHarness.request(
                .PATCH, "\(first.url)/api/notifications/settings", key: key, user: user, body: "{\"timezone\":\"\(zone)\"}")
            #expect(status == 200, "\(reply)")
        }
        let local = String(ISO8601DateFormatter().string(from: Date()).prefix(16))
        let list = users.map { "\"\($0)\"" }.joined(separator: ",")
        var ids: [String] = []
        for index in 0..<10 {
            let body = "{\"type\":\"comment\",\"title\":\"local \(index)\",\"user_ids\":[\(list)],\"send_at_local\":\"\(local)\"}"
            let (status, reply) = try await LoadHarness.request(.POST, "\(first.url)/api/notifications", key: key, body: body)
            #expect(status == 202 && reply["status"] as? String == "scheduled", "\(reply)")
            if let id = reply["id"] as? String { ids.append(id) }
        }
        first.process.signal(SIGKILL)
        _ = await first.stop()

        let second = try await start(database, emulator: emulator, account: account, lease: "3")
        let due = users.filter { !$0.hasSuffix("-west") }
        // A push a killed process was sending goes again (at least once, docs/durability.md).
        try await expectEachPushed(ids, users: due, emulator: emulator, once: false)
        let history = try await waitForHistory(of: due, at: second.url, key: key, expecting: ids.count * due.count)
        #expect(history.count == ids.count * due.count && Set(history) == Set(ids), "each send once in each due history")
        #expect(try await LoadHarness.history(of: users.filter { $0.hasSuffix("-west") }, at: second.url, key: key).isEmpty, "not before its time")
        for id in ids {
            let (_, status) = try await LoadHarness.request(.GET, "\(second.url)/api/notifications/\(id)", key: key)
            #expect((status["counts"] as? [String: Any])?["scheduled"] as? Int == 1, "the west still waits: \(status)")
        }
        await second.expectCleanStop()
        _ = await emulator.stop()
    }

    /// The users' histories once they hold `count` rows, or after 30 s: a history row the
    /// killed process's leased delivery was writing comes when its lease ends.
    func waitForHistory(of users: [String], at url: String, key: String, expecting count: Int) async throws -> [String] {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let history = try await LoadHarness.history(of: users, at: url, key: key)
            if history.count >= count || ContinuousClock.now >= deadline { return history }
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    /// Every push's data the emulator took.
    func pushedData(_ emulator: RunningHerald) async throws -> [[String: Any]] {
        let (_, body) = try await LoadHarness.request(.GET, "\(emulator.url)/emulator/messages", key: "none")
        return (body["requests"] as? [[String: Any]] ?? []).compactMap { item in
            guard item["status"] as? Int == 200 else { return nil }
            return ((item["request"] as? [String: Any])?["message"] as? [String: Any])?["data"] as? [String: Any]
        }
    }

    /// `digest_key` on the real binary: notifications folded for a short window survive a
    /// kill -9 and go out as one digest per user when it ends, once, every item in history.
    @Test(arguments: DatabaseKind.available)
    func aDigestWindowSurvivesKillDashNineAndGoesOutOnce(_ kind: DatabaseKind) async throws {
        let database = try await kind.make(in: directory)
        let account = directory.appendingPathComponent("fcm-digest-\(kind).json").path
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        let key = try await LoadHarness.backendKey(database: database, in: directory)
        let first = try await start(database, emulator: emulator, account: account)
        let users = (0..<3).map { "digest-\(kind)-\($0)" }
        try await LoadHarness.registerUsers(users, at: first.url, key: key)
        let list = users.map { "\"\($0)\"" }.joined(separator: ",")
        var ids: [String] = []
        for index in 0..<5 {
            let body = "{\"type\":\"message\",\"title\":\"chat \(index)\",\"user_ids\":[\(list)],\"digest_key\":\"room-1\",\"digest_window\":\"4s\"}"
            let (status, reply) = try await LoadHarness.request(.POST, "\(first.url)/api/notifications", key: key, body: body)
            #expect(status == 202, "\(reply)")
            if let id = reply["id"] as? String { ids.append(id) }
        }
        first.process.signal(SIGKILL)
        _ = await first.stop()

        let second = try await start(database, emulator: emulator, account: account)
        let deadline = ContinuousClock.now + .seconds(60)
        var digests: [[String: Any]] = []
        while ContinuousClock.now < deadline {
            digests = try await pushedData(emulator).filter { ($0["digest_of"] as? String)?.isEmpty == false }
            if digests.count >= users.count { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        try await Task.sleep(for: .seconds(1))
        let all = try await pushedData(emulator)
        digests = all.filter { ($0["digest_of"] as? String)?.isEmpty == false }
        #expect(digests.count == users.count, "one digest per user: \(all)")
        for digest in digests {
            #expect(digest["digest_of"] as? String == ids.joined(separator: ","), "every item, oldest first: \(digest)")
            #expect(digest["digest_count"] as? String == "5")
        }
        #expect(all.filter { ids.contains($0["id"] as? String ?? "") }.isEmpty, "no item pushed on its own")
        let history = try await LoadHarness.history(of: users, at: second.url, key: key)
        #expect(history.count == ids.count * users.count && Set(history) == Set(ids), "each item once in each history")
        await second.expectCleanStop()
        _ = await emulator.stop()
    }

    @Test(.enabled(if: DatabaseKind.available.contains(.postgres), "needs the PostgreSQL test server"))
    func twoProcessesOnOnePostgresSendEachScheduledSendOnce() async throws {
        let database = try await DatabaseKind.postgres.make(in: directory)
        let account = directory.appendingPathComponent("fcm-pair.json").path
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: directory)
        let key = try await LoadHarness.backendKey(database: database, in: directory)
        let a = try await start(database, emulator: emulator, account: account)
        let b = try await start(database, emulator: emulator, account: account)
        let users = (0..<4).map { "pair-sched-\($0)" }
        try await LoadHarness.registerUsers(users, at: a.url, key: key)

        // Scheduled through one process; both are running when they fall due.
        let ids = try await schedule(10, users: users, at: Date().addingTimeInterval(6), to: a.url, key: key)
        try await expectEachPushed(ids, users: users, emulator: emulator)
        // Sends in each user's own time (UTC here, the default zone) at this minute, come
        // already: routed by whichever process takes each recipient, once.
        let local = String(ISO8601DateFormatter().string(from: Date()).prefix(16))
        let list = users.map { "\"\($0)\"" }.joined(separator: ",")
        var localIDs: [String] = []
        for index in 0..<10 {
            let body = "{\"type\":\"comment\",\"title\":\"local \(index)\",\"user_ids\":[\(list)],\"send_at_local\":\"\(local)\"}"
            let (status, reply) = try await LoadHarness.request(.POST, "\(index % 2 == 0 ? a.url : b.url)/api/notifications", key: key, body: body)
            #expect(status == 202, "\(reply)")
            if let id = reply["id"] as? String { localIDs.append(id) }
        }
        try await expectEachPushed(localIDs, users: users, emulator: emulator)
        let all = ids + localIDs
        let history = try await waitForHistory(of: users, at: b.url, key: key, expecting: all.count * users.count)
        #expect(history.count == all.count * users.count && Set(history) == Set(all), "each send once in each history")
        await a.expectCleanStop()
        await b.expectCleanStop()
        _ = await emulator.stop()
    }
}
