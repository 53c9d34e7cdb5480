import Foundation
import HTTPTypes
import NIOCore
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime

/// The real transport, noting each request's path, query and body on the way, so a test can
/// say what a device told the server (and what it did not).
final class RecordingTransport: ClientTransport, @unchecked Sendable {
    struct Sent: Sendable {
        var operationID: String
        var path: String
        var body: String
    }

    private let inner = AsyncHTTPClientTransport(configuration: .init(timeout: .seconds(5)))
    private let lock = NSLock()
    private var log: [Sent] = []

    var sent: [Sent] { lock.withLock { log } }

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
        var bytes = Data()
        if let body { bytes = try await Data(collecting: body, upTo: 1 << 20) }
        lock.withLock { log.append(Sent(operationID: operationID, path: request.path ?? "", body: String(decoding: bytes, as: UTF8.self))) }
        return try await inner.send(request, body: body.map { _ in HTTPBody(bytes) }, baseURL: baseURL, operationID: operationID)
    }
}
