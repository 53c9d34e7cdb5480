import Foundation
import GRDB
import HeraldAPI
import OpenAPIRuntime

/// Seen reports and engagement events wait here until Herald has them (docs/heraldkit.md
/// "Offline"): queued in the same transaction as the local change they describe, uploaded in
/// batches, deleted only once Herald answered, retried with backoff when it did not. Each row's
/// id is the event's id (or `seen:` and the card), so queueing twice uploads once, and Herald
/// deduplicates a batch resent after a lost answer.
struct Outbox: Sendable {
    enum Kind: String {
        case seen
        case event
    }

    /// Herald's limits per batch (`POST /api/pool/seen` and `POST /api/events`).
    static let batchSize: [Kind: Int] = [.seen: 1000, .event: 500]
    /// The longest wait between attempts.
    static let maxBackoff: TimeInterval = 300

    let database: LocalDatabase
    let now: @Sendable () -> Date

    static func enqueue(id: String, kind: Kind, body: Data, at: Date, in db: Database) throws {
        try db.execute(
            sql: "INSERT INTO outbox (id, kind, body, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            arguments: [id, kind.rawValue, String(decoding: body, as: UTF8.self), at.timeIntervalSince1970])
    }

    /// The oldest rows of `kind` due for an attempt.
    func due(_ kind: Kind) throws(HeraldKitError) -> [(id: String, body: String)] {
        let at = now().timeIntervalSince1970
        return try database.read { db in
            try Row.fetchAll(
                db, sql: "SELECT id, body FROM outbox WHERE kind = ? AND refused IS NULL AND next_attempt_at <= ? ORDER BY created_at, id LIMIT ?",
                arguments: [kind.rawValue, at, Self.batchSize[kind] ?? 100]
            ).map { (id: try $0.decode(forColumn: "id"), body: try $0.decode(forColumn: "body")) }
        }
    }

    func delivered(_ ids: [String], in db: Database) throws {
        for id in ids { try db.execute(sql: "DELETE FROM outbox WHERE id = ?", arguments: [id]) }
    }

    /// The rows' bodies as queued; a row that no longer reads is a damaged file, not a trap.
    static func decode<Body: Decodable>(_ rows: [(id: String, body: String)], as type: Body.Type) throws(HeraldKitError) -> [Body] {
        var bodies: [Body] = []
        for row in rows {
            do {
                bodies.append(try JSONDecoder.herald.decode(type, from: Data(row.body.utf8)))
            } catch {
                throw .localStorage("outbox row \(row.id): \(error)")
            }
        }
        return bodies
    }

    /// Herald did not answer (or asked to wait): try again after a doubling wait.
    func postpone(_ ids: [String], retryAfter: Int?) throws(HeraldKitError) {
        let at = now().timeIntervalSince1970
        try database.write { db in
            for id in ids {
                let attempts = try Int.fetchOne(db, sql: "SELECT attempts FROM outbox WHERE id = ?", arguments: [id]) ?? 0
                let backoff = min(Self.maxBackoff, pow(2, Double(min(attempts, 16))))
                let wait = max(backoff, min(Double(retryAfter ?? 0), 3_600))
                try db.execute(sql: "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ? WHERE id = ?", arguments: [at + wait, id])
            }
        }
    }

    /// Herald refused the batch for what it holds: kept, with the reason, and not retried (an
    /// app update that fixes the cause can ``Herald/retryRefused()``).
    func refuse(_ ids: [String], reason: String) throws(HeraldKitError) {
        try database.write { db in
            for id in ids { try db.execute(sql: "UPDATE outbox SET refused = ? WHERE id = ?", arguments: [reason, id]) }
        }
    }

    /// Rows waiting, and rows refused.
    func counts() throws(HeraldKitError) -> (waiting: Int, refused: Int) {
        try database.read { db in
            (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox WHERE refused IS NULL") ?? 0,
                try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox WHERE refused IS NOT NULL") ?? 0
            )
        }
    }
}

/// What an upload did.
public struct UploadReport: Sendable, Equatable {
    /// Reports and events Herald now has.
    public var uploaded = 0
    /// Still waiting (Herald did not answer, or they are not due yet).
    public var waiting = 0
    /// Refused by Herald for what they hold; kept, not retried.
    public var refused = 0
}

extension Herald {
    /// Uploads every due seen report and event, in batches, until none is due or Herald stops
    /// answering. Never throws for want of a network: what did not go waits for the next call.
    @discardableResult
    public func upload() async throws(HeraldKitError) -> UploadReport {
        var report = UploadReport()
        kinds: for kind in [Outbox.Kind.seen, .event] {
            while true {
                let batch = try outbox.due(kind)
                if batch.isEmpty { break }
                let ids = batch.map(\.id)
                do throws(HeraldKitError) {
                    switch kind {
                    case .seen: try await uploadSeen(batch)
                    case .event: try await uploadEvents(batch)
                    }
                    report.uploaded += batch.count
                } catch {
                    if error.isTransient || error == .notSignedIn || error.code == "unauthorized" || error.code == "token_expired" {
                        try outbox.postpone(ids, retryAfter: { if case .server(_, _, _, let after) = error { return after } else { return nil } }())
                        break kinds
                    }
                    try outbox.refuse(ids, reason: error.description)
                }
            }
        }
        let counts = try outbox.counts()
        report.waiting = counts.waiting
        report.refused = counts.refused
        return report
    }

    /// Makes refused reports and events due again.
    public func retryRefused() throws(HeraldKitError) {
        try database.write { db in try db.execute(sql: "UPDATE outbox SET refused = NULL, attempts = 0, next_attempt_at = 0") }
    }

    /// Uploads whenever something is due, until the task is cancelled: run it for the app's
    /// lifetime (`Task { await herald.uploadContinuously() }`).
    public func uploadContinuously(every interval: Duration = .seconds(5)) async {
        while !Task.isCancelled {
            _ = try? await upload()
            try? await Task.sleep(for: interval)
        }
    }

    private func uploadSeen(_ batch: [(id: String, body: String)]) async throws(HeraldKitError) {
        let reports = try Outbox.decode(batch, as: Operations.PostSeen.Input.Body.JsonPayload.SeenPayloadPayload.self)
        let output = try await calling { try await client.postSeen(body: .json(.init(seen: reports))) }
        guard case .ok(let ok) = output, case .json(let answer) = ok.body else { throw .unexpectedAnswer("POST /api/pool/seen") }
        try database.write { db in
            for entry in answer.history {
                try db.execute(sql: "UPDATE card_history SET server_index = ? WHERE card = ?", arguments: [entry.index, entry.card])
            }
            try outbox.delivered(batch.map(\.id), in: db)
        }
    }

    private func uploadEvents(_ batch: [(id: String, body: String)]) async throws(HeraldKitError) {
        let events = try Outbox.decode(batch, as: Components.Schemas.EngagementEvent.self)
        let output = try await calling { try await client.postEvents(body: .json(.init(events: events))) }
        guard case .accepted = output else { throw .unexpectedAnswer("POST /api/events") }
        try database.write { db in try outbox.delivered(batch.map(\.id), in: db) }
    }
}

extension JSONEncoder {
    /// How queued rows are written: instants as numbers, exact to the millisecond.
    static var herald: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return encoder
    }
}

extension JSONDecoder {
    /// How queued rows are read back.
    static var herald: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }
}
