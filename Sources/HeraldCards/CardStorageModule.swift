import HeraldCore
public import HeraldStore

extension StorageModule {
    /// What the cards module keeps in the store's own transactions: a user's erasure deletes
    /// their card counter, engagement events, and pool and history rows. Its tables shipped in
    /// both engines' migration lists before modules could bring their own, so it brings none.
    public static let cards = StorageModule(
        name: "cards",
        erasure: [
            // The counter before the cards, as every card write locks it first
            // (PostgresCardStore): deleted after, a score upload holding it waited for a card
            // row the erasure had deleted while the erasure waited for the counter, a deadlock.
            .init { user in SharedStatement("DELETE FROM card_users WHERE user_id = $1", .text(user)) },
            .init(counted: { $0.events += $1 }) { user in SharedStatement("DELETE FROM events WHERE user_id = $1 RETURNING 1 AS erased", .text(user)) },
            .init(counted: { $0.cards += $1 }) { user in SharedStatement("DELETE FROM user_cards WHERE user_id = $1 RETURNING 1 AS erased", .text(user)) },
        ]
    )
}
