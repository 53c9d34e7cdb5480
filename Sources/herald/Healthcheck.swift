import ArgumentParser
import AsyncHTTPClient
import Foundation
import HeraldCore
import HeraldServer
import NIOCore
import NIOHTTP1

/// A probe for container runtimes whose images have no curl: exits 0 when Herald answers
/// `GET /health/ready` with 200, 1 otherwise.
struct Healthcheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 if Herald is ready (for container health checks).",
        discussion: "Without --url, probes the host and port `herald serve` would listen on with the same configuration (file, HERALD_* variables)."
    )

    @OptionGroup var common: CommonOptions

    @Option(help: "Herald's base URL (default: from the configuration, e.g. http://127.0.0.1:8080).")
    var url: String?

    @Option(parsing: .unconditional, help: "Seconds to wait for an answer.")
    var timeout: Int64 = 3

    func validate() throws {
        guard (1...3_600).contains(timeout) else { throw ValidationError("--timeout must be 1-3600 seconds") }
        if let url, let problem = HTTPURL.problem(url) { throw ValidationError("--url \(problem)") }
    }

    func run() async throws {
        let base: String
        if let url {
            base = url
        } else {
            // The same layers serve reads, so a HERALD_PORT or config file that moves the server
            // moves the probe with it.
            let configuration = try await reportingErrors { try await common.load() }
            base = "http://\(Self.probeHost(for: configuration.host)):\(configuration.port)"
        }
        let status: HTTPResponseStatus
        do {
            status = try await Self.probe(base + "/health/ready", timeout: .seconds(timeout))
        } catch {
            StandardStream.error.write("herald healthcheck: \(base) is not reachable: \(error)\n")
            throw ExitCode(1)
        }
        guard status == .ok else {
            StandardStream.error.write("herald healthcheck: \(base) answered \(status.code)\n")
            throw ExitCode(1)
        }
        print("ready")
    }

    /// One GET with a client of its own that does not retry a refused connection: the shared
    /// client keeps trying to connect until the deadline, so a stopped server took the whole
    /// `--timeout` to report.
    static func probe(_ url: String, timeout: TimeAmount) async throws -> HTTPResponseStatus {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let result: Result<HTTPResponseStatus, any Error>
        do {
            result = .success(try await client.execute(HTTPClientRequest(url: url), timeout: timeout).status)
        } catch {
            result = .failure(error)
        }
        try? await client.shutdown()
        return try result.get()
    }

    /// Where to reach a server listening on `host`: a wildcard address is reached on loopback.
    static func probeHost(for host: String) -> String {
        switch host {
        case "0.0.0.0", "": "127.0.0.1"
        case "::", "[::]": "[::1]"
        default: host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        }
    }
}
