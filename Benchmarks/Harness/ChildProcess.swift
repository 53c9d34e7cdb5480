import Foundation
import HeraldTestSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A child process (Herald, the emulator, the echo server) on a free port, found by the
/// "<banner> http://127.0.0.1:PORT" line it prints.
final class ChildProcess: Sendable {
    let process: SpawnedProcess
    let port: Int
    private let output: OutputCollector

    init(_ executable: String, _ arguments: [String], banner: String, environment: [String: String] = [:]) async throws {
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("HERALD_") }.merging(environment) { _, new in new }
        let (process, output) = try Self.start(executable, arguments, environment: environment)
        var port: Int?
        for _ in 0..<600 {
            let text = output.stdout + "\n" + output.stderr
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(banner) }), let match = line.firstMatch(of: /127\.0\.0\.1:(\d+)/) {
                port = Int(match.1)
                break
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        guard let port else {
            process.terminate()
            throw BenchError("\(executable) \(arguments.joined(separator: " ")) did not start:\n\(output.stdout)\(output.stderr)")
        }
        self.process = process
        self.port = port
        self.output = output
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// Peak resident memory so far (VmHWM), in MiB.
    var peakRSS: Double {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return 0 }
        return kilobytes / 1024
    }

    /// CPU time used so far (user + system), in seconds.
    var cpuSeconds: Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    func stop() async {
        await Self.stop([process])
    }

    /// SIGTERM to each process, then SIGKILL to those still running after 10 s; all at once, so
    /// stopping several waits 10 s at most, not 10 s each.
    static func stop(_ processes: [SpawnedProcess]) async {
        for process in processes { process.terminate() }
        for _ in 0..<200 where processes.contains(where: \.isRunning) { try? await Task.sleep(for: .milliseconds(50)) }
        for process in processes where process.isRunning { process.signal(SIGKILL) }
    }

    /// Starts `executable` with stdout and stderr going to a new collector's files.
    static func start(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (SpawnedProcess, OutputCollector) {
        let output = try OutputCollector()
        let process = SpawnedProcess(
            executable: executable, arguments: arguments, environment: environment ?? ProcessInfo.processInfo.environment, collecting: output)
        try process.run()
        started.withLock { $0.append(process) }
        return (process, output)
    }

    /// Every process the harness started, so none outlives it when a step fails between a
    /// child's start and its `stop()` (``stopAll()``).
    private static let started = Mutex<[SpawnedProcess]>([])

    /// Stops whatever the harness started that still runs (``stop(_:)``).
    static func stopAll() async {
        let running = started.withLock { started in
            defer { started.removeAll() }
            return started.filter(\.isRunning)
        }
        await stop(running)
    }
}

extension ChildProcess {
    /// The herald binary to start: `given`, else the one beside this harness (the release build).
    static func heraldPath(_ given: String?) throws -> String {
        let bench = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let path = given ?? bench.deletingLastPathComponent().appendingPathComponent("herald").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BenchError("no herald binary at \(path): build it with `swift build -c release` or pass --herald")
        }
        return path
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
