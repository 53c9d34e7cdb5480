/// The inbox's states on history rows and the counters that follow them (docs/inbox.md): each
/// row is `seen`, `read`, `archived` or snoozed (`snoozed_until`), and `inbox_counts` holds,
/// per user and type, how many rows are unseen, unread and archived. Triggers keep the counters
/// in the transaction that inserts, changes or deletes a row, whichever path does it (an accept,
/// a fan-out page, the history sink, a mark, a purge, an erasure), so they never drift from a
/// recount and nobody counts history per request. (SQLite's inserts count themselves, in the
/// same transaction: see ``sqliteTriggers``.)
package enum InboxSQL {
    /// A row's share of each counter, for the row named `row` (`NEW`, `OLD`, a table alias):
    /// unseen and unread count only rows in the inbox (neither archived nor snoozed).
    package static func shares(of row: String) -> (unseen: String, unread: String, archived: String) {
        let active = "\(row).archived = 0 AND \(row).snoozed_until IS NULL"
        return (
            "CASE WHEN \(row).seen = 0 AND \(active) THEN 1 ELSE 0 END",
            "CASE WHEN \(row).read = 0 AND \(active) THEN 1 ELSE 0 END",
            "CASE WHEN \(row).archived = 1 THEN 1 ELSE 0 END"
        )
    }

    /// Columns, their values for rows written before, indexes and the counters, on both engines.
    static let columns = [
        "ALTER TABLE history ADD COLUMN seen BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE history ADD COLUMN archived BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE history ADD COLUMN snoozed_until BIGINT",
        // The notification's type, kept on the row so a user's items filter and count by it.
        "ALTER TABLE history ADD COLUMN type TEXT NOT NULL DEFAULT ''",
        // A row read before states existed was shown: reading implies seeing.
        "UPDATE history SET seen = 1 WHERE read = 1",
        "UPDATE history SET type = COALESCE((SELECT n.type FROM notifications n WHERE n.id = history.notification_id), '')",
        "DROP INDEX history_unread",
        "CREATE INDEX history_unread ON history(user_id, seq) WHERE read = 0",
        // Unseen rows are found through this index too: reading implies seeing, so an unseen
        // row is always unread (`read = 0 AND seen = 0`). An index of their own cost every
        // history insert another b-tree write. No (user_id, type) index either: SQLite, without
        // statistics, preferred it to the partial indexes for a mark narrowed by type (25 ms
        // instead of 0.2 ms at 100 000 items); a read by type alone walks the user's rows newest
        // first until the page is full.
        "CREATE INDEX history_archived ON history(user_id, seq) WHERE archived = 1",
        "CREATE INDEX history_snoozed ON history(snoozed_until) WHERE snoozed_until IS NOT NULL",
        // Retention per state (`retention.inbox_read`, `retention.inbox_archived`).
        "CREATE INDEX history_read_by_age ON history(created_at) WHERE read = 1",
        "CREATE INDEX history_archived_by_age ON history(created_at) WHERE archived = 1",
        """
        CREATE TABLE inbox_counts (
            user_id TEXT NOT NULL,
            type TEXT NOT NULL,
            unseen BIGINT NOT NULL DEFAULT 0,
            unread BIGINT NOT NULL DEFAULT 0,
            archived BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (user_id, type)
        )
        """,
        {
            let share = shares(of: "h")
            return """
                INSERT INTO inbox_counts (user_id, type, unseen, unread, archived)
                SELECT h.user_id, h.type, SUM(\(share.unseen)), SUM(\(share.unread)), SUM(\(share.archived))
                FROM history h GROUP BY h.user_id, h.type
                """
        }(),
    ]

    /// SQLite: a trigger per row for changes and deletions, each one update of one counter row.
    /// Inserts count themselves (``countInserted`` and ``countFanOutPage``): on SQLite a
    /// statement that fires a trigger keeps a statement journal, in a temporary file, and an
    /// insert trigger made each history row cost three times as much (20 µs more per row, where
    /// the upsert alone costs 3).
    static let sqliteTriggers: [String] = {
        let new = shares(of: "NEW")
        let old = shares(of: "OLD")
        return [
            """
            CREATE TRIGGER inbox_counts_deleted AFTER DELETE ON history BEGIN
                UPDATE inbox_counts SET unseen = unseen - \(old.unseen), unread = unread - \(old.unread), archived = archived - \(old.archived)
                WHERE user_id = OLD.user_id AND type = OLD.type;
            END
            """,
            """
            CREATE TRIGGER inbox_counts_changed AFTER UPDATE OF seen, read, archived, snoozed_until ON history
            WHEN \(new.unseen) <> \(old.unseen) OR \(new.unread) <> \(old.unread) OR \(new.archived) <> \(old.archived) BEGIN
                UPDATE inbox_counts SET unseen = unseen + \(new.unseen) - \(old.unseen), unread = unread + \(new.unread) - \(old.unread),
                    archived = archived + \(new.archived) - \(old.archived)
                WHERE user_id = NEW.user_id AND type = NEW.type;
            END
            """,
        ]
    }()

    /// SQLite: counts one history row just inserted for user `$1` with type `$2` (a new row
    /// is unseen and unread), in its transaction.
    static let countInserted = """
        INSERT INTO inbox_counts (user_id, type, unseen, unread, archived) VALUES ($1, $2, 1, 1, 0)
        ON CONFLICT (user_id, type) DO UPDATE SET unseen = unseen + 1, unread = unread + 1
        """

    /// SQLite: counts the rows a fan-out page's one statement inserted: those after sequence
    /// `$1` (the largest before it; one writer at a time), each of a different user, in rowid
    /// order (no sort).
    static let countFanOutPage = """
        INSERT INTO inbox_counts (user_id, type, unseen, unread, archived)
        SELECT user_id, type, 1, 1, 0 FROM history WHERE seq > $1
        ON CONFLICT (user_id, type) DO UPDATE SET unseen = unseen + 1, unread = unread + 1
        """

    /// PostgreSQL: a trigger per statement over its transition tables, so a fan-out's insert of
    /// a million rows is one grouped upsert, in (user, type) order: two writers lock counter
    /// rows in the same order and never wait on each other in a cycle.
    static let postgresTriggers: [String] = {
        func function(_ name: String, _ body: String) -> String {
            "CREATE FUNCTION \(name)() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \(body); RETURN NULL; END $$"
        }
        return [
            function(
                "herald_inbox_inserted",
                """
                WITH changes AS (\(sums(of: "added", sign: "")))
                INSERT INTO inbox_counts (user_id, type, unseen, unread, archived)
                SELECT * FROM (\(grouped)) AS g ORDER BY user_id, type
                ON CONFLICT (user_id, type) DO UPDATE SET unseen = inbox_counts.unseen + excluded.unseen,
                    unread = inbox_counts.unread + excluded.unread, archived = inbox_counts.archived + excluded.archived
                """),
            function("herald_inbox_deleted", "WITH changes AS (\(sums(of: "removed", sign: "-"))) \(apply)"),
            function(
                "herald_inbox_changed",
                "WITH changes AS (\(sums(of: "new_rows", sign: "")) UNION ALL \(sums(of: "old_rows", sign: "-"))) \(apply)"),
        ] + postgresTriggerStatements
    }()

    /// PostgreSQL: the three triggers on `history` that call ``postgresTriggers``' functions;
    /// created again on a history that becomes partitioned (``MonthPartitionedTable/history``).
    static let postgresTriggerStatements = [
        """
        CREATE TRIGGER inbox_counts_inserted AFTER INSERT ON history
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION herald_inbox_inserted()
        """,
        """
        CREATE TRIGGER inbox_counts_deleted AFTER DELETE ON history
        REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION herald_inbox_deleted()
        """,
        """
        CREATE TRIGGER inbox_counts_changed AFTER UPDATE ON history
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION herald_inbox_changed()
        """,
    ]

    /// The rows the counters count: unread (the unseen are unread too), and archived; each the
    /// predicate of a partial index on `(user_id, seq)` (`history_unread`, `history_archived`).
    /// A history month is rid of them, through the triggers, before it is dropped
    /// (``MonthPartitionedTable/history``).
    static let countedRows = ["read = 0", "archived = 1"]

    /// Each row's shares of `table`, negated when `sign` is "-".
    private static func sums(of table: String, sign: String) -> String {
        let share = shares(of: "r")
        return """
            SELECT r.user_id, r.type, \(sign)(\(share.unseen)) AS unseen, \(sign)(\(share.unread)) AS unread, \(sign)(\(share.archived)) AS archived
            FROM \(table) r
            """
    }

    private static let grouped =
        "SELECT user_id, type, SUM(unseen) AS unseen, SUM(unread) AS unread, SUM(archived) AS archived FROM changes GROUP BY user_id, type"

    /// Adds the grouped `changes` to existing counter rows, in (user, type) order.
    private static let apply = """
        UPDATE inbox_counts c SET unseen = c.unseen + d.unseen, unread = c.unread + d.unread, archived = c.archived + d.archived
        FROM (SELECT * FROM (\(grouped)) AS g WHERE unseen <> 0 OR unread <> 0 OR archived <> 0 ORDER BY user_id, type) AS d
        WHERE c.user_id = d.user_id AND c.type = d.type
        """

    /// The type a history row is written with: its notification's, read in the same statement.
    static func type(of notificationID: String) -> String {
        "COALESCE((SELECT n.type FROM notifications n WHERE n.id = \(notificationID)), '')"
    }
}
