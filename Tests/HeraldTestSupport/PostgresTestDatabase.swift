import Foundation
import HeraldStore
import PostgresNIO

/// The throwaway PostgreSQL server `scripts/test` starts (HERALD_TEST_POSTGRES_URL), and
/// fresh databases on it, one per test.
public enum PostgresTestDatabase {
    public static var serverURL: String? {
        guard let url = ProcessInfo.processInfo.environment["HERALD_TEST_POSTGRES_URL"], !url.isEmpty else { return nil }
        return url
    }

    /// Whether this machine has PostgreSQL's server binaries (Debian puts them outside PATH).
    public static var binariesExist: Bool {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        if versions.contains(where: { FileManager.default.isExecutableFile(atPath: "/usr/lib/postgresql/\($0)/bin/initdb") }) { return true }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        return path.split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/initdb") }
    }

    /// Why PostgreSQL runs are missing, or nil when they run.
    public static var unavailableReason: String? {
        if serverURL != nil { return nil }
        if binariesExist {
            return "PostgreSQL is installed but HERALD_TEST_POSTGRES_URL is not set: run ./scripts/test, which starts a throwaway server"
        }
        return "no PostgreSQL binaries on this machine: the PostgreSQL runs are skipped (./scripts/test installs them)"
    }

    /// Creates an empty database and returns its URL.
    public static func create() async throws -> String {
        guard let serverURL else { throw PostgresTestDatabaseError.noServer(unavailableReason ?? "") }
        let name = "herald_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        return try await PostgresStore.createDatabase(named: name, onServer: serverURL)
    }

    /// Runs `statement` in a transaction of its own on the database at `url`, waiting as long as
    /// a test's store does for its connection (``PostgresStore/patientAcquireTimeout``): with the
    /// default 2 s, a check after a seed failed on the clean clone's starved machine.
    public static func execute(_ statement: String, on url: String) async throws {
        let store = try PostgresStore(url: url, maxConnections: 1, acquireTimeout: PostgresStore.patientAcquireTimeout)
        do {
            try await store.transaction { session in try await session.execute(PostgresQuery(unsafeSQL: statement)) }
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }
}

public enum PostgresTestDatabaseError: Error {
    case noServer(String)
}
