import PostgresNIO

/// Versioned schema migrations for the PostgreSQL store, recorded in `herald_migrations`.
/// Append new migrations; never edit one that has shipped.
///
/// Columns mirror the SQLite schema (times as microseconds, JSON as text) so both stores share
/// one set of row mappers.
enum PostgresSchema {
    static let migrations: [(name: String, sql: [String])] = [
        (
            "v1-herald",
            [
                """
                CREATE TABLE api_keys (
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL,
                    role TEXT NOT NULL,
                    secret_hash TEXT NOT NULL UNIQUE,
                    created_at BIGINT NOT NULL,
                    revoked_at BIGINT
                )
                """,
                """
                CREATE TABLE users (
                    id TEXT PRIMARY KEY,
                    settings TEXT,
                    attributes TEXT,
                    updated_at BIGINT NOT NULL,
                    recommended_at BIGINT
                )
                """,
                """
                CREATE TABLE devices (
                    id TEXT PRIMARY KEY,
                    user_id TEXT NOT NULL,
                    fcm_token TEXT NOT NULL UNIQUE,
                    platform TEXT,
                    app_version TEXT,
                    region TEXT,
                    locale TEXT,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX devices_by_user ON devices(user_id)",
                """
                CREATE TABLE notifications (
                    id TEXT PRIMARY KEY,
                    type TEXT NOT NULL,
                    title TEXT NOT NULL,
                    body TEXT NOT NULL,
                    url TEXT,
                    data TEXT NOT NULL,
                    timestamp BIGINT NOT NULL,
                    distribution TEXT NOT NULL,
                    priority BIGINT NOT NULL,
                    expires_at BIGINT,
                    collapse_key TEXT,
                    idempotency_key TEXT,
                    target TEXT NOT NULL,
                    recipients BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE idempotency_keys (
                    key TEXT PRIMARY KEY,
                    notification_id TEXT NOT NULL,
                    recipients BIGINT NOT NULL,
                    created_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE deliveries (
                    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    notification_id TEXT NOT NULL,
                    sink TEXT NOT NULL,
                    user_id TEXT NOT NULL,
                    device_id TEXT,
                    topic_key TEXT,
                    distribution TEXT NOT NULL,
                    state TEXT NOT NULL,
                    attempts BIGINT NOT NULL DEFAULT 0,
                    last_error TEXT,
                    next_attempt_at BIGINT,
                    updated_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX deliveries_due ON deliveries(next_attempt_at, id) WHERE state = 'pending'",
                "CREATE INDEX deliveries_by_notification ON deliveries(notification_id)",
                "CREATE INDEX deliveries_pending_by_device ON deliveries(device_id) WHERE state = 'pending'",
                """
                CREATE TABLE history (
                    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    notification_id TEXT NOT NULL,
                    user_id TEXT NOT NULL,
                    read BIGINT NOT NULL DEFAULT 0,
                    created_at BIGINT NOT NULL,
                    UNIQUE (notification_id, user_id)
                )
                """,
                "CREATE INDEX history_by_user ON history(user_id, seq)",
                "CREATE INDEX history_unread ON history(user_id) WHERE read = 0",
                """
                CREATE TABLE channels (
                    seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL,
                    description TEXT NOT NULL,
                    access TEXT NOT NULL
                )
                """,
                """
                CREATE TABLE areas (
                    seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
                    id TEXT PRIMARY KEY,
                    channel_id TEXT NOT NULL,
                    name TEXT NOT NULL,
                    description TEXT NOT NULL,
                    access TEXT NOT NULL
                )
                """,
                "CREATE INDEX areas_by_channel ON areas(channel_id)",
                """
                CREATE TABLE subjects (
                    seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
                    id TEXT PRIMARY KEY,
                    channel_id TEXT NOT NULL,
                    area_id TEXT NOT NULL,
                    name TEXT NOT NULL,
                    description TEXT NOT NULL,
                    access TEXT NOT NULL,
                    tags TEXT NOT NULL,
                    topic_key TEXT NOT NULL UNIQUE,
                    level TEXT NOT NULL,
                    distribution TEXT NOT NULL
                )
                """,
                "CREATE INDEX subjects_by_area ON subjects(area_id)",
                """
                CREATE TABLE subscriptions (
                    user_id TEXT NOT NULL,
                    topic_key TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (user_id, topic_key)
                )
                """,
                "CREATE INDEX subscriptions_by_topic ON subscriptions(topic_key, user_id)",
                """
                CREATE TABLE messages (
                    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    msi_key TEXT NOT NULL UNIQUE,
                    topic_key TEXT NOT NULL,
                    title TEXT NOT NULL,
                    description TEXT NOT NULL,
                    message TEXT NOT NULL,
                    distribution TEXT NOT NULL,
                    timestamp BIGINT NOT NULL,
                    sender TEXT NOT NULL
                )
                """,
                "CREATE INDEX messages_by_topic ON messages(topic_key, seq)",
                """
                CREATE TABLE feed_messages (
                    id TEXT PRIMARY KEY,
                    title TEXT NOT NULL,
                    body TEXT NOT NULL,
                    url TEXT,
                    posted_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    priority BIGINT NOT NULL,
                    target_regions TEXT NOT NULL,
                    target_version TEXT
                )
                """,
                "CREATE INDEX feed_messages_by_expiry ON feed_messages(expires_at)",
                """
                CREATE TABLE content_sets (
                    name TEXT PRIMARY KEY CHECK (name IN ('pending', 'published')),
                    items TEXT NOT NULL,
                    last_published_at BIGINT
                )
                """,
                "INSERT INTO content_sets (name, items) VALUES ('pending', '[]'), ('published', '[]')",
            ]
        ),
        (
            "v2-portal-sessions",
            [
                """
                CREATE TABLE portal_sessions (
                    id_hash TEXT PRIMARY KEY,
                    key_id TEXT NOT NULL,
                    csrf TEXT NOT NULL,
                    expires_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX portal_sessions_by_expiry ON portal_sessions(expires_at)",
            ]
        ),
        (
            // Devices of any provider: every existing device is an FCM token.
            "v3-device-providers",
            [
                "ALTER TABLE devices RENAME COLUMN fcm_token TO address_key",
                "ALTER TABLE devices ADD COLUMN provider TEXT NOT NULL DEFAULT 'fcm'",
                "ALTER TABLE devices ALTER COLUMN provider DROP DEFAULT",
                "ALTER TABLE devices ADD COLUMN address_json TEXT",
                "ALTER TABLE devices ADD COLUMN app TEXT",
                "ALTER TABLE devices ADD COLUMN options TEXT",
                "ALTER TABLE devices DROP CONSTRAINT devices_fcm_token_key",
                "ALTER TABLE devices ADD CONSTRAINT devices_provider_address_key UNIQUE (provider, address_key)",
            ]
        ),
        (
            // Keys are scoped to the API key that sent them and remember the request's hash. Old
            // global keys cannot be scoped; they last 24 hours at most, so they are dropped.
            "v4-scoped-idempotency",
            [
                "DROP TABLE idempotency_keys",
                """
                CREATE TABLE idempotency_keys (
                    scope TEXT NOT NULL,
                    key TEXT NOT NULL,
                    request_hash TEXT NOT NULL,
                    notification_id TEXT NOT NULL,
                    recipients BIGINT NOT NULL,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (scope, key)
                )
                """,
                "CREATE INDEX idempotency_keys_by_age ON idempotency_keys(created_at)",
            ]
        ),
        (
            // The maintenance loop purges by age in small batches; these keep each batch a range scan.
            "v5-retention-indexes",
            [
                "CREATE INDEX deliveries_finished_by_age ON deliveries(updated_at) WHERE state <> 'pending'",
                "CREATE INDEX history_by_age ON history(created_at)",
                "CREATE INDEX messages_by_age ON messages(timestamp)",
                "CREATE INDEX notifications_by_age ON notifications(timestamp)",
                "CREATE INDEX devices_by_age ON devices(updated_at)",
            ]
        ),
        (
            // Whether a claimed delivery awaits its outcome: only those get their lease extended.
            "v6-fenced-leases",
            ["ALTER TABLE deliveries ADD COLUMN leased SMALLINT NOT NULL DEFAULT 0"]
        ),
        (
            // `clock` and `seq` only grow: a pull's cache key is the pair it saw (docs/cards.md).
            "v7-cards",
            [
                """
                CREATE TABLE cards (
                    id TEXT PRIMARY KEY,
                    metadata TEXT NOT NULL,
                    posted_at BIGINT NOT NULL,
                    hot DOUBLE PRECISION,
                    deleted SMALLINT NOT NULL DEFAULT 0,
                    clock BIGINT NOT NULL
                )
                """,
                "CREATE INDEX cards_by_clock ON cards(clock)",
                "CREATE TABLE card_clock (id INTEGER PRIMARY KEY CHECK (id = 1), value BIGINT NOT NULL)",
                "INSERT INTO card_clock (id, value) VALUES (1, 0)",
                "CREATE TABLE card_users (user_id TEXT PRIMARY KEY, seq BIGINT NOT NULL, next_index BIGINT NOT NULL)",
                """
                CREATE TABLE user_cards (
                    user_id TEXT NOT NULL,
                    card_id TEXT NOT NULL,
                    score DOUBLE PRECISION,
                    score_ts DOUBLE PRECISION,
                    seen_index BIGINT,
                    seen_at BIGINT,
                    seq BIGINT NOT NULL,
                    PRIMARY KEY (user_id, card_id)
                )
                """,
                "CREATE INDEX user_cards_by_seq ON user_cards(user_id, seq)",
                "CREATE INDEX user_cards_pool ON user_cards(user_id, score DESC, card_id) WHERE seen_index IS NULL",
                "CREATE INDEX user_cards_by_card ON user_cards(card_id)",
                """
                CREATE TABLE events (
                    seq BIGSERIAL PRIMARY KEY,
                    user_id TEXT NOT NULL,
                    event_id TEXT NOT NULL,
                    type TEXT NOT NULL,
                    reaction TEXT,
                    card TEXT,
                    name TEXT,
                    properties TEXT NOT NULL,
                    at BIGINT NOT NULL,
                    received_at BIGINT NOT NULL,
                    UNIQUE (user_id, event_id)
                )
                """,
                "CREATE INDEX events_by_card ON events(card, type) WHERE card IS NOT NULL",
                "CREATE INDEX events_by_age ON events(received_at)",
            ]
        ),
        ("v8-topic-members", [TopicMembershipSQL.table]),
        ("v9-fanout-jobs", [FanOutJobSQL.table, FanOutJobSQL.pendingIndex]),
        ("v10-card-history-index", [SharedSchema.cardHistoryIndex]),
        // As SQLite's v15: APNs tokens in hex keyed in lower case, one row per device.
        (
            "v11-apns-keys-in-lower-case",
            [
                """
                WITH duplicates AS (
                    SELECT id FROM (
                        SELECT id, row_number() OVER (PARTITION BY lower(address_key) ORDER BY updated_at DESC, id DESC) AS n
                        FROM devices WHERE provider = 'apns' AND address_key ~ '^[0-9A-Fa-f]+$'
                    ) ranked WHERE n > 1
                ), failed AS (
                    UPDATE deliveries SET state = 'failed', last_error = '\(DeviceKeys.mergedReason)', next_attempt_at = NULL,
                        updated_at = (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
                    WHERE state = 'pending' AND device_id IN (SELECT id FROM duplicates)
                )
                DELETE FROM devices WHERE id IN (SELECT id FROM duplicates)
                """,
                """
                UPDATE devices SET address_json = COALESCE(address_json, to_json(address_key)::text), address_key = lower(address_key)
                WHERE provider = 'apns' AND address_key ~ '^[0-9A-Fa-f]+$' AND address_key <> lower(address_key)
                """,
            ]
        ),
        // Pool ties go to the card id's bytes (`COLLATE "C"` in promote and pulls), whatever the
        // database's collation: the index that orders a pool orders it the same way.
        (
            "v12-card-pool-bytewise",
            [
                "DROP INDEX user_cards_pool",
                #"CREATE INDEX user_cards_pool ON user_cards(user_id, score DESC, card_id COLLATE "C") WHERE seen_index IS NULL"#,
            ]
        ),
        // As SQLite's v16: ended tokens, anonymous devices' secrets, and since when.
        (
            "v13-user-credentials",
            UserCredentialSQL.tables + [
                """
                INSERT INTO herald_facts (name, value)
                VALUES ('\(UserCredentialSQL.secretsSince)', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
                """
            ]
        ),
        ("v14-device-installations", [DeviceInstallationSQL.column]),
        // As SQLite's v18: what accepted notifications are explained with.
        ("v15-routing-records", RoutingRecordSQL.migration),
        // As SQLite's v19: scheduled sends' instants.
        ("v16-scheduled-fanouts", [FanOutJobSQL.dueColumn, FanOutJobSQL.cancelledColumn, FanOutJobSQL.dueIndex]),
        ("v17-scheduled-notifications", [FanOutJobSQL.sendAtColumn]),
        // As SQLite's v21: sends in each recipient's own time.
        ("v18-local-time-sends", FanOutJobSQL.localMigration),
        // As SQLite's v22: caps, digest windows, quiet hours that hold.
        ("v19-folding", FoldingSQL.migration),
        // As SQLite's v23: pending fan-outs read in index order.
        ("v20-fanout-paging", FanOutJobSQL.pagingMigration),
        // As SQLite's v24: inbox states and their counters (docs/inbox.md).
        ("v21-inbox", InboxSQL.columns + InboxSQL.postgresTriggers),
        // History partitioned by month, when it is still empty (docs/durability.md).
        ("v22-history-partitions", [MonthPartitionedTable.history.migration()]),
        // Delivery ids from time, and deliveries partitioned by month when still empty (docs/durability.md).
        ("v23-delivery-partitions", MonthPartitionedTable.deliveriesMigration),
        // Events partitioned by the month they were received, when still empty (docs/durability.md).
        ("v24-event-partitions", [MonthPartitionedTable.events.migration()]),
        // As SQLite's v25: first attempts and retries due, each in its own index (DueDeliveriesSQL).
        ("v25-due-kinds", DueDeliveriesSQL.migration(columns: DueDeliveriesSQL.postgresColumns)),
        // As SQLite's v26: pending deliveries by sink and notification (QueueStatsSQL).
        ("v26-pending-by-sink", QueueStatsSQL.migration),
        // As SQLite's v27: due deliveries by sink (DueDeliveriesSQL).
        ("v27-due-by-sink", DueDeliveriesSQL.bySinkMigration(columns: DueDeliveriesSQL.postgresColumns)),
    ]

    /// Applies every migration not yet recorded. Several processes may start at once: an
    /// advisory lock held until the transaction ends lets one migrate while the others wait.
    /// - Returns: recorded migrations this build does not know, sorted.
    /// The store's migrations, then its modules' (recorded as `<module>/<name>`), each once.
    /// - Returns: migrations recorded that neither list holds (a newer Herald's); a module's that
    ///   is no longer given are not among them.
    /// The advisory lock a migration holds until its transaction ends.
    static let migrationLock: Int64 = 7_243_150

    /// - Parameter stoppingBefore: for tests of an older schema's upgrade: this migration and
    ///   everything after it are left for a later run.
    static func migrate(_ session: PostgresSession, modules: StorageModules, stoppingBefore: String? = nil) async throws -> [String] {
        try await session.execute("SELECT pg_advisory_xact_lock(\(migrationLock))")
        try await session.execute("CREATE TABLE IF NOT EXISTS herald_migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        let applied = Set(try await session.rows("SELECT name FROM herald_migrations").map { try $0.text("name") })
        var all = migrations + modules.migrations.map { (name: $0.name, sql: $0.migration.postgres) }
        if let stoppingBefore, let stop = all.firstIndex(where: { $0.name == stoppingBefore }) { all = Array(all[..<stop]) }
        for migration in all where !applied.contains(migration.name) {
            for statement in migration.sql {
                try await session.execute(PostgresQuery(unsafeSQL: statement))
            }
            try await session.execute("INSERT INTO herald_migrations (name) VALUES (\(migration.name))")
        }
        return applied.subtracting(all.map(\.name)).filter { !StorageModules.isModuleMigration($0) }.sorted()
    }
}
