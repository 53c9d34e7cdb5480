import Foundation
import HeraldCore
import HeraldStore

/// Every storage engine the conformance suite runs against. PostgreSQL joins this list when
/// its store lands; each test then runs on both.
enum StoreKind: String, CaseIterable, CustomStringConvertible, Sendable {
    case sqlite
    case sqliteMemory

    var description: String { rawValue }

    func make() async throws -> any HeraldStorage {
        let store: any HeraldStorage
        switch self {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            store = try SQLiteStore(path: directory.appendingPathComponent("test.sqlite").path)
        case .sqliteMemory:
            store = try SQLiteStore(path: ":memory:")
        }
        try await store.migrate()
        return store
    }
}
