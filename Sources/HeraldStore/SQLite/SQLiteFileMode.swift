import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Who may read the database file. It holds device tokens, users' ids, settings and history:
/// a file SQLite creates gets the process's umask (commonly 0644, readable by every account on
/// the machine), where `herald backup`'s copy was already 0600. A new database is created
/// 0600 before SQLite opens it, and SQLite gives its `-wal` and `-shm` files the database's
/// own permissions. An existing file keeps the mode its operator gave it; ``exposure(of:)``
/// says when others may read it, for a warning at start.
public enum SQLiteFileMode {
    /// Creates `path` empty with mode 0600 when it does not exist (SQLite takes an empty file
    /// as a new database). A failure is left to SQLite's own open to report (a missing
    /// directory, say), and an existing file is not touched.
    static func createPrivately(_ path: String) {
        let descriptor = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        if descriptor >= 0 { close(descriptor) }
    }

    /// The file's permission bits when its group or others may read or write it, nil when only
    /// its owner may (or it cannot be read).
    public static func exposure(of path: String) -> mode_t? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        let permissions = status.st_mode & 0o777
        return permissions & 0o066 == 0 ? nil : permissions
    }
}
