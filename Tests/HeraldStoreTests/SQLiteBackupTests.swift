import Foundation
import HeraldCore
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldStore

/// `herald backup`: a copy of a database in use holds one consistent snapshot, is readable by
/// Herald, and never replaces a file or leaves a partial one.
@Suite(.cleansUp) struct SQLiteBackupTests {
    let directory: URL
    let ids = ObjectIDGenerator()

    init() throws {
        directory = try TestResources.temporaryDirectory("herald-backup")
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    @Test func aDatabaseBeingWrittenIsCopiedConsistently() async throws {
        let store = try SQLiteStore(path: path("live.sqlite"))
        TestResources.register { await store.close() }
        try await store.migrate()
        for index in 0..<200 {
            _ = try await store.registerDevice(userID: "before", registration: .token("token-\(index)", provider: "fcm"), newID: ids.next(), at: Date())
        }
        // The server goes on writing while the copy is made; the writes are not held up.
        let writing = Task {
            var written = 0
            while !Task.isCancelled {
                _ = try await store.registerDevice(userID: "during", registration: .token("during-\(written)", provider: "fcm"), newID: ids.next(), at: Date())
                written += 1
            }
            return written
        }
        let reported = Mutex<[(Int64, Int64)]>([])
        let summary = try await SQLiteBackup.copy(from: path("live.sqlite"), to: path("copy.sqlite"), interval: .milliseconds(1)) { written, total in
            reported.withLock { $0.append((written, total)) }
        }
        writing.cancel()
        _ = try? await writing.value
        #expect(summary.bytes == (try FileManager.default.attributesOfItem(atPath: path("copy.sqlite"))[.size] as? NSNumber)?.int64Value)
        #expect(reported.withLock { $0 }.allSatisfy { $0.0 >= 0 && $0.1 == summary.sourceBytes })
        let permissions = try FileManager.default.attributesOfItem(atPath: path("copy.sqlite"))[.posixPermissions] as? NSNumber
        #expect(permissions?.intValue == 0o600, "the copy holds device tokens and key hashes")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".partial") }.isEmpty)

        // Herald opens the copy, and it holds every write committed before it began.
        let copy = try SQLiteStore(path: path("copy.sqlite"))
        TestResources.register { await copy.close() }
        try await copy.migrate()
        let live = try await store.devices(userID: "before").map(\.id)
        #expect(live.count == 200)
        #expect(try await copy.devices(userID: "before").map(\.id) == live)
    }

    @Test func aMissingSourceOrAnExistingDestinationIsRefusedAndNothingIsWritten() async throws {
        await #expect(throws: HeraldError.self) { _ = try await SQLiteBackup.copy(from: path("absent.sqlite"), to: path("out.sqlite")) }
        #expect(!FileManager.default.fileExists(atPath: path("absent.sqlite")), "no empty database is made where the source was named")
        #expect(!FileManager.default.fileExists(atPath: path("out.sqlite")))

        let store = try SQLiteStore(path: path("live.sqlite"))
        TestResources.register { await store.close() }
        try await store.migrate()
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: path("taken.sqlite")))
        let refused = await #expect(throws: HeraldError.self) { _ = try await SQLiteBackup.copy(from: path("live.sqlite"), to: path("taken.sqlite")) }
        #expect(refused?.message.contains("already exists") == true)
        #expect(try String(contentsOfFile: path("taken.sqlite"), encoding: .utf8) == "keep me")

        // A file that is not a database is named, not copied.
        try Data("not a database".utf8).write(to: URL(fileURLWithPath: path("text.sqlite")))
        await #expect(throws: HeraldError.self) { _ = try await SQLiteBackup.copy(from: path("text.sqlite"), to: path("out.sqlite")) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".partial") || $0 == "out.sqlite" }.isEmpty)
    }
}
