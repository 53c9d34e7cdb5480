import AsyncHTTPClient
import Foundation
import HeraldCore
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// The few Herald calls notifsim makes, over AsyncHTTPClient.
final class HeraldClient: Sendable {
    struct Receipt: Decodable {
        var id: String
        var recipients: Int
    }

    /// A request Herald refused, or could not be reached for.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Attempts at a request Herald answers "not now": 503 or 429 with a `Retry-After` of at
    /// most a minute (a full group-commit queue, storage briefly unavailable, a rate limit).
    /// Nothing was stored, so it is sent again after the wait Herald asked, plus up to half as
    /// much again so that clients refused together do not all come back together.
    static let maxAttempts = 8

    private let baseURL: String
    private let apiKey: String
    private let retried = Atomic<Int>(0)
    /// Requests sent again after a "not now" answer.
    var retries: Int { retried.load(ordering: .relaxed) }
    private let http: HTTPClient = {
        var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(5), read: .seconds(30)))
        // A refused connection is the answer (Herald is not running there); retried, each
        // request waited out the connect timeout, a load run of 50 took 35 s to say so.
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    init(baseURL: String, apiKey: String) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.apiKey = apiKey
    }

    func shutdown() {
        try? http.syncShutdown()
    }

    func send(_ payload: [String: Any]) async throws -> Receipt {
        let body = try JSONSerialization.data(withJSONObject: payload)
        let (status, data) = try await request("POST", "/api/notifications", body: body)
        guard status == 202 else { throw Failure(description: Self.describe(status: status, data: data)) }
        return try JSONDecoder().decode(Receipt.self, from: data)
    }

    /// A dry run's answer (`"dry_run": true`): the JSON object as Herald wrote it.
    func dryRun(_ payload: [String: Any]) async throws -> [String: Any] {
        var payload = payload
        payload["dry_run"] = true
        let (status, data) = try await request("POST", "/api/notifications", body: try JSONSerialization.data(withJSONObject: payload))
        guard status == 200 else { throw Failure(description: Self.describe(status: status, data: data)) }
        return (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
    }

    /// Deliveries per sink and state: `["history": ["delivered": 1]]`.
    func status(of id: String) async throws -> [String: [String: Int]] {
        struct Status: Decodable { var summary: [String: [String: Int]] }
        let (status, data) = try await request("GET", "/api/notifications/\(id)", body: nil)
        guard status == 200 else { throw Failure(description: Self.describe(status: status, data: data)) }
        return try JSONDecoder().decode(Status.self, from: data).summary
    }

    private func request(_ method: String, _ path: String, body: Data?) async throws -> (Int, Data) {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = .RAW(value: method)
        request.headers.add(name: "Authorization", value: "Bearer \(apiKey)")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(data: body))
        }
        var attempt = 1
        while true {
            let (status, data, retryAfter) = try await execute(request)
            if attempt < Self.maxAttempts, status == 503 || status == 429, let retryAfter, retryAfter <= .seconds(60) {
                retried.add(1, ordering: .relaxed)
                attempt += 1
                try await Task.sleep(for: retryAfter * Double.random(in: 1...1.5))
                continue
            }
            return (status, data)
        }
    }

    /// One exchange: the status, the body and the wait its `Retry-After` asks for, in seconds or
    /// as an HTTP-date (nil without one, or for a value that is neither).
    private func execute(_ request: HTTPClientRequest) async throws -> (Int, Data, Duration?) {
        do {
            let response = try await http.execute(request, timeout: .seconds(30))
            let buffer = try await response.body.collect(upTo: 1 << 20)
            let retryAfter = response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0) }
            return (Int(response.status.code), Data(buffer: buffer), retryAfter)
        } catch {
            throw Failure(description: "cannot reach Herald at \(baseURL): \(error)")
        }
    }

    /// Herald's own error message, so the user sees e.g. the list of valid types.
    static func describe(status: Int, data: Data) -> String {
        struct ErrorBody: Decodable {
            struct Detail: Decodable {
                var code: String
                var message: String
            }
            var error: Detail
        }
        if let body = try? JSONDecoder().decode(ErrorBody.self, from: data) {
            return "\(body.error.message) (HTTP \(status), \(body.error.code))"
        }
        guard !data.isEmpty else { return "HTTP \(status), with no body (is this Herald?)" }
        return "HTTP \(status): \(String(decoding: data.prefix(500), as: UTF8.self))"
    }
}
