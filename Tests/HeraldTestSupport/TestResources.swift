import Foundation
import Synchronization
import Testing

/// What a test opened and must release when it ends: servers and stores to close, temporary
/// folders to remove. Helpers that open something register it with ``register(_:)``; the
/// ``Trait/cleansUp`` trait runs the releases, newest first, after each test in its suite, whether
/// the test passed, failed or threw.
public final class TestResources: Sendable {
    @TaskLocal public static var current: TestResources?

    private let releases = Mutex<[@Sendable () async -> Void]>([])

    init() {}

    /// Runs `release` when the current test ends. Outside a `.cleansUp` scope the resource would
    /// leak, so that is recorded as an issue (the helper's suite lacks the trait).
    public static func register(sourceLocation: SourceLocation = #_sourceLocation, _ release: @escaping @Sendable () async -> Void) {
        guard let current else {
            Issue.record("a test resource was opened outside a .cleansUp scope: add .cleansUp to the suite", sourceLocation: sourceLocation)
            return
        }
        current.releases.withLock { $0.append(release) }
    }

    /// A fresh temporary folder, removed when the test ends.
    public static func temporaryDirectory(_ prefix: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
        let directory = try TemporaryDirectory(prefix)
        register(sourceLocation: sourceLocation) { directory.remove() }
        return directory.url
    }

    func releaseAll() async {
        let pending = releases.withLock { list in
            defer { list.removeAll() }
            return list
        }
        for release in pending.reversed() { await release() }
    }
}

/// Releases every ``TestResources`` a test registered once the test ends.
public struct CleansUpTestResources: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        // A suite's own scope has no test case: resources belong to each test, not the suite.
        guard testCase != nil else { return try await function() }
        let resources = TestResources()
        do {
            try await TestResources.$current.withValue(resources) { try await function() }
        } catch {
            await resources.releaseAll()
            throw error
        }
        await resources.releaseAll()
    }
}

extension Trait where Self == CleansUpTestResources {
    /// Closes the servers and stores and removes the folders each test opened.
    public static var cleansUp: Self { CleansUpTestResources() }
}
