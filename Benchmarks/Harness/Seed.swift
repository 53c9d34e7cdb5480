import ArgumentParser
import Foundation
import GRDB
import HeraldCore
import HeraldStore
import PostgresNIO

/// `herald-bench seed`: a grown deployment's database, written fast (bulk SQL, not the API), for
/// the seeded-year benchmark and for operators rehearsing an upgrade or a retention change on
/// data the size of theirs (docs/performance.md, "A seeded year").
struct Seed: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a grown deployment's database: users with devices and settings, a year of history with its deliveries, engagement events.",
        discussion: """
            The database is created when missing (a PostgreSQL server's too) and migrated first; the rows go to tables that must hold no seeded rows yet. \
            Rows are spread evenly over --days days ending now; every --recipients-th history row goes to one of \
            \(SeedPlan.heavyUsers) heavy users (seed-user-0 to seed-user-\(SeedPlan.heavyUsers - 1)), who end up with deep histories.
            """
    )

    @Option(help: "The database: sqlite:PATH or postgres://user@host:port/database.")
    var database: String

    @Option(help: "Users, each with one FCM device and saved settings (seed-user-N, seed-token-N).")
    var users = 1_000_000

    @Option(help: "History rows (each with a history delivery and a push delivery).")
    var history = 50_000_000

    @Option(help: "Engagement events (default: a tenth of --history).")
    var events: Int?

    @Option(help: "Recipients of each notification (history rows per notification).")
    var recipients = 5

    @Option(help: "Days the rows are spread over, ending now.")
    var days = 365

    @Flag(
        help:
            "PostgreSQL: keep history, deliveries and events unpartitioned, as a database from before partitions, to rehearse `herald migrate --partition-history --partition-deliveries --partition-events` on."
    )
    var unpartitioned = false

    func validate() throws {
        guard database.hasPrefix("sqlite:") || database.hasPrefix("postgres://") || database.hasPrefix("postgresql://") else {
            throw ValidationError("--database must be sqlite:PATH or postgres://user@host:port/database")
        }
        guard recipients >= 1, recipients <= 1_000 else { throw ValidationError("--recipients must be 1 to 1000") }
        guard users >= SeedPlan.heavyUsers + recipients else {
            throw ValidationError(
                "--users must be at least \(SeedPlan.heavyUsers + recipients): \(SeedPlan.heavyUsers) heavy users and one notification's other recipients")
        }
        guard history >= 0, history <= 10_000_000_000 else { throw ValidationError("--history must be 0 to 10000000000") }
        guard (events ?? 0) >= 0, (events ?? 0) <= 10_000_000_000 else { throw ValidationError("--events must be 0 to 10000000000") }
        guard days >= 1, days <= 3_650 else { throw ValidationError("--days must be 1 to 3650") }
        if unpartitioned && database.hasPrefix("sqlite:") { throw ValidationError("--unpartitioned is for PostgreSQL") }
    }

    func run() async throws {
        let plan = SeedPlan(
            users: users, history: history, events: events ?? history / 10, recipients: recipients, days: days, end: Date(),
            partitioned: !unpartitioned)
        let started = ContinuousClock.now
        try await plan.write(into: database)
        SeedPlan.progress("done in \(Int((ContinuousClock.now - started).seconds)) s")
    }
}

/// What a seed writes, and the SQL that writes each part of it, in either engine's dialect.
struct SeedPlan: Sendable {
    /// Users who get one row of every notification's recipients: the deep histories a history
    /// page's cursor is measured on.
    static let heavyUsers = 100

    let users: Int
    let history: Int
    let events: Int
    let recipients: Int
    let days: Int
    /// The newest row's time; the oldest is `days` before it.
    let end: Date
    /// PostgreSQL: history, deliveries and events in month partitions, as a new database has them (or
    /// left as a database from before them had them).
    var partitioned = true

    var notifications: Int { (history + recipients - 1) / recipients }

    /// Writes this seed into `database` (`sqlite:PATH` or a PostgreSQL URL).
    func write(into database: String) async throws {
        if database.hasPrefix("sqlite:") {
            try await SQLiteSeeder(path: String(database.dropFirst("sqlite:".count)), plan: self).seed()
        } else {
            try await PostgresSeeder(url: database, plan: self).seed()
        }
    }
    var startSeconds: Int64 { Int64(end.timeIntervalSince1970) - Int64(days) * 86_400 }

    /// Rows per transaction: big enough that commits cost nothing, small enough to show progress.
    static let chunk = 500_000

    /// A dialect's spelling of the few things SQLite and PostgreSQL write differently.
    enum Dialect {
        case sqlite, postgres

        /// Rows `i` from `from` below `to`, as a `FROM` source named `n`.
        func series(_ from: Int, _ to: Int) -> (with: String, from: String) {
            switch self {
            case .sqlite: ("WITH RECURSIVE n(i) AS (SELECT \(from) UNION ALL SELECT i + 1 FROM n WHERE i + 1 < \(to)) ", "n")
            case .postgres: ("", "generate_series(\(from)::bigint, \(to - 1)::bigint) AS n(i)")
            }
        }

        /// `expression` as `width` lowercase hex digits.
        func hex(_ expression: String, _ width: Int) -> String {
            switch self {
            case .sqlite: "printf('%0\(width)x', \(expression))"
            case .postgres: "lpad(to_hex(\(expression)), \(width), '0')"
            }
        }
    }

    /// The second (Unix) of notification `n`: spread evenly over the period, oldest first.
    func secondOfNotification(_ n: String) -> String {
        let span = Int64(days) * 86_400
        return "(\(startSeconds) + (\(n)) * \(span) / \(max(notifications, 1)))"
    }

    /// A notification's id: its second, then `5eed`, then its number (ObjectID's shape and order).
    func notificationID(_ n: String, _ dialect: Dialect) -> String {
        "\(dialect.hex(secondOfNotification(n), 8)) || '5eed' || \(dialect.hex(n, 12))"
    }

    /// The types notifications cycle through.
    static let types = ["comment", "upvote", "message", "reply", "like"]

    func type(of n: String) -> String {
        "CASE \(Self.scrambled(n)) % 5 " + Self.types.enumerated().map { "WHEN \($0.offset) THEN '\($0.element)'" }.joined(separator: " ") + " END"
    }

    /// `expression` scrambled (squared modulo a prime), so that states and types chosen by
    /// remainder do not line up with the users chosen by remainder: a heavy user's rows are
    /// every 500th history row, and `n % 5` (or any step that is linear in `n`) would make
    /// them all one type and one state. Below 2³³ for any row number.
    static func scrambled(_ expression: String) -> String {
        "((((\(expression)) % 65521) * ((\(expression)) % 65521) + (\(expression)) / 65521) % 65521)"
    }

    /// The user of history row `j` (notification `j / recipients`): the first recipient one of the
    /// heavy users in turn, the others spread over everyone else in turn (so no notification
    /// names a user twice, and every other user gets as many rows).
    func userNumber(ofHistoryRow j: String) -> String {
        let others = "((\(j)) / \(recipients)) * \(recipients - 1) + (\(j)) % \(recipients) - 1"
        return "CASE WHEN (\(j)) % \(recipients) = 0 THEN ((\(j)) / \(recipients)) % \(Self.heavyUsers) "
            + "ELSE \(Self.heavyUsers) + (\(others)) % \(users - Self.heavyUsers) END"
    }

    func userOfHistoryRow(_ j: String) -> String {
        "'seed-user-' || \(userNumber(ofHistoryRow: j))"
    }

    func users(_ range: Range<Int>, _ dialect: Dialect) -> String {
        let (with, from) = dialect.series(range.lowerBound, range.upperBound)
        return with + """
            INSERT INTO users (id, settings, attributes, updated_at)
            SELECT 'seed-user-' || i, t.settings, t.attributes, t.updated_at FROM \(from) CROSS JOIN users t WHERE t.id = 'seed-template'
            """
    }

    func settingsVersions(_ range: Range<Int>, _ dialect: Dialect) -> String {
        let (with, from) = dialect.series(range.lowerBound, range.upperBound)
        return with + """
            INSERT INTO settings_versions (user_id, saved_at, settings)
            SELECT 'seed-user-' || i, t.saved_at, t.settings FROM \(from) CROSS JOIN settings_versions t WHERE t.user_id = 'seed-template'
            """
    }

    /// One FCM device per user, a copy of the template's with the user's own token.
    func devices(_ range: Range<Int>, _ dialect: Dialect) -> String {
        let (with, from) = dialect.series(range.lowerBound, range.upperBound)
        return with + """
            INSERT INTO devices (id, user_id, provider, address_key, address_json, app, options, platform, app_version, region, locale,
                created_at, updated_at, installation_id)
            SELECT \(dialect.hex("\(startSeconds)", 8)) || 'de71ce' || \(dialect.hex("i", 10)), 'seed-user-' || i, t.provider,
                'seed-token-' || i, replace(t.address_json, '"seed-template-token"', '"seed-token-' || i || '"'), t.app, t.options,
                t.platform, t.app_version, t.region, t.locale, t.created_at, t.updated_at, NULL
            FROM \(from) CROSS JOIN devices t WHERE t.user_id = 'seed-template'
            """
    }

    /// Notifications copy the template's stored columns (distribution, priority, target, …).
    func notifications(_ range: Range<Int>, _ dialect: Dialect) -> String {
        let (with, from) = dialect.series(range.lowerBound, range.upperBound)
        return with + """
            INSERT INTO notifications (id, type, title, body, url, data, timestamp, distribution, priority, expires_at, collapse_key,
                idempotency_key, target, recipients)
            SELECT \(notificationID("i", dialect)), \(type(of: "i")), 'Seeded ' || i, t.body, NULL, t.data,
                \(secondOfNotification("i")) * 1000000, t.distribution, t.priority, NULL, NULL, NULL, t.target, \(recipients)
            FROM \(from) CROSS JOIN notifications t WHERE t.id = '\(SeedPlan.templateNotification)'
            """
    }

    /// History rows, oldest first: those older than 30 days mostly read, one in 50 archived.
    func history(_ range: Range<Int>, _ dialect: Dialect) -> String {
        let (with, from) = dialect.series(range.lowerBound, range.upperBound)
        let n = "(i / \(recipients))"
        let recent = "\(secondOfNotification(n)) > \(Int64(end.timeIntervalSince1970) - 30 * 86_400)"
        let random = Self.scrambled("i")
        let read = "CASE WHEN \(recent) THEN (CASE WHEN \(random) % 3 = 0 THEN 1 ELSE 0 END) ELSE (CASE WHEN \(random) % 10 = 0 THEN 0 ELSE 1 END) END"
        return with + """
            INSERT INTO history (notification_id, user_id, read, seen, archived, created_at, type)
            SELECT \(notificationID(n, dialect)), \(userOfHistoryRow("i")), \(read), \(read), CASE WHEN \(random) % 50 = 0 THEN 1 ELSE 0 END,
                \(secondOfNotification(n)) * 1000000, \(type(of: n))
            FROM \(from)
            """
    }

    /// Each history row's two deliveries, both delivered: the history sink's and the push.
    func deliveries(_ range: Range<Int>, _ dialect: Dialect) -> String {
        let (with, from) = dialect.series(range.lowerBound, range.upperBound)
        let n = "(i / 2 / \(recipients))"
        let j = "(i / 2)"
        let user = userOfHistoryRow(j)
        let device = "\(dialect.hex("\(startSeconds)", 8)) || 'de71ce' || \(dialect.hex(userNumber(ofHistoryRow: j), 10))"
        // Partitioned, a delivery's id is made from its second, as Herald makes it (ids of one
        // second are consecutive rows here, far fewer than the 2^21 a second holds).
        let timeOrdered = dialect == .postgres && partitioned
        let (idColumn, id) =
            timeOrdered ? ("id, ", "\(secondOfNotification(n)) * \(1 << DeliveryIDs.sequenceBits) + i % \(1 << DeliveryIDs.sequenceBits), ") : ("", "")
        return with + """
            INSERT INTO deliveries (\(idColumn)notification_id, sink, user_id, device_id, distribution, state, attempts, last_error, next_attempt_at, updated_at,
                topic_key, leased, fold)
            SELECT \(id)\(notificationID(n, dialect)), CASE WHEN i % 2 = 0 THEN 'history' ELSE 'fcm' END, \(user),
                CASE WHEN i % 2 = 0 THEN NULL ELSE \(device) END, t.distribution, 'delivered', 1, NULL, NULL,
                \(secondOfNotification(n)) * 1000000 + 200000, NULL, 0, NULL
            FROM \(from) CROSS JOIN notifications t WHERE t.id = '\(SeedPlan.templateNotification)'
            """
    }

    /// Engagement events spread over the period: focus and track events from everyone.
    func events(_ range: Range<Int>, _ dialect: Dialect) -> String {
        let (with, from) = dialect.series(range.lowerBound, range.upperBound)
        let at = "(\(startSeconds) + i * \(Int64(days) * 86_400) / \(max(events, 1))) * 1000000"
        return with + """
            INSERT INTO events (user_id, event_id, type, reaction, card, name, properties, at, received_at)
            SELECT 'seed-user-' || (i % \(users)), 'seed-event-' || i, CASE WHEN i % 3 = 0 THEN 'focus' ELSE 'track' END, NULL, NULL,
                CASE WHEN i % 3 = 0 THEN NULL ELSE 'screen_view' END, '{}', \(at), \(at) + 1000000
            FROM \(from)
            """
    }

    /// The inbox counters recounted from the seeded rows (docs/inbox.md). SQLite's accepts count
    /// their own rows, which a bulk insert bypasses; PostgreSQL's trigger counts each statement's.
    static let recountInbox: [String] = {
        let share = InboxSQL.shares(of: "h")
        return [
            "DELETE FROM inbox_counts WHERE user_id LIKE 'seed-%'",
            """
            INSERT INTO inbox_counts (user_id, type, unseen, unread, archived)
            SELECT h.user_id, h.type, SUM(\(share.unseen)), SUM(\(share.unread)), SUM(\(share.archived))
            FROM history h WHERE h.user_id LIKE 'seed-%' GROUP BY h.user_id, h.type
            """,
        ]
    }()

    static let templateNotification = "000000005eedfeedfeedfeed"

    /// Whether the database holds a seed already: its rows would collide with a second one's.
    static let holdsASeed = "SELECT EXISTS (SELECT 1 FROM users WHERE id = 'seed-user-0')"

    static let alreadySeeded = BenchError("the database holds a seed already (user seed-user-0 exists): seed a fresh database")

    /// The template rows, written through the store so every column is as Herald writes it.
    static func writeTemplates(_ store: any HeraldStorage) async throws {
        _ = try await store.updateSettings(userID: "seed-template") { settings in
            settings.timezone = "Europe/Paris"
        }
        _ = try await store.registerDevice(
            userID: "seed-template", registration: .token("seed-template-token", provider: "fcm"), newID: ObjectIDGenerator().next(), at: Date())
        guard let id = ObjectID(templateNotification) else { throw BenchError("the template notification's id is not an id") }
        let notification = HeraldNotification(
            id: id, type: "comment", title: "Seeded", body: "A notification of the seeded year", url: nil, data: [:], timestamp: Date(timeIntervalSince1970: 0),
            target: .users(["seed-template"]))
        _ = try await store.accept(notification, recipients: 1, deliveries: [], idempotencySince: Date())
    }

    /// The tables written, with how many rows each gets, in order.
    func parts(_ dialect: Dialect) -> [SeedPart] {
        [
            SeedPart(table: "users", rows: users) { users($0, dialect) },
            SeedPart(table: "settings_versions", rows: users) { settingsVersions($0, dialect) },
            SeedPart(table: "devices", rows: users) { devices($0, dialect) },
            SeedPart(table: "notifications", rows: notifications) { notifications($0, dialect) },
            SeedPart(table: "history", rows: history) { history($0, dialect) },
            SeedPart(table: "deliveries", rows: history * 2) { deliveries($0, dialect) },
            SeedPart(table: "events", rows: events) { events($0, dialect) },
        ]
    }

    static func progress(_ line: String) {
        StandardStream.error.write("herald-bench seed: \(line)\n")
    }
}

/// One table of a seed: how many rows it gets, and the statement that writes rows `range`.
struct SeedPart: Sendable {
    let table: String
    let rows: Int
    let sql: @Sendable (Range<Int>) -> String
}

/// Writes a plan into a SQLite file: the secondary indexes of each table are dropped while its
/// rows go in and built again after (a sort instead of millions of b-tree inserts).
struct SQLiteSeeder {
    let path: String
    let plan: SeedPlan

    func seed() async throws {
        let store = try SQLiteStore(path: path)
        do {
            try await store.migrate()
            let seeded = try await store.writer.read { db in try Bool.fetchOne(db, sql: SeedPlan.holdsASeed) ?? false }
            if seeded { throw SeedPlan.alreadySeeded }
            try await SeedPlan.writeTemplates(store)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            // A seed is rewritten from scratch if the machine stops: no fsync per transaction.
            try db.execute(sql: "PRAGMA synchronous = OFF")
            try db.execute(sql: "PRAGMA cache_size = -1048576")
        }
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        for part in plan.parts(.sqlite) where part.rows > 0 {
            let indexes = try await queue.write { db in
                let indexes = try Row.fetchAll(
                    db, sql: "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", arguments: [part.table]
                ).map { (name: $0["name"] as String, sql: $0["sql"] as String) }
                for index in indexes { try db.execute(sql: "DROP INDEX \(index.name)") }
                return indexes
            }
            try await SeedProgress.run(part.table, rows: part.rows) { range in
                try await queue.write { db in try db.execute(sql: part.sql(range)) }
            }
            let started = ContinuousClock.now
            try await queue.write { db in
                for index in indexes { try db.execute(sql: index.sql) }
            }
            SeedPlan.progress("\(part.table): \(indexes.count) indexes built in \(SeedProgress.seconds(since: started)) s")
        }
        try await queue.write { db in
            for statement in SeedPlan.recountInbox { try db.execute(sql: statement) }
            // No `ANALYZE`: Herald never runs it, so a deployment's planner has no statistics,
            // and the query plan tests check the plans it makes without them. Statistics taken
            // here would measure plans no deployment makes, and on a small database (the year
            // benchmark's empty one) they say its tables are tiny long after they have grown:
            // history pages then scanned every notification (docs/performance.md, "A seeded year").
        }
        try queue.close()
        // `synchronous = OFF` leaves the file's last gigabytes in the kernel's cache, written back
        // later: while the first measure runs, or never if the machine stops after a kept seed
        // was renamed into place. Written out here, in the seed's own time.
        let synced = ContinuousClock.now
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try file.synchronize()
        try file.close()
        SeedPlan.progress("\(path): written to disk in \(SeedProgress.seconds(since: synced)) s")
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        SeedPlan.progress("\(path): \(size / 1_048_576) MiB")
    }
}

/// Writes a plan into a PostgreSQL database: secondary indexes dropped while each table fills
/// and built again after, then `VACUUM ANALYZE` (visibility map and statistics, as autovacuum
/// would leave a database that grew over a year).
struct PostgresSeeder {
    let url: String
    let plan: SeedPlan

    func seed() async throws {
        try await Self.createDatabaseIfMissing(url)
        try await PostgresStore.using(url) { store in
            if plan.partitioned {
                try await store.migrate()
                // Every seeded month in a partition of its own, as Herald would have made them.
                let start = Date(timeIntervalSince1970: TimeInterval(plan.startSeconds))
                for table in PostgresStore.partitionedTables {
                    let created = try await store.createPartitions(of: table, from: start, through: plan.end)
                    SeedPlan.progress("\(table.table): \(created.count) month partitions created")
                }
            } else {
                try await store.migrateAsBeforePartitions()
            }
            let seeded = try await store.withConnection { session in
                try await session.row(PostgresQuery(unsafeSQL: SeedPlan.holdsASeed))?.first?.decode(Bool.self) ?? false
            }
            if seeded { throw SeedPlan.alreadySeeded }
            try await SeedPlan.writeTemplates(store)
            for part in plan.parts(.postgres) where part.rows > 0 {
                let indexes = try await store.withConnection { session in
                    let rows = try await session.rows(
                        PostgresQuery(
                            unsafeSQL: """
                                SELECT i.indexname, i.indexdef FROM pg_indexes i
                                WHERE i.tablename = '\(part.table)' AND i.schemaname = current_schema()
                                AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)
                                """))
                    // A partitioned table's index reads `ON ONLY` (the parent alone, left invalid
                    // until each partition's is attached); built again it must cover them all.
                    let indexes = try rows.map {
                        (name: try $0.text("indexname"), sql: try $0.text("indexdef").replacingOccurrences(of: " ON ONLY ", with: " ON "))
                    }
                    for index in indexes { try await session.execute(PostgresQuery(unsafeSQL: "DROP INDEX \(index.name)")) }
                    return indexes
                }
                try await SeedProgress.run(part.table, rows: part.rows) { range in
                    try await store.withConnection { session in try await session.execute(PostgresQuery(unsafeSQL: part.sql(range))) }
                }
                let started = ContinuousClock.now
                try await store.withConnection { session in
                    try await session.execute(PostgresQuery(unsafeSQL: "SET maintenance_work_mem = '512MB'"))
                    for index in indexes { try await session.execute(PostgresQuery(unsafeSQL: index.sql)) }
                    try await session.execute(PostgresQuery(unsafeSQL: "VACUUM ANALYZE \(part.table)"))
                }
                SeedPlan.progress("\(part.table): \(indexes.count) indexes built, vacuumed in \(SeedProgress.seconds(since: started)) s")
            }
            // The later migrations, past the partitions', which leave a history with rows as it is.
            if !plan.partitioned { try await store.migrate() }
            // The seed's pages out of shared buffers and the WAL's tail applied now, not in the
            // checkpoint that would otherwise fall inside the first measure.
            let checkpointed = ContinuousClock.now
            do {
                try await store.withConnection { session in try await session.execute(PostgresQuery(unsafeSQL: "CHECKPOINT")) }
                SeedPlan.progress("checkpoint in \(SeedProgress.seconds(since: checkpointed)) s")
            } catch {
                // CHECKPOINT needs a superuser or pg_checkpoint; without it the seed is whole all the same.
                SeedPlan.progress("no checkpoint (\(String(reflecting: error))): the server's next one falls where it falls")
            }
            let size = try await store.withConnection { session in
                try await session.row(PostgresQuery(unsafeSQL: "SELECT pg_database_size(current_database()) AS size"))?.integer("size") ?? 0
            }
            SeedPlan.progress("database: \(size / 1_048_576) MiB")
        }
    }
}

extension PostgresSeeder {
    /// Creates the URL's database when the server has none of that name (asked through the
    /// server's `postgres` database), so a seed can go to a new database by naming it.
    static func createDatabaseIfMissing(_ url: String) async throws {
        guard var components = URLComponents(string: url) else { throw ValidationError("--database is not a URL: \(url)") }
        let name = String(components.path.drop { $0 == "/" })
        components.path = "/postgres"
        guard !name.isEmpty, let server = components.string else { throw ValidationError("--database must name a database: \(url)") }
        let exists = try await PostgresStore.using(server) { store in
            try await store.withConnection { session in try await session.row("SELECT 1 AS found FROM pg_database WHERE datname = \(name)") } != nil
        }
        if !exists {
            _ = try await PostgresStore.createDatabase(named: name, onServer: server)
            SeedPlan.progress("database \(name) created")
        }
    }
}

extension PostgresStore {
    /// Runs `body` with a store of two connections on `url`, closed after whether it threw or not.
    static func using<Result: Sendable>(_ url: String, _ body: (PostgresStore) async throws -> Result) async throws -> Result {
        let store = try PostgresStore(url: url, maxConnections: 2)
        do {
            let result = try await body(store)
            await store.close()
            return result
        } catch {
            await store.close()
            throw error
        }
    }
}

/// Runs a table's inserts in chunks, printing a line every few seconds.
enum SeedProgress {
    static func run(_ table: String, rows: Int, _ write: (Range<Int>) async throws -> Void) async throws {
        let started = ContinuousClock.now
        var said = started
        for from in stride(from: 0, to: rows, by: SeedPlan.chunk) {
            try await write(from..<min(from + SeedPlan.chunk, rows))
            let done = min(from + SeedPlan.chunk, rows)
            if ContinuousClock.now - said > .seconds(5) || done == rows {
                said = ContinuousClock.now
                let elapsed = max((said - started).seconds, 1e-3)
                SeedPlan.progress("\(table): \(done) of \(rows) rows (\(Int(Double(done) / elapsed)) a second)")
            }
        }
    }

    static func seconds(since started: ContinuousClock.Instant) -> Int {
        Int((ContinuousClock.now - started).seconds)
    }
}
