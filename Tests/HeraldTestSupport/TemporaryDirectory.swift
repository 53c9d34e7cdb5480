import Foundation

/// A fresh folder under the system's temporary directory, removed by `remove()` (call it in a
/// `defer`), so a test leaves nothing behind.
public struct TemporaryDirectory: Sendable {
    public let url: URL

    public init(_ prefix: String = "herald-test") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    public var path: String { url.path }

    public func appending(_ name: String) -> URL { url.appendingPathComponent(name) }

    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}
