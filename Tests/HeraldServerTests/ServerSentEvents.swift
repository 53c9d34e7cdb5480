import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// One Server-Sent Event as a client sees it (WHATWG HTML §9.2): comments are kept too, so
/// tests can see heartbeats.
struct ServerSentEvent: Sendable, Equatable {
    var event = "message"
    var id: String?
    var data = ""
    /// A comment line (`: text`) arrives as an event named `comment`.
    var isComment: Bool { event == "comment" }

    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? [:] }
}

/// Reads an event stream over AsyncHTTPClient's streamed body in a task of its own, parsing
/// events as they arrive, so a test can wait for the next one with a deadline.
final class EventStreamReader: Sendable {
    private struct State {
        var events: [ServerSentEvent] = []
        var consumed = 0
        var ended = false
        var status: UInt = 0
    }

    private let state = Mutex(State())
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    /// Opens `url` with `headers` and starts reading; returns once the answer's head arrived.
    static func open(_ url: String, headers: [(String, String)], client: HTTPClient) async throws -> EventStreamReader {
        var request = HTTPClientRequest(url: url)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await client.execute(request, timeout: .seconds(30))
        let reader = EventStreamReader()
        reader.state.withLock { $0.status = response.status.code }
        reader.task.withLock {
            $0 = Task {
                var parser = Parser()
                do {
                    for try await chunk in response.body {
                        let events = parser.feed(String(buffer: chunk))
                        reader.state.withLock { $0.events += events }
                    }
                } catch {}
                reader.state.withLock { $0.ended = true }
            }
        }
        return reader
    }

    var status: UInt { state.withLock { $0.status } }

    /// The next event not yet taken (comments included when `comments`), waiting up to `timeout`.
    func next(timeout: Duration = .seconds(10), comments: Bool = false) async throws -> ServerSentEvent? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let found = state.withLock { state -> ServerSentEvent?? in
                while state.consumed < state.events.count {
                    let event = state.events[state.consumed]
                    state.consumed += 1
                    if comments || !event.isComment { return .some(event) }
                }
                return state.ended ? .some(nil) : nil
            }
            if let found { return found }
            try await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    /// Whether the server ended the stream within `timeout`.
    func ends(within timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if state.withLock({ $0.ended }) { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    func cancel() {
        task.withLock { $0?.cancel() }
    }

    /// The line protocol: fields until a blank line, `data` lines joined with newlines.
    struct Parser {
        var pending = ""
        var current = ServerSentEvent()
        var dataLines: [String] = []
        var hasFields = false

        mutating func feed(_ text: String) -> [ServerSentEvent] {
            pending += text
            var events: [ServerSentEvent] = []
            while let newline = pending.firstIndex(of: "\n") {
                let line = String(pending[..<newline])
                pending = String(pending[pending.index(after: newline)...])
                if line.isEmpty {
                    if hasFields {
                        current.data = dataLines.joined(separator: "\n")
                        events.append(current)
                    }
                    current = ServerSentEvent()
                    dataLines = []
                    hasFields = false
                } else if line.hasPrefix(":") {
                    events.append(ServerSentEvent(event: "comment", id: nil, data: line.dropFirst().trimmingCharacters(in: .whitespaces)))
                } else {
                    let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                    var value = parts.count > 1 ? String(parts[1]) : ""
                    if value.hasPrefix(" ") { value.removeFirst() }
                    switch parts[0] {
                    case "event": current.event = value
                    case "id": current.id = value
                    case "data": dataLines.append(value)
                    default: continue // retry, unknown fields: no event of their own
                    }
                    hasFields = true
                }
            }
            return events
        }
    }
}
