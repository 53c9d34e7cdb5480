import Foundation
import HeraldCards
import HeraldCore
public import HeraldStore
import HeraldTopics
public import Logging

/// Opens the storage named by the `database` setting.
public enum StorageLocation {
    /// `sqlite:PATH`, `sqlite://PATH`, `sqlite::memory:`, or `postgres://user:password@host:port/database`.
    /// - Parameter readURL: a PostgreSQL database's streaming replica (`database_read_url`).
    /// - Parameter logger: where PostgreSQL's connection pool logs (its failed connections, at
    ///   info): the server's, so `log_level` applies to those lines too.
    /// - Parameter modules: feature modules' tables, erasure steps and delivery hooks
    ///   (``StorageModule``); Herald's own (``builtInModules``) by default, which every store
    ///   that serves, migrates or erases users must be given.
    public static func open(
        _ database: String, readURL: String? = nil, maxPendingAccepts: Int = 10_000, modules: [StorageModule] = builtInModules,
        logger: Logger = Logger(label: "herald.postgres")
    ) throws
        -> any ServerStorage
    {
        if let path = sqlitePath(database) {
            guard !path.isEmpty else {
                throw HeraldError(.unprocessable, code: "invalid_config", "database 'sqlite:' needs a file path, e.g. sqlite:herald.sqlite")
            }
            do {
                return try SQLiteStore(path: path, maxPendingAccepts: maxPendingAccepts, modules: modules)
            } catch {
                let why = sqliteFileProblem(path).map { "\($0) (\(error))" } ?? "\(error)"
                throw HeraldError(.unavailable, code: "storage_unavailable", "cannot open SQLite database '\(path)': \(why)")
            }
        }
        if database.hasPrefix("postgres://") || database.hasPrefix("postgresql://") {
            return try PostgresStore(url: database, readURL: readURL, maxPendingAccepts: maxPendingAccepts, modules: modules, logger: logger)
        }
        throw HeraldError(.unprocessable, code: "invalid_config", "database must be sqlite:PATH or postgres://user:password@host:port/database")
    }

    /// The storage modules of Herald's own feature modules (the cards' and the topics' erasure).
    public static let builtInModules: [StorageModule] = [.cards, .topics]

    /// Why the file system keeps SQLite from opening or creating `path`, when it can tell:
    /// SQLite's own error says only "unable to open database file" for all of these.
    static func sqliteFileProblem(_ path: String) -> String? {
        guard isFilePath(path) else { return nil }
        let files = FileManager.default
        var isDirectory: ObjCBool = false
        if files.fileExists(atPath: path, isDirectory: &isDirectory) {
            if isDirectory.boolValue { return "it is a directory; name a file in it, e.g. sqlite:\(path)/herald.sqlite" }
            return files.isWritableFile(atPath: path) ? nil : "this user (uid \(getuid())) may not write it"
        }
        let parent = (path as NSString).deletingLastPathComponent
        let directory = parent.isEmpty ? "." : parent
        guard files.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            return "its directory \(directory) does not exist"
        }
        return files.isWritableFile(atPath: directory) ? nil : "this user (uid \(getuid())) may not create files in \(directory)"
    }

    /// Whether a `sqlite:` path names a file on disk: not empty, not an in-memory database, not a
    /// `file:` URI (whose file and options SQLite reads itself).
    public static func isFilePath(_ path: String) -> Bool {
        !path.isEmpty && !path.hasPrefix(":memory:") && !path.hasPrefix("file:")
    }

    /// The file path of a `sqlite:` setting (empty when it names none), or nil for another database.
    public static func sqlitePath(_ database: String) -> String? {
        guard database.hasPrefix("sqlite:") else { return nil }
        var path = String(database.dropFirst("sqlite:".count))
        if path.hasPrefix("//") { path.removeFirst(2) }
        return path
    }
}
