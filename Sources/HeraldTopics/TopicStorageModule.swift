import HeraldCore
public import HeraldStore

extension StorageModule {
    /// What the topics module keeps in the store's own transactions: a user's erasure deletes
    /// their subscriptions. Its tables shipped in both engines' migration lists before modules
    /// could bring their own, so it brings none.
    public static let topics = StorageModule(
        name: "topics",
        erasure: [
            .init(counted: { $0.subscriptions += $1 }) { user in
                SharedStatement("DELETE FROM subscriptions WHERE user_id = $1 RETURNING 1 AS erased", .text(user))
            }
        ]
    )
}
