import Foundation

/// Where a child process's stdout and stderr go: two files the child writes itself, read
/// whenever asked. No pipe and no dispatch read source in the parent (Foundation's
/// `readabilityHandler`): on Linux one crashed the benchmark harness in libdispatch's event loop
/// when the pipe it watched was closed under it. The files go with the collector.
public final class OutputCollector: Sendable {
    public let directory: URL
    public var outURL: URL { directory.appendingPathComponent("stdout") }
    public var errURL: URL { directory.appendingPathComponent("stderr") }

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-output-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: directory.appendingPathComponent("stdout").path, contents: nil)
        _ = FileManager.default.createFile(atPath: directory.appendingPathComponent("stderr").path, contents: nil)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    public var stdout: String { Self.read(outURL) }
    public var stderr: String { Self.read(errURL) }

    private static func read(_ file: URL) -> String {
        (try? Data(contentsOf: file)).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }
}

extension SpawnedProcess {
    /// A process whose stdout and stderr go to `output`'s files.
    public convenience init(
        executable: String, arguments: [String], environment: [String: String], directory: String? = nil, collecting output: OutputCollector
    ) {
        self.init(
            executable: executable, arguments: arguments, environment: environment, directory: directory, stdoutPath: output.outURL.path,
            stderrPath: output.errURL.path)
    }
}
