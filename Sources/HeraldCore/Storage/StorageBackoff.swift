/// How long a loop whose storage failed waits before its next try: 100 ms doubling with each
/// failure in a row, up to `cap`. Short enough that work resumes soon after the database is
/// back, long enough that a database that is away is not asked in a spin.
public enum StorageBackoff {
    /// The pause after `failures` failures in a row (0 gives 100 ms).
    public static func pause(after failures: Int, cap: Duration) -> Duration {
        min(.milliseconds(100 << min(max(failures, 0), 6)), cap)
    }
}
