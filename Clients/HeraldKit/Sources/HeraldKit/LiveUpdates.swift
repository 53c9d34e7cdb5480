import Foundation
import HeraldAPI
import OpenAPIRuntime

/// What the live stream tells the app (docs/stream.md), after HeraldKit acted on it.
public enum LiveEvent: Sendable {
    /// Connected (again); `resumedAfter` is the history position it resumed after, if any.
    case connected(resumedAfter: String?)
    /// A new history item for the user.
    case notification(HistoryItem)
    /// The user's content changed; HeraldKit has fetched it (``Herald/content()``).
    case contentChanged
    /// The feed changed; HeraldKit has fetched it (``Herald/nextFeedMessage()`` answers from it).
    case feedChanged
    /// The inbox counts changed (a mark on another device, a new item); the badge is updated.
    case inbox(InboxCounts)
    /// The stream broke; HeraldKit reconnects after `retryIn`.
    case disconnected(HeraldKitError, retryIn: Duration)
}

/// `GET /api/stream` with reconnection (docs/heraldkit.md "Live updates"): a broken stream is
/// reopened after a doubling wait (from the server's `retry:` hint to a minute), with
/// `Last-Event-ID` set to the last notification seen, so nothing posted meanwhile is missed;
/// `content`, `feed` and `inbox` events fetch what changed before they reach the app.
extension Herald {
    /// The live events, until the consuming task is cancelled.
    public func liveUpdates() -> AsyncStream<LiveEvent> {
        AsyncStream { continuation in
            let task = Task {
                var wait = Duration.seconds(1)
                while !Task.isCancelled {
                    do throws(HeraldKitError) {
                        try await self.follow(continuation, wait: &wait)
                    } catch {
                        // A full server (503 too_many_streams) says how long to stay away.
                        if case .server(_, _, _, let retryAfter?) = error { wait = max(wait, .seconds(min(max(retryAfter, 0), 3_600))) }
                        continuation.yield(.disconnected(error, retryIn: wait))
                        try? await Task.sleep(for: wait)
                        wait = min(wait * 2, .seconds(60))
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The content the user may see, as last fetched (nil before the first fetch).
    public func content() throws(HeraldKitError) -> OpenAPIObjectContainer? {
        guard let json = try database.value("content") else { return nil }
        return try? JSONDecoder().decode(OpenAPIObjectContainer.self, from: Data(json.utf8))
    }

    /// Fetches the user's content unless unchanged (304); returns whether it changed.
    @discardableResult
    public func refreshContent() async throws(HeraldKitError) -> Bool {
        let etag = try database.value("content_etag")
        let output = try await calling { try await client.getContent(headers: .init(ifNoneMatch: etag)) }
        switch output {
        case .notModified:
            return false
        case .ok(let ok):
            guard case .json(let body) = ok.body else { throw .unexpectedAnswer("GET /api/content") }
            let json: Data
            do {
                json = try JSONEncoder().encode(body)
            } catch {
                throw .unexpectedAnswer("GET /api/content: \(error)")
            }
            try database.write { db in
                try LocalDatabase.setValue(String(decoding: json, as: UTF8.self), for: "content", in: db)
                try LocalDatabase.setValue(ok.headers.eTag, for: "content_etag", in: db)
            }
            return true
        default:
            throw .unexpectedAnswer("GET /api/content")
        }
    }

    /// One connection, until it breaks or the server ends it (both throw). Once connected, the
    /// wait before the next attempt starts again from a second, or from the server's hint.
    private func follow(_ continuation: AsyncStream<LiveEvent>.Continuation, wait: inout Duration) async throws(HeraldKitError) {
        let lastEventID = try database.value("last_event_id")
        let output = try await calling { try await client.getStream(headers: .init(lastEventID: lastEventID)) }
        guard case .ok(let ok) = output, case .textEventStream(let body) = ok.body else { throw .unexpectedAnswer("GET /api/stream") }
        wait = .seconds(1)
        continuation.yield(.connected(resumedAfter: lastEventID))
        do {
            for try await event in body.asDecodedServerSentEvents() {
                if let retry = event.retry { wait = .milliseconds(retry) }
                if let live = try await handle(event) { continuation.yield(live) }
            }
        } catch {
            throw HeraldKitError.from(error)
        }
        throw .unreachable("the stream ended")
    }

    private func handle(_ event: ServerSentEvent) async throws(HeraldKitError) -> LiveEvent? {
        let data = Data((event.data ?? "").utf8)
        switch event.event {
        case "notification":
            guard let item = try? JSONDecoder().decode(HistoryItem.self, from: data) else { return nil }
            if let id = event.id { try database.setValue(id, for: "last_event_id") }
            return .notification(item)
        case "inbox":
            guard let counts = try? JSONDecoder().decode(InboxCounts.self, from: data) else { return nil }
            try keep(counts)
            return .inbox(counts)
        case "feed":
            // The version is the feed's entity tag: equal to ours, nothing to fetch.
            guard try version(of: data) != database.value("feed_etag") else { return nil }
            try await refreshFeed()
            return .feedChanged
        case "content":
            guard try version(of: data) != database.value("content_etag") else { return nil }
            try await refreshContent()
            return .contentChanged
        default:
            return nil
        }
    }

    private func version(of data: Data) -> String? {
        struct Version: Decodable { var version: String }
        guard let version = try? JSONDecoder().decode(Version.self, from: data).version else { return nil }
        return "\"\(version)\""
    }
}
