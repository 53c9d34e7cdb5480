import Foundation
import Logging
import PostgresNIO
import Synchronization

/// A streaming replica that serves the reads which tolerate its lag (docs/scaling.md, "Read
/// replicas for history reads"), watched so that it is used only while it is current.
///
/// Every ``checkInterval`` the watch notes where the primary's WAL is flushed to, then asks the
/// replica how far it has replayed. The replica holds everything the primary had committed at
/// the newest noted instant whose position it has replayed, so its lag is at most the time since
/// that instant. While it is a standby whose lag is within ``maxLag``, it is usable; behind,
/// unreachable, promoted or not a standby at all, it is not, and reads go to the primary
/// (current, never a 503) until a later check finds it caught up.
final class PostgresReadReplica: Sendable {
    let pool: PostgresPool
    /// Its own: statements are prepared per connection, and these are the replica's.
    let preparation = StatementPreparation()
    let maxLag: Duration
    let checkInterval: Duration
    private let logger: Logger
    private let verdict = Mutex(Verdict.unusable("not checked yet"))
    private let watch = Mutex<Task<Void, Never>?>(nil)

    enum Verdict: Equatable, Sendable {
        case usable
        case unusable(String)
    }

    /// Where the primary's WAL stood at one instant.
    struct Mark {
        var instant: ContinuousClock.Instant
        var position: WALPosition
    }

    init(
        configuration: PostgresClient.Configuration, direct: PostgresConnection.Configuration?, logger: Logger,
        maxLag: Duration = .seconds(1), checkInterval: Duration = .milliseconds(250)
    ) {
        // A replica that lends no connection soon is passed over: its reads have the primary.
        pool = PostgresPool(configuration: configuration, logger: logger, acquireTimeout: .seconds(1), direct: direct, role: .readReplica)
        self.maxLag = maxLag
        self.checkInterval = checkInterval
        self.logger = logger
    }

    var isUsable: Bool { verdict.withLock { $0 == .usable } }

    /// Starts the watch against `primary`; it runs until ``close()``.
    func startWatching(primary: PostgresPool) {
        let task = Task { [self] in
            var marks: [Mark] = []
            while !Task.isCancelled {
                if let found = await check(primary: primary, marks: &marks) { record(found) }
                try? await Task.sleep(for: checkInterval)
            }
        }
        watch.withLock { $0 = task }
    }

    /// Takes the replica out of use after a read failed there, until the next check.
    func readFailed(_ error: any Error) {
        record(.unusable("failed a read: \(PostgresStore.describe(error))"))
    }

    func close() async {
        let task = watch.withLock { task in
            defer { task = nil }
            return task
        }
        task?.cancel()
        await task?.value
        await pool.close()
    }

    private func record(_ found: Verdict) {
        let previous = verdict.withLock { verdict in
            defer { verdict = found }
            return verdict
        }
        guard previous != found else { return }
        switch found {
        case .usable: logger.notice("the read replica is current: history pages are read there")
        case .unusable(let why): logger.notice("history pages are read on the primary: the read replica \(why)")
        }
    }

    /// One check: nil when the primary's position could not be read (nothing to compare with;
    /// the verdict stands).
    private func check(primary: PostgresPool, marks: inout [Mark]) async -> Verdict? {
        let flushed: String?
        do {
            flushed = try await primary.withConnection { connection in
                try await connection.query("SELECT pg_current_wal_flush_lsn()::text AS lsn", logger: self.logger).collect().first?
                    .decode(String?.self)
            }
        } catch {
            return nil
        }
        guard let flushed, let position = WALPosition(flushed) else { return nil }
        marks.append(Mark(instant: .now, position: position))
        let state: (standby: Bool, replayed: String?)
        do {
            state = try await pool.withConnection { connection in
                let rows = try await connection.query(
                    "SELECT pg_is_in_recovery() AS standby, pg_last_wal_replay_lsn()::text AS replayed", logger: self.logger
                ).collect()
                guard let row = rows.first else { return (false, nil) }
                return try row.decode((Bool, String?).self)
            }
        } catch {
            return .unusable("cannot be read: \(PostgresStore.describe(error))")
        }
        guard state.standby else { return .unusable("is not a standby (pg_is_in_recovery() is false)") }
        guard let replayed = state.replayed.flatMap(WALPosition.init) else { return .unusable("has replayed no WAL yet") }
        return Self.verdict(replayed: replayed, marks: &marks, now: .now, maxLag: maxLag)
    }

    /// The verdict for a replica that has replayed up to `replayed`, given the primary's recent
    /// `marks` (oldest first). Marks older than the newest one replayed are no longer needed,
    /// and marks older than `maxLag` can only say the replica is too far behind: both are dropped.
    static func verdict(replayed: WALPosition, marks: inout [Mark], now: ContinuousClock.Instant, maxLag: Duration) -> Verdict {
        let newestReplayed = marks.lastIndex { $0.position <= replayed }
        if let newestReplayed { marks.removeFirst(newestReplayed) }
        marks.removeAll { now - $0.instant > maxLag && $0.position > replayed }
        // After the removals the first mark is the newest one replayed, when there is one.
        guard newestReplayed != nil, let held = marks.first, now - held.instant <= maxLag else {
            return .unusable("is more than \(maxLag) behind the primary")
        }
        return .usable
    }
}

/// A position in PostgreSQL's write-ahead log, as `pg_lsn` prints it (`16/B374D848`: the high
/// and low 32 bits in hexadecimal).
struct WALPosition: Comparable, Sendable {
    var offset: UInt64

    init(offset: UInt64) { self.offset = offset }

    /// Nil for anything that is not two hexadecimal 32-bit halves.
    init?(_ text: String) {
        let halves = text.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, let high = UInt32(halves[0], radix: 16), let low = UInt32(halves[1], radix: 16) else { return nil }
        offset = UInt64(high) << 32 | UInt64(low)
    }

    static func < (lhs: WALPosition, rhs: WALPosition) -> Bool { lhs.offset < rhs.offset }
}
