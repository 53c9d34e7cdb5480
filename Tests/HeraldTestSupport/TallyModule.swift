import HeraldCore
public import HeraldStore

/// A feature module as the next issues' would be (a cap's tally): its own table, brought by its
/// own migrations; a count per user and sink kept in the transaction that stores deliveries; its
/// rows erased with the user. A user named `refused` is refused by the table's check, so a
/// failing module statement can be tested.
public enum TallyModule {
    public static let module = StorageModule(
        name: "tally",
        migrations: [
            .init(
                "v1-sends",
                [
                    """
                    CREATE TABLE tally_sends (
                        user_id TEXT NOT NULL CHECK (user_id <> 'refused'), sink TEXT NOT NULL, sends BIGINT NOT NULL, last_notification TEXT NOT NULL,
                        PRIMARY KEY (user_id, sink)
                    )
                    """
                ]),
            .init(
                "v2-by-sink", sqlite: ["CREATE INDEX tally_by_sink ON tally_sends(sink)"],
                postgres: ["CREATE INDEX tally_by_sink ON tally_sends USING btree (sink)"]),
        ],
        erasure: [.init { user in SharedStatement("DELETE FROM tally_sends WHERE user_id = $1", .text(user)) }],
        whenDeliveriesStored: { stored in
            stored.deliveries.filter { !$0.userID.isEmpty }.map { delivery in
                SharedStatement(
                    """
                    INSERT INTO tally_sends (user_id, sink, sends, last_notification) VALUES ($1, $2, 1, $3)
                    ON CONFLICT (user_id, sink) DO UPDATE SET sends = tally_sends.sends + 1, last_notification = $3
                    """, .text(delivery.userID), .text(delivery.sink), .text(stored.notification.hex))
            }
        }
    )

    /// Each user's sends through `sink`, as the module counted them.
    public static func sends(_ database: any SharedSQLDatabase, sink: String) async throws -> [String: Int64] {
        var sends: [String: Int64] = [:]
        for row in try await database.rows(SharedStatement("SELECT user_id, sends FROM tally_sends WHERE sink = $1", .text(sink))) {
            sends[try row.text("user_id")] = try row.integer("sends")
        }
        return sends
    }
}
