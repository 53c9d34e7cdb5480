import Foundation
import HeraldTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Finds the built `herald` and `notifsim` next to the test bundle.
enum Binaries {
    static var directory: URL {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        if FileManager.default.isExecutableFile(atPath: beside.appendingPathComponent("herald").path) { return beside }
        // Fallback: the package's default debug build folder.
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug")
    }

    static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
}

struct CommandResult: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String
    /// Still running at the timeout, so stopped with SIGTERM.
    var timedOut = false
}

/// A process with a clean `HERALD_*` environment plus `environment`, whose stdout and stderr
/// go to `collector`'s files.
func makeProcess(
    _ executable: String, _ arguments: [String], environment: [String: String], in directory: URL, collecting collector: OutputCollector
) -> SpawnedProcess {
    SpawnedProcess(
        executable: executable, arguments: arguments,
        environment: ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("HERALD_") }.merging(environment) { _, new in new },
        directory: directory.path, collecting: collector)
}

/// Runs a command to completion without blocking a concurrency thread. With a `timeout`, a
/// command still running then is sent SIGTERM and reported as `timedOut` (a server that should
/// have refused to start does not hang the test).
func runCommand(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:], in directory: URL, timeout: Duration? = nil
) async throws -> CommandResult {
    let collected = try OutputCollector()
    let process = makeProcess(executable, arguments, environment: environment, in: directory, collecting: collected)
    let timedOut = Flag()
    try process.run()
    let watchdog = timeout.map { limit in
        Task {
            try await Task.sleep(for: limit)
            if process.isRunning {
                timedOut.set()
                process.terminate()
            }
        }
    }
    defer { watchdog?.cancel() }
    let status = await process.waitForExit()
    return CommandResult(status: status, stdout: collected.stdout, stderr: collected.stderr, timedOut: timedOut.isSet)
}

final class Flag: Sendable {
    private let state = Mutex(false)
    func set() { state.withLock { $0 = true } }
    var isSet: Bool { state.withLock { $0 } }
}

/// A `herald serve` process on a free loopback port, stopped by `stop()`.
final class RunningHerald: Sendable {
    let process: SpawnedProcess
    let output: OutputCollector
    let port: Int

    /// Starts `herald <command> --port 0 <arguments>` and waits for its "<banner> http://127.0.0.1:PORT" line.
    convenience init(
        command: String = "serve", banner: String = "Herald listening on", arguments: [String], environment: [String: String] = [:], in directory: URL
    ) async throws {
        try await self.init(
            executable: Binaries.path("herald"), arguments: [command, "--port", "0"] + arguments, banner: banner, environment: environment, in: directory)
    }

    /// Starts `executable` with exactly `arguments` and waits for its banner line.
    init(executable: String, arguments: [String], banner: String = "Herald listening on", environment: [String: String] = [:], in directory: URL) async throws {
        let output = try OutputCollector()
        self.output = output
        let process = makeProcess(executable, arguments, environment: environment, in: directory, collecting: output)
        try process.run()
        self.process = process
        var port: Int?
        for _ in 0..<300 {
            if let line = output.stdout.split(separator: "\n").first(where: { $0.hasPrefix(banner) }),
                let match = line.firstMatch(of: /https?:\/\/127\.0\.0\.1:(\d+)/)
            {
                port = Int(match.1)
                break
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        guard let port else {
            let ended = process.isRunning ? nil : process.terminationStatus
            process.terminate()
            throw StartError(output: output.stdout + output.stderr, ended: ended)
        }
        self.port = port
    }

    struct StartError: Error, CustomStringConvertible {
        var output: String
        /// The exit status, or the signal that ended it (31, SIGSYS, from a system-call filter),
        /// when the process ended before its banner; nil when it was still running.
        var ended: Int32? = nil
        var description: String {
            "herald did not start\(ended.map { " (it ended with exit status or signal \($0))" } ?? ""):\n\(output)"
        }
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// Sends SIGTERM and waits (up to `timeout`) for the exit status.
    /// Stops with SIGTERM and records an issue, with the exit status and the end of the
    /// output, unless the process drains and exits 0 within `timeout`.
    func expectCleanStop(
        timeout: Duration = .seconds(20), _ comment: String = "SIGTERM drains and exits cleanly", sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let started = ContinuousClock.now
        let status = await stop(timeout: timeout)
        guard status != 0 else { return }
        Issue.record(
            "\(comment): exit \(status) after \(ContinuousClock.now - started) (-1: still running, killed)\n\(output.stdout.suffix(2000))\n\(output.stderr.suffix(4000))",
            sourceLocation: sourceLocation
        )
    }

    /// Sends SIGTERM without waiting (for a `defer`); nothing once the process has exited.
    func terminate() {
        process.terminate()
    }

    func stop(timeout: Duration = .seconds(10)) async -> Int32 {
        terminate()
        let deadline = ContinuousClock.now + timeout
        while process.isRunning && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        if process.isRunning {
            process.signal(SIGKILL)
            return -1
        }
        return process.terminationStatus
    }
}
