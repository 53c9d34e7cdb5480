import Foundation
import HeraldTestSupport

/// Load from `wrk`, a C load generator that needs far less CPU per request than any Swift
/// client, so a ceiling it measures is the server's and not the driver's. A Lua script builds
/// the requests and prints the summary as one JSON line, read back here.
struct Wrk {
    struct Result {
        var requests: Int
        var seconds: Double
        /// Answers outside 2xx/3xx, and connect, read, write and timeout errors.
        var errors: Int
        var p50Milliseconds: Double
        var p99Milliseconds: Double

        var perSecond: Double { Double(requests - errors) / max(seconds, 1e-9) }
    }

    /// What each request is: a method, headers, and a body that may vary per request (Lua that
    /// evaluates to a string; `n` counts this thread's requests from 1).
    struct Request {
        var method = "GET"
        var headers: [String: String] = [:]
        var body: String?
        /// Headers that vary per request: Lua expressions over `n`, as the body's arguments.
        var varyingHeaders: [String: String] = [:]

        static func get(headers: [String: String] = [:]) -> Request { Request(headers: headers) }

        /// A POST whose JSON body is `format` with `%d` replaced by Lua expressions over `n`.
        static func post(json format: String, arguments: [String] = [], headers: [String: String] = [:]) -> Request {
            let formatted = arguments.isEmpty ? luaString(format) : "string.format(\(luaString(format)), \(arguments.joined(separator: ", ")))"
            return Request(method: "POST", headers: headers.merging(["Content-Type": "application/json"]) { own, _ in own }, body: formatted)
        }
    }

    static var path: String? {
        ["/usr/bin/wrk", "/usr/local/bin/wrk"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    let directory: URL
    var threads = 2
    var connections: Int
    var duration: Duration

    func run(_ url: String, _ request: Request) async throws -> Result {
        guard let wrk = Self.path else { throw BenchError("wrk is not installed: ./scripts/bench installs it from Debian's packages") }
        let script = directory.appendingPathComponent("wrk-\(UUID().uuidString).lua")
        try Self.script(request).write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        let seconds = max(Int(duration.components.seconds), 1)
        let output = try await Self.capture(
            wrk,
            ["--threads", String(threads), "--connections", String(connections), "--duration", "\(seconds)s", "--timeout", "10s", "--script", script.path, url]
        )
        guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("{\"requests\"") }),
            let fields = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Double],
            let requests = fields["requests"], let microseconds = fields["duration_us"]
        else { throw BenchError("wrk printed no summary:\n\(output)") }
        let errors = ["status", "connect", "read", "write", "timeout"].compactMap { fields[$0] }.reduce(0, +)
        return Result(
            requests: Int(requests), seconds: microseconds / 1e6, errors: Int(errors), p50Milliseconds: (fields["p50_us"] ?? 0) / 1000,
            p99Milliseconds: (fields["p99_us"] ?? 0) / 1000
        )
    }

    static func script(_ request: Request) -> String {
        var lines = ["wrk.method = \(luaString(request.method))"]
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) { lines.append("wrk.headers[\(luaString(name))] = \(luaString(value))") }
        if request.body != nil || !request.varyingHeaders.isEmpty {
            lines += ["local n = 0", "request = function()", "  n = n + 1"]
            var headers = "nil"
            if !request.varyingHeaders.isEmpty {
                lines.append("  local h = {}")
                lines.append("  for k, v in pairs(wrk.headers) do h[k] = v end")
                for (name, value) in request.varyingHeaders.sorted(by: { $0.key < $1.key }) { lines.append("  h[\(luaString(name))] = \(value)") }
                headers = "h"
            }
            lines += ["  return wrk.format(nil, nil, \(headers), \(request.body ?? "nil"))", "end"]
        }
        lines += [
            "done = function(summary, latency, requests)",
            "  local e = summary.errors",
            "  io.write(string.format('{\"requests\":%d,\"duration_us\":%d,\"status\":%d,\"connect\":%d,\"read\":%d,\"write\":%d,\"timeout\":%d,\"p50_us\":%d,\"p99_us\":%d}\\n',",
            "    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout, latency:percentile(50), latency:percentile(99)))",
            "end",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    static func luaString(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": escaped += "\\\\"
            case "'": escaped += "\\'"
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return "'" + escaped + "'"
    }

    /// Runs a command to its end and returns what it printed.
    static func capture(_ executable: String, _ arguments: [String]) async throws -> String {
        let (process, output) = try ChildProcess.start(executable, arguments)
        _ = await process.waitForExit()
        return output.stdout + output.stderr
    }
}
