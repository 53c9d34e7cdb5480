import AsyncHTTPClient
import Foundation
import Histogram
import NIOCore
import NIOHTTP1
import Synchronization

/// Sends requests from `concurrency` connections as fast as the server answers and records
/// each latency in an HDR histogram (microseconds).
struct LoadDriver {
    let client: HTTPClient

    init(concurrency: Int) {
        var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(5), read: .seconds(30)))
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(concurrency, 8)
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    func shutdown() async throws { try await client.shutdown() }

    struct Result {
        var requests: Int
        var errors: Int
        var elapsed: Duration
        var latency: Histogram<UInt64>

        var perSecond: Double { Double(requests - errors) / max(elapsed.seconds, 1e-9) }
        func percentileMilliseconds(_ percentile: Double) -> Double { Double(latency.valueAtPercentile(percentile)) / 1000 }
    }

    /// Sends `count` requests built by `request(index)`; `expect` is the success status.
    func run(count: Int, concurrency: Int, expect: UInt, request: @escaping @Sendable (Int) -> HTTPClientRequest) async -> Result {
        let next = Ticket()
        let started = ContinuousClock.now
        let client = self.client
        let parts = await withTaskGroup(of: (Histogram<UInt64>, Int).self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
                    var errors = 0
                    while true {
                        let index = next.take()
                        guard index < count else { break }
                        let sent = ContinuousClock.now
                        do {
                            let response = try await client.execute(request(index), timeout: .seconds(30))
                            _ = try await response.body.collect(upTo: 1 << 22)
                            if response.status.code != expect { errors += 1 }
                        } catch {
                            errors += 1
                        }
                        let elapsed = ContinuousClock.now - sent
                        _ = histogram.record(UInt64(max(elapsed.seconds * 1_000_000, 1)))
                    }
                    return (histogram, errors)
                }
            }
            var merged = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
            var errors = 0
            for await (histogram, failed) in group {
                merged.add(histogram)
                errors += failed
            }
            return (merged, errors)
        }
        return Result(requests: count, errors: parts.1, elapsed: ContinuousClock.now - started, latency: parts.0)
    }

    static func post(_ url: String, json: String, token: String? = nil) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        request.body = .bytes(ByteBuffer(string: json))
        return request
    }

    static func get(_ url: String, headers: [(String, String)] = []) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: url)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        return request
    }

    /// One request's body as text (a Prometheus scrape).
    func text(_ request: HTTPClientRequest) async throws -> String {
        let response = try await client.execute(request, timeout: .seconds(60))
        return String(buffer: try await response.body.collect(upTo: 1 << 24))
    }

    /// One request, its status and JSON body.
    func call(_ request: HTTPClientRequest) async throws -> (UInt, [String: Any], HTTPHeaders) {
        let response = try await client.execute(request, timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 1 << 24)
        return (response.status.code, (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]) ?? [:], response.headers)
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// Hands out request indexes to the connections, each once.
final class Ticket: Sendable {
    private let counter = Atomic<Int>(0)
    func take() -> Int { counter.add(1, ordering: .relaxed).oldValue }
}

extension LoadDriver {
    /// Runs `body` with a driver of `concurrency` connections, shut down after it whether it
    /// threw or not.
    static func with<Value>(concurrency: Int, _ body: (LoadDriver) async throws -> Value) async throws -> Value {
        let driver = LoadDriver(concurrency: concurrency)
        do {
            let value = try await body(driver)
            try await driver.shutdown()
            return value
        } catch {
            try? await driver.shutdown()
            throw error
        }
    }

    /// The FCM emulator's push count.
    func delivered(at emulator: ChildProcess) async throws -> Int {
        try await call(LoadDriver.get("\(emulator.url)/emulator/stats")).1["delivered"] as? Int ?? 0
    }

    /// The emulator's push count, polled every `interval` until it reaches `count` or `limit` has passed.
    func pushes(at emulator: ChildProcess, reaching count: Int, within limit: Duration, every interval: Duration) async throws -> Int {
        let start = ContinuousClock.now
        var pushed = try await delivered(at: emulator)
        while pushed < count, ContinuousClock.now - start < limit {
            try await Task.sleep(for: interval)
            pushed = try await delivered(at: emulator)
        }
        return pushed
    }
}
