import Foundation
import GRDB
import HeraldCore

/// Versioned schema migrations for the SQLite store. Append new migrations; never edit one
/// that has shipped.
enum SQLiteSchema {
    /// Whether `db` holds Herald's schema: any of its migrations recorded (none in an empty
    /// database or another program's).
    static func isPresent(in db: Database) throws -> Bool {
        try !migrator.appliedIdentifiers(db).isEmpty
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-core") { db in
            try db.execute(
                sql: """
                    CREATE TABLE api_keys (
                        id TEXT PRIMARY KEY,
                        name TEXT NOT NULL,
                        role TEXT NOT NULL,
                        secret_hash TEXT NOT NULL UNIQUE,
                        created_at INTEGER NOT NULL,
                        revoked_at INTEGER
                    );
                    CREATE TABLE users (
                        id TEXT PRIMARY KEY,
                        settings TEXT,
                        attributes TEXT,
                        updated_at INTEGER NOT NULL
                    );
                    CREATE TABLE devices (
                        id TEXT PRIMARY KEY,
                        user_id TEXT NOT NULL,
                        fcm_token TEXT NOT NULL UNIQUE,
                        platform TEXT,
                        app_version TEXT,
                        region TEXT,
                        locale TEXT,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL
                    );
                    CREATE INDEX devices_by_user ON devices(user_id);
                    CREATE TABLE notifications (
                        id TEXT PRIMARY KEY,
                        type TEXT NOT NULL,
                        title TEXT NOT NULL,
                        body TEXT NOT NULL,
                        url TEXT,
                        data TEXT NOT NULL,
                        timestamp INTEGER NOT NULL,
                        distribution TEXT NOT NULL,
                        priority INTEGER NOT NULL,
                        expires_at INTEGER,
                        collapse_key TEXT,
                        idempotency_key TEXT,
                        target TEXT NOT NULL,
                        recipients INTEGER NOT NULL
                    );
                    CREATE TABLE idempotency_keys (
                        key TEXT PRIMARY KEY,
                        notification_id TEXT NOT NULL,
                        recipients INTEGER NOT NULL,
                        created_at INTEGER NOT NULL
                    );
                    CREATE TABLE deliveries (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        notification_id TEXT NOT NULL,
                        sink TEXT NOT NULL,
                        user_id TEXT NOT NULL,
                        device_id TEXT,
                        distribution TEXT NOT NULL,
                        state TEXT NOT NULL,
                        attempts INTEGER NOT NULL DEFAULT 0,
                        last_error TEXT,
                        next_attempt_at INTEGER,
                        updated_at INTEGER NOT NULL
                    );
                    CREATE INDEX deliveries_due ON deliveries(next_attempt_at) WHERE state = 'pending';
                    CREATE INDEX deliveries_by_notification ON deliveries(notification_id);
                    CREATE INDEX deliveries_pending_by_device ON deliveries(device_id) WHERE state = 'pending';
                    CREATE TABLE history (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        notification_id TEXT NOT NULL,
                        user_id TEXT NOT NULL,
                        read INTEGER NOT NULL DEFAULT 0,
                        created_at INTEGER NOT NULL,
                        UNIQUE (notification_id, user_id)
                    );
                    CREATE INDEX history_by_user ON history(user_id, seq);
                    CREATE INDEX history_unread ON history(user_id) WHERE read = 0;
                    """
            )
        }
        migrator.registerMigration("v2-topics") { db in
            try db.execute(
                sql: """
                    CREATE TABLE channels (
                        id TEXT PRIMARY KEY,
                        name TEXT NOT NULL,
                        description TEXT NOT NULL,
                        access TEXT NOT NULL
                    );
                    CREATE TABLE areas (
                        id TEXT PRIMARY KEY,
                        channel_id TEXT NOT NULL,
                        name TEXT NOT NULL,
                        description TEXT NOT NULL,
                        access TEXT NOT NULL
                    );
                    CREATE INDEX areas_by_channel ON areas(channel_id);
                    CREATE TABLE subjects (
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
                    );
                    CREATE INDEX subjects_by_area ON subjects(area_id);
                    CREATE TABLE subscriptions (
                        user_id TEXT NOT NULL,
                        topic_key TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        PRIMARY KEY (user_id, topic_key)
                    );
                    CREATE INDEX subscriptions_by_topic ON subscriptions(topic_key, user_id);
                    ALTER TABLE users ADD COLUMN recommended_at INTEGER;
                    CREATE TABLE messages (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        msi_key TEXT NOT NULL UNIQUE,
                        topic_key TEXT NOT NULL,
                        title TEXT NOT NULL,
                        description TEXT NOT NULL,
                        message TEXT NOT NULL,
                        distribution TEXT NOT NULL,
                        timestamp INTEGER NOT NULL,
                        sender TEXT NOT NULL
                    );
                    CREATE INDEX messages_by_topic ON messages(topic_key, seq);
                    """
            )
        }
        migrator.registerMigration("v3-topic-sends") { db in
            try db.execute(sql: "ALTER TABLE deliveries ADD COLUMN topic_key TEXT")
        }
        migrator.registerMigration("v4-feed") { db in
            try db.execute(
                sql: """
                    CREATE TABLE feed_messages (
                        id TEXT PRIMARY KEY,
                        title TEXT NOT NULL,
                        body TEXT NOT NULL,
                        url TEXT,
                        posted_at INTEGER NOT NULL,
                        expires_at INTEGER NOT NULL,
                        priority INTEGER NOT NULL,
                        target_regions TEXT NOT NULL,
                        target_version TEXT
                    );
                    CREATE INDEX feed_messages_by_expiry ON feed_messages(expires_at);
                    """
            )
        }
        migrator.registerMigration("v5-content") { db in
            try db.execute(
                sql: """
                    CREATE TABLE content_sets (
                        name TEXT PRIMARY KEY CHECK (name IN ('pending', 'published')),
                        items TEXT NOT NULL,
                        last_published_at INTEGER
                    );
                    INSERT INTO content_sets (name, items) VALUES ('pending', '[]'), ('published', '[]');
                    """
            )
        }
        migrator.registerMigration("v6-portal-sessions") { db in
            try db.execute(
                sql: """
                    CREATE TABLE portal_sessions (
                        id_hash TEXT PRIMARY KEY,
                        key_id TEXT NOT NULL,
                        csrf TEXT NOT NULL,
                        expires_at INTEGER NOT NULL
                    );
                    CREATE INDEX portal_sessions_by_expiry ON portal_sessions(expires_at);
                    """
            )
        }
        migrator.registerMigration("v7-device-providers") { db in
            // Devices of any provider: every existing device is an FCM token. SQLite cannot drop
            // the old UNIQUE (fcm_token), so the table is rebuilt.
            try db.execute(
                sql: """
                    CREATE TABLE devices_v7 (
                        id TEXT PRIMARY KEY,
                        user_id TEXT NOT NULL,
                        provider TEXT NOT NULL,
                        address_key TEXT NOT NULL,
                        address_json TEXT,
                        app TEXT,
                        options TEXT,
                        platform TEXT,
                        app_version TEXT,
                        region TEXT,
                        locale TEXT,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL,
                        UNIQUE (provider, address_key)
                    );
                    INSERT INTO devices_v7 (id, user_id, provider, address_key, platform, app_version, region, locale, created_at, updated_at)
                        SELECT id, user_id, 'fcm', fcm_token, platform, app_version, region, locale, created_at, updated_at FROM devices;
                    DROP TABLE devices;
                    ALTER TABLE devices_v7 RENAME TO devices;
                    CREATE INDEX devices_by_user ON devices(user_id);
                    """
            )
        }
        migrator.registerMigration("v8-scoped-idempotency") { db in
            // Keys are scoped to the API key that sent them and remember the request's hash. Old
            // global keys cannot be scoped; they last 24 hours at most, so they are dropped.
            try db.execute(
                sql: """
                    DROP TABLE idempotency_keys;
                    CREATE TABLE idempotency_keys (
                        scope TEXT NOT NULL,
                        key TEXT NOT NULL,
                        request_hash TEXT NOT NULL,
                        notification_id TEXT NOT NULL,
                        recipients INTEGER NOT NULL,
                        created_at INTEGER NOT NULL,
                        PRIMARY KEY (scope, key)
                    );
                    CREATE INDEX idempotency_keys_by_age ON idempotency_keys(created_at);
                    """
            )
        }
        migrator.registerMigration("v9-retention-indexes") { db in
            // The maintenance loop purges by age in small batches; these keep each batch a range scan.
            try db.execute(
                sql: """
                    CREATE INDEX deliveries_finished_by_age ON deliveries(updated_at) WHERE state <> 'pending';
                    CREATE INDEX history_by_age ON history(created_at);
                    CREATE INDEX messages_by_age ON messages(timestamp);
                    CREATE INDEX notifications_by_age ON notifications(timestamp);
                    CREATE INDEX devices_by_age ON devices(updated_at);
                    """
            )
        }
        migrator.registerMigration("v10-fenced-leases") { db in
            // Whether a claimed delivery awaits its outcome: only those get their lease extended.
            try db.execute(sql: "ALTER TABLE deliveries ADD COLUMN leased INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v11-cards") { db in
            // `clock` and `seq` only grow: a pull's cache key is the pair it saw (docs/cards.md).
            try db.execute(
                sql: """
                    CREATE TABLE cards (
                        id TEXT PRIMARY KEY,
                        metadata TEXT NOT NULL,
                        posted_at INTEGER NOT NULL,
                        hot REAL,
                        deleted INTEGER NOT NULL DEFAULT 0,
                        clock INTEGER NOT NULL
                    );
                    CREATE INDEX cards_by_clock ON cards(clock);
                    CREATE TABLE card_clock (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL);
                    INSERT INTO card_clock (id, value) VALUES (1, 0);
                    CREATE TABLE card_users (
                        user_id TEXT PRIMARY KEY,
                        seq INTEGER NOT NULL,
                        next_index INTEGER NOT NULL
                    );
                    CREATE TABLE user_cards (
                        user_id TEXT NOT NULL,
                        card_id TEXT NOT NULL,
                        score REAL,
                        score_ts REAL,
                        seen_index INTEGER,
                        seen_at INTEGER,
                        seq INTEGER NOT NULL,
                        PRIMARY KEY (user_id, card_id)
                    );
                    CREATE INDEX user_cards_by_seq ON user_cards(user_id, seq);
                    CREATE INDEX user_cards_pool ON user_cards(user_id, score DESC, card_id) WHERE seen_index IS NULL;
                    CREATE INDEX user_cards_by_card ON user_cards(card_id);
                    CREATE TABLE events (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        user_id TEXT NOT NULL,
                        event_id TEXT NOT NULL,
                        type TEXT NOT NULL,
                        reaction TEXT,
                        card TEXT,
                        name TEXT,
                        properties TEXT NOT NULL,
                        at INTEGER NOT NULL,
                        received_at INTEGER NOT NULL,
                        UNIQUE (user_id, event_id)
                    );
                    CREATE INDEX events_by_card ON events(card, type) WHERE card IS NOT NULL;
                    CREATE INDEX events_by_age ON events(received_at);
                    """
            )
        }
        migrator.registerMigration("v12-topic-members") { db in
            try db.execute(sql: TopicMembershipSQL.table)
        }
        migrator.registerMigration("v13-fanout-jobs") { db in
            try db.execute(sql: FanOutJobSQL.table)
            try db.execute(sql: FanOutJobSQL.pendingIndex)
        }
        migrator.registerMigration("v14-card-history-index") { db in
            try db.execute(sql: SharedSchema.cardHistoryIndex)
        }
        // APNs tokens in hex are keyed in lower case (RegistrationForm.apns in the APNs sink module): of the rows
        // one device has in several cases the most recently registered stays (its queued pushes
        // are the device's; the others' fail), keyed in lower case with its token kept as sent.
        migrator.registerMigration("v15-apns-keys-in-lower-case") { db in
            let hex = "provider = 'apns' AND address_key NOT GLOB '*[^0-9A-Fa-f]*'"
            try db.execute(
                sql: """
                    CREATE TEMP TABLE apns_duplicates AS SELECT id FROM (
                        SELECT id, row_number() OVER (PARTITION BY lower(address_key) ORDER BY updated_at DESC, id DESC) AS n FROM devices WHERE \(hex)
                    ) WHERE n > 1;
                    """)
            try db.execute(
                sql: """
                    UPDATE deliveries SET state = 'failed', last_error = ?, next_attempt_at = NULL, updated_at = ?
                    WHERE state = 'pending' AND device_id IN (SELECT id FROM apns_duplicates)
                    """,
                arguments: [DeviceKeys.mergedReason, Timestamp.microseconds(Date())])
            try db.execute(sql: "DELETE FROM devices WHERE id IN (SELECT id FROM apns_duplicates); DROP TABLE apns_duplicates")
            try db.execute(
                sql: """
                    UPDATE devices SET address_json = COALESCE(address_json, json_quote(address_key)), address_key = lower(address_key)
                    WHERE \(hex) AND address_key <> lower(address_key)
                    """)
        }
        // Tokens a user's erasure or sign-out ended, anonymous devices' secrets, and when this
        // database began keeping them (docs/security.md).
        migrator.registerMigration("v16-user-credentials") { db in
            for statement in UserCredentialSQL.tables { try db.execute(sql: statement) }
            try db.execute(
                sql: "INSERT INTO herald_facts (name, value) VALUES (?, ?)", arguments: [UserCredentialSQL.secretsSince, Timestamp.microseconds(Date())])
        }
        migrator.registerMigration("v17-device-installations") { db in
            try db.execute(sql: DeviceInstallationSQL.column)
        }
        migrator.registerMigration("v18-routing-records") { db in
            for statement in RoutingRecordSQL.migration { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v19-scheduled-fanouts") { db in
            try db.execute(sql: FanOutJobSQL.dueColumn)
            try db.execute(sql: FanOutJobSQL.cancelledColumn)
            try db.execute(sql: FanOutJobSQL.dueIndex)
        }
        migrator.registerMigration("v20-scheduled-notifications") { db in
            try db.execute(sql: FanOutJobSQL.sendAtColumn)
        }
        migrator.registerMigration("v21-local-time-sends") { db in
            for statement in FanOutJobSQL.localMigration { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v22-folding") { db in
            for statement in FoldingSQL.migration { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v23-fanout-paging") { db in
            for statement in FanOutJobSQL.pagingMigration { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v24-inbox") { db in
            for statement in InboxSQL.columns + InboxSQL.sqliteTriggers { try db.execute(sql: statement) }
        }
        // First attempts and retries due, each in its own index (DueDeliveriesSQL).
        migrator.registerMigration("v25-due-kinds") { db in
            for statement in DueDeliveriesSQL.migration(columns: DueDeliveriesSQL.sqliteColumns) { try db.execute(sql: statement) }
        }
        // Pending deliveries by sink and notification, for the queue's gauges (QueueStatsSQL).
        migrator.registerMigration("v26-pending-by-sink") { db in
            for statement in QueueStatsSQL.migration { try db.execute(sql: statement) }
        }
        // Due deliveries by sink, so a claim that leaves an open circuit out does not walk its backlog (DueDeliveriesSQL).
        migrator.registerMigration("v27-due-by-sink") { db in
            for statement in DueDeliveriesSQL.bySinkMigration(columns: DueDeliveriesSQL.sqliteColumns) { try db.execute(sql: statement) }
        }
        return migrator
    }
}
