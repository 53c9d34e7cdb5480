import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// A real `herald` process on loopback, with its own SQLite file, for HeraldKit's integration
/// tests: `HERALD_BINARY` names the binary (the release one, say); otherwise the one beside this
/// test bundle, which `scripts/test` builds into the same folder.
final class HeraldProcess: Sendable {
    static var binary: String {
        if let named = ProcessInfo.processInfo.environment["HERALD_BINARY"], !named.isEmpty { return named }
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        if FileManager.default.isExecutableFile(atPath: beside.appendingPathComponent("herald").path) { return beside.appendingPathComponent("herald").path }
        // The shared build folder at the repository's root (Clients/HeraldKit/Tests/HeraldKitTests → root).
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(".build/debug/herald").path
    }

    let directory: URL
    let port: Int
    private let process: Process
    private let output: OutputBuffer

    var url: URL { URL(string: "http://127.0.0.1:\(port)") ?? URL(fileURLWithPath: "/") }
    var database: String { "sqlite:" + directory.appendingPathComponent("herald.sqlite").path }
    var log: String { output.text }

    /// This process's environment without its `HERALD_*` settings (the run mark that
    /// scripts/test finds leftovers by stays).
    static var inheritedEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("HERALD_") || $0.key == "HERALD_TEST_RUN_MARK" }
    }

    /// The secret backends sign user tokens with (their proofs at device sign-in).
    static let userTokenSecret = "heraldkit-tests-user-token-secret-0123456789"

    /// The environment every test server runs with: anonymous devices allowed, the console sink
    /// serving FCM addresses, pushes not held back.
    static let environment = [
        "HERALD_AUTH_DEVICE_SIGN_UP": "true",
        "HERALD_USER_TOKEN_SECRET": userTokenSecret,
        "HERALD_SINKS_CONSOLE_ENABLED": "true",
        "HERALD_STREAM_HEARTBEAT": "1",
    ]

    /// Starts herald in `directory` on `port` (0 for any free one) and waits until it listens.
    init(in directory: URL, port: Int = 0, environment: [String: String] = [:]) async throws {
        self.directory = directory
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["serve", "--port", String(port), "--database", "sqlite:" + directory.appendingPathComponent("herald.sqlite").path]
        process.currentDirectoryURL = directory
        process.environment = Self.inheritedEnvironment.merging(Self.environment.merging(environment) { _, new in new }) { _, new in new }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let output = OutputBuffer()
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if !data.isEmpty { output.append(data) }
        }
        try process.run()
        self.process = process
        self.output = output
        var found: Int?
        for _ in 0..<600 {
            let text = output.text
            if let line = text.split(separator: "\n").first(where: { $0.contains("Herald listening on http://127.0.0.1:") }),
                let number = line.split(separator: ":").last.flatMap({ Int($0.prefix { $0.isNumber }) })
            {
                found = number
                break
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        guard let found else {
            process.terminate()
            throw HeraldProcessError(message: "herald did not start: \(output.text)")
        }
        self.port = found
    }

    /// Stops the process (SIGKILL: as abrupt as a crash) and waits for it.
    func kill() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { kill() }

    /// A key for `role` made with `herald keys create`.
    static func createKey(role: String, in directory: URL) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = [
            "keys", "create", "--role", role, "--name", "heraldkit-tests", "--database", "sqlite:" + directory.appendingPathComponent("herald.sqlite").path,
        ]
        process.currentDirectoryURL = directory
        process.environment = inheritedEnvironment
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0, let key = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace).last else {
            throw HeraldProcessError(message: "herald keys create failed")
        }
        return String(key)
    }

    /// A backend or admin call: the status and the JSON answer.
    func call(_ method: HTTPMethod, _ path: String, key: String, user: String? = nil, json: String? = nil) async throws -> (Int, Any?) {
        var request = HTTPClientRequest(url: url.absoluteString + path)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        if let user { request.headers.add(name: "X-User-ID", value: user) }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 4 << 20)
        let value = body.readableBytes == 0 ? nil : try? JSONSerialization.jsonObject(with: Data(body.readableBytesView), options: [.fragmentsAllowed])
        return (Int(response.status.code), value)
    }
}

struct HeraldProcessError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// A fresh folder under the system's temporary one.
func temporaryDirectory(_ prefix: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// What a process printed, appended from its pipe's handler and read by the test.
final class OutputBuffer: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()

    func append(_ more: Data) { lock.withLock { data.append(more) } }
    var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }
}
