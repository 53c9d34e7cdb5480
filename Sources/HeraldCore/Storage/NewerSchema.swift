/// A database migrated by a newer Herald than this one: during a rolling update the older
/// processes run on it (its migrations add what the newer code needs, and the older code goes
/// on reading what it knows), and after a rollback so does the rolled-back version; either way
/// an operator should hear of it rather than find out from a failing request.
public enum NewerSchema {
    /// The warning for the migrations ``HeraldStorage/migrate()`` found and this build does not
    /// know; nil when there are none.
    public static func warning(_ unknown: [String]) -> String? {
        guard !unknown.isEmpty else { return nil }
        let listed = unknown.prefix(5).joined(separator: ", ") + (unknown.count > 5 ? ", …" : "")
        return
            "the database has \(unknown.count) migration(s) this Herald does not know (\(listed)): a newer Herald migrated it. This one runs on it, as the older side of a rolling update does, but knows nothing of what they changed: finish the update, or, for a rollback, restore the backup taken before it"
    }
}
