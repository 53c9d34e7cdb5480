import Foundation
import GRDB
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldStore
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

/// SQLite in trouble: a file locked by another process, or deleted under a running server. The
/// answer is a 503 with Retry-After, never a 500, and never a 2xx for something not stored.
@Suite(.cleansUp) struct SQLiteTroubleTests {
    @Test func aLockedDatabaseIsAnswered503() async throws {
        let directory = try TestResources.temporaryDirectory("herald-locked")
        let path = directory.appendingPathComponent("h.sqlite").path
        let store = try SQLiteStore(path: path, busyTimeout: .milliseconds(200))
        try await store.migrate()
        // Another process takes the write lock and keeps it.
        let other = try DatabaseQueue(path: path)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        await withCheckedContinuation { (locked: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                try? other.writeWithoutTransaction { db in
                    try db.execute(sql: "BEGIN EXCLUSIVE")
                    locked.resume()
                    release.wait()
                    try db.execute(sql: "COMMIT")
                }
                done.signal()
            }
        }
        let n = HeraldNotification(id: ObjectIDGenerator().next(), type: "generic", title: "t", body: "b", url: nil, timestamp: Date(), target: .users(["u"]))
        do {
            _ = try await store.accept(
                n, recipients: 1, deliveries: [PlannedDelivery(sink: "history", userID: "u", distribution: .alert)], idempotencySince: Date())
            Issue.record("an accept went through a lock held by another process")
        } catch {
            let answer = try #require(StorageFailure.unavailable(error), "\(error)")
            #expect(answer.kind == .unavailable && answer.code == "storage_busy")
        }
        release.signal()
        await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                done.wait()
                finished.resume()
            }
        }
        _ = try await store.accept(n, recipients: 1, deliveries: [], idempotencySince: Date())
    }

    @Test func aDeletedDatabaseFileIsAnswered503AndNotReady() async throws {
        let herald = try await TestHerald.make()
        let path = String(herald.server.configuration.database.dropFirst("sqlite:".count))
        try FileManager.default.removeItem(atPath: path)
        try await herald.test { client in
            let send = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "generic", "title": "t", "body": "b", "user_ids": ["u"]])
            #expect(send.status == .serviceUnavailable, "\(String(buffer: send.body))")
            #expect(send.headers[.retryAfter] == "1")
            #expect(send.errorCode == "storage_unavailable")
            // An API client learns nothing of the server's file system.
            #expect(!send.errorMessage.contains(path) && !send.errorMessage.contains("/"), "\(send.errorMessage)")
            let ready = try await client.call(.get, "/health/ready", headers(contentType: nil))
            #expect(ready.status == .serviceUnavailable)
        }
    }
}
