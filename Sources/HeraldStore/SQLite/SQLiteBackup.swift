import Foundation
import GRDB
import HeraldCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A consistent copy of a SQLite database that may be in use, for `herald backup`.
///
/// Copying the file while Herald runs is not a backup: commits since the last checkpoint are in
/// the `-wal` file beside it, and a checkpoint during the copy tears it. `VACUUM INTO` reads one
/// snapshot in a single read transaction, which in WAL mode holds up no writer (a busy server's
/// accepts go on), and writes a compact file; SQLite's page-by-page backup API would start over
/// each time the server committed, and never end under load.
public enum SQLiteBackup {
    public struct Summary: Sendable {
        /// Bytes of the copy.
        public var bytes: Int64
        /// The source's size when the copy began (its pages), for progress.
        public var sourceBytes: Int64
    }

    /// Copies the database at `source` to `destination`, a file that must not exist yet.
    ///
    /// The copy is written beside `destination` under a temporary name (mode 0600: the database
    /// holds device tokens and key hashes), synced, checked with `PRAGMA quick_check`, and only
    /// then renamed: a copy cut short never stands under the name asked for.
    /// - Parameter progress: called about every `interval` with the bytes written so far and
    ///   the source's size.
    /// - Throws: ``HeraldError`` naming the path for a missing source or one without Herald's
    ///   tables, an existing destination, or a copy that fails.
    public static func copy(
        from source: String, to destination: String, interval: Duration = .seconds(2),
        progress: @escaping @Sendable (_ written: Int64, _ total: Int64) -> Void = { _, _ in }
    ) async throws -> Summary {
        guard FileManager.default.fileExists(atPath: source) else {
            throw HeraldError(.notFound, code: "not_found", "there is no SQLite database at '\(source)'")
        }
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw HeraldError(.conflict, code: "destination_exists", "'\(destination)' already exists; name a new file")
        }
        let parent = (destination as NSString).deletingLastPathComponent
        let directory = parent.isEmpty ? "." : parent
        let temporary = directory + "/.\((destination as NSString).lastPathComponent).\(UUID().uuidString).partial"
        let created = open(temporary, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard created >= 0 else {
            throw HeraldError(.unavailable, code: "backup_failed", "cannot create a file in '\(directory)': \(errnoText())")
        }
        close(created)
        var kept = false
        defer { if !kept { unlink(temporary) } }

        var configuration = Configuration()
        // Read-only: a backup must not change what it copies, and may run as a user (or from a
        // mount) that can only read the file. A read-write connection that closed last would
        // checkpoint a crashed server's -wal into the file and delete it; VACUUM INTO needs no
        // write access to its source.
        configuration.readonly = true
        // The server may hold the write lock for a moment; a read in WAL mode does not need it,
        // but opening the file may (the first connection's recovery of the -wal).
        configuration.busyMode = .timeout(5)
        let sourceBytes: Int64
        do {
            let database = try DatabaseQueue(path: source, configuration: configuration)
            defer { try? database.close() }
            sourceBytes = try await database.read { db in
                // An empty file or another program's database, named by a mistyped setting, would
                // give a copy that restores nothing while saying it backed Herald up.
                guard try SQLiteSchema.isPresent(in: db) else {
                    throw HeraldError(
                        .notFound, code: "not_found",
                        "'\(source)' holds no Herald tables: it is empty or another program's (database, HERALD_DATABASE, --database); nothing was copied")
                }
                let pages = try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0
                let size = try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 0
                return pages.multipliedReportingOverflow(by: size).overflow ? .max : pages * size
            }
            let watcher = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    guard !Task.isCancelled else { return }
                    progress(fileSize(temporary), sourceBytes)
                }
            }
            defer { watcher.cancel() }
            try await database.writeWithoutTransaction { db in try db.execute(sql: "VACUUM INTO ?", arguments: [temporary]) }
        } catch let error as HeraldError {
            throw error
        } catch {
            throw HeraldError(.unavailable, code: "backup_failed", "cannot copy '\(source)': \(error)")
        }
        try sync(temporary)
        let check: String?
        do {
            let copy = try DatabaseQueue(path: temporary)
            defer {
                try? copy.close()
                for suffix in ["-wal", "-shm"] { unlink(temporary + suffix) }
            }
            check = try await copy.read { db in try String.fetchOne(db, sql: "PRAGMA quick_check") }
        } catch {
            throw HeraldError(.unavailable, code: "backup_failed", "the copy of '\(source)' could not be read back: \(error)")
        }
        guard check == "ok" else {
            throw HeraldError(.unavailable, code: "backup_failed", "the copy of '\(source)' failed its check: \(check ?? "no answer")")
        }
        // link, not rename: it refuses a destination created meanwhile rather than replacing it.
        guard link(temporary, destination) == 0 else {
            throw HeraldError(.unavailable, code: "backup_failed", "cannot name the copy '\(destination)': \(errnoText())")
        }
        kept = true
        unlink(temporary)
        try sync(directory)
        return Summary(bytes: fileSize(destination), sourceBytes: sourceBytes)
    }

    static func fileSize(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    /// fsync, so the copy (and then its name) is on disk before Herald says it is done.
    static func sync(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw HeraldError(.unavailable, code: "backup_failed", "cannot open '\(path)' to sync it: \(errnoText())") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw HeraldError(.unavailable, code: "backup_failed", "cannot sync '\(path)': \(errnoText())") }
    }

    static func errnoText() -> String {
        String(cString: strerror(errno))
    }
}
