import Foundation
import HTTPTypes
import HeraldCore
import HeraldHTTP
import Hummingbird
import NIOCore
import ServiceLifecycle

/// `GET /api/stream`: a user's live updates as Server-Sent Events, so no app has to poll.
/// `notification` events replay history rows (their ids are history sequences, so
/// `Last-Event-ID` resumes without gaps); `content` and `feed` events carry the version (the
/// entity tag without quotes) of what `GET /api/content` and `GET /feed/index.json` answer now;
/// `inbox` events carry the user's inbox counts (docs/inbox.md), at connect and on change.
package struct StreamRoutes {
    let store: any HistoryStore
    let streams: LiveStreams
    /// The feed query a request names (`region`, `version`), as `GET /feed/index.json` reads it.
    let feedQuery: @Sendable (Request) throws -> FeedQuery
    /// The entity tag of the feed document served for a query now, whose version a `feed`
    /// event carries.
    let feedTag: @Sendable (FeedQuery) throws -> String
    /// What `GET /api/content` answers a user now (the content module's document), whose tag
    /// is the version a `content` event carries.
    let content: @Sendable (_ userID: String) async throws -> Data
    /// What `GET /api/inbox/counts` answers a user now, which an `inbox` event carries; nil
    /// when no inbox module is composed.
    let inboxCounts: (@Sendable (_ userID: String) async throws -> [UInt8])?
    let heartbeat: Duration
    let timestamps: TimestampStyle
    /// Whether a stream's token still holds: a stream opened with a user or device token ends,
    /// at a heartbeat, once the token has expired or its user's tokens were ended
    /// (docs/security.md). A storage error keeps the stream (the next heartbeat asks again).
    let tokenStillValid: @Sendable (UserToken) async -> Bool

    package init(
        store: any HistoryStore, streams: LiveStreams, feedQuery: @escaping @Sendable (Request) throws -> FeedQuery,
        feedTag: @escaping @Sendable (FeedQuery) throws -> String, content: @escaping @Sendable (_ userID: String) async throws -> Data,
        inboxCounts: (@Sendable (_ userID: String) async throws -> [UInt8])? = nil, heartbeat: Duration, timestamps: TimestampStyle,
        tokenStillValid: @escaping @Sendable (UserToken) async -> Bool
    ) {
        self.store = store
        self.streams = streams
        self.feedQuery = feedQuery
        self.feedTag = feedTag
        self.content = content
        self.inboxCounts = inboxCounts
        self.heartbeat = heartbeat
        self.timestamps = timestamps
        self.tokenStillValid = tokenStillValid
    }
    /// History rows read per query while catching up.
    static let page = 200

    /// Seconds a client turned away by `stream.max_total` is asked to wait.
    static let fullRetryAfter = 30

    package func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .get, "/api/stream", stream)
    }

    @Sendable func stream(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let userID = try context.actingUser(request)
        let feedQuery = try self.feedQuery(request)
        var session = Session(userID: userID, feedQuery: feedQuery, routes: self)
        if let header = request.headers[.lastEventID] {
            guard let seen = Int64(header.trimmingOptionalWhitespace), seen >= 0 else {
                throw HeraldError(.badRequest, code: "invalid_header", "'Last-Event-ID' must be the id of an event this stream sent (a whole number)")
            }
            session.cursor = seen
        } else {
            session.cursor = try await store.lastHistorySequence(userID: userID)
        }
        guard streams.hasRoom(userID: userID) else {
            return RateLimitedAnswer.response(
                wait: Self.fullRetryAfter, "this server holds as many live streams as it may (stream.max_total); retry later or poll",
                status: .serviceUnavailable, code: "too_many_streams")
        }
        let token = context.userToken
        let body = ResponseBody { [streams, heartbeat, session, tokenStillValid] writer in
            // Registered while the body is written, so an answer never sent leaves nothing behind;
            // anything committed before is read by the catch-up below.
            guard let opened = streams.open(userID: userID) else {
                // Filled up since the check above: end at once, asking the client to wait.
                try await writer.write(ByteBuffer(string: ": server full\nretry: \(Self.fullRetryAfter * 1000)\n\n"))
                try await writer.finish(nil)
                return
            }
            defer { streams.close(opened) }
            var session = session
            try await withGracefulShutdownHandler {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        while !Task.isCancelled {
                            try await Task.sleep(for: heartbeat)
                            opened.inbox.post(.heartbeat)
                        }
                    }
                    // The comment makes the answer's head and first bytes leave at once.
                    try await writer.write(ByteBuffer(string: ": connected\nretry: 3000\n\n"))
                    try await session.catchUp(&writer)
                    try await session.announceContent(&writer)
                    try await session.announceFeed(&writer)
                    try await session.announceInbox(&writer)
                    while let kinds = await opened.inbox.next() {
                        if kinds.contains(.heartbeat), let token, await !tokenStillValid(token) {
                            try await writer.write(ByteBuffer(string: ": the token has ended; sign in again\n\n"))
                            break
                        }
                        if kinds.contains(.history) || kinds.contains(.heartbeat) { try await session.catchUp(&writer) }
                        if kinds.contains(.content) { try await session.announceContent(&writer) }
                        // The feed also changes as messages expire, which no reload announces.
                        if kinds.contains(.feed) || kinds.contains(.heartbeat) { try await session.announceFeed(&writer) }
                        // A new history row is unread: the counts move with it.
                        if kinds.contains(.inbox) || kinds.contains(.history) { try await session.announceInbox(&writer) }
                        if kinds.contains(.heartbeat) { try await writer.write(ByteBuffer(string: ": heartbeat\n\n")) }
                    }
                    group.cancelAll()
                }
            } onGracefulShutdown: {
                opened.inbox.close()
            }
            try await writer.finish(nil)
        }
        return Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-store", .xAccelBuffering: "no"],
            body: body
        )
    }

    /// What one stream has sent.
    struct Session: Sendable {
        let userID: String
        let feedQuery: FeedQuery
        let routes: StreamRoutes
        /// The newest history sequence sent (or skipped at connect): every event's id.
        var cursor: Int64 = 0
        var contentVersion: String?
        var feedVersion: String?
        var inboxCounts: [UInt8]?

        init(userID: String, feedQuery: FeedQuery, routes: StreamRoutes) {
            self.userID = userID
            self.feedQuery = feedQuery
            self.routes = routes
        }

        /// Sends every history row after the cursor, oldest first.
        mutating func catchUp(_ writer: inout any ResponseBodyWriter) async throws {
            while true {
                let rows = try await routes.store.history(userID: userID, after: cursor, limit: StreamRoutes.page)
                guard !rows.isEmpty else { return }
                var buffer = ByteBuffer()
                for row in rows {
                    var data = JSONWriter()
                    HistoryResponse.Item(row.item, timestamps: routes.timestamps).write(to: &data)
                    buffer.writeString("id: \(row.sequence)\nevent: notification\ndata: ")
                    buffer.writeBytes(data.bytes)
                    buffer.writeString("\n\n")
                    cursor = row.sequence
                }
                try await writer.write(buffer)
                if rows.count < StreamRoutes.page { return }
            }
        }

        mutating func announceContent(_ writer: inout any ResponseBodyWriter) async throws {
            let version = Self.version(try await routes.content(userID))
            guard version != contentVersion else { return }
            contentVersion = version
            try await writer.write(event("content", version: version))
        }

        mutating func announceFeed(_ writer: inout any ResponseBodyWriter) async throws {
            let version = Self.version(tag: try routes.feedTag(feedQuery))
            guard version != feedVersion else { return }
            feedVersion = version
            try await writer.write(event("feed", version: version))
        }

        /// The counts as an `inbox` event when they differ from the last sent.
        mutating func announceInbox(_ writer: inout any ResponseBodyWriter) async throws {
            guard let read = routes.inboxCounts else { return }
            let counts = try await read(userID)
            guard counts != inboxCounts else { return }
            inboxCounts = counts
            var buffer = ByteBuffer(string: "id: \(cursor)\nevent: inbox\ndata: ")
            buffer.writeBytes(counts)
            buffer.writeString("\n\n")
            try await writer.write(buffer)
        }

        private func event(_ name: String, version: String) -> ByteBuffer {
            ByteBuffer(string: "id: \(cursor)\nevent: \(name)\ndata: {\"version\":\"\(version)\"}\n\n")
        }

        /// The entity tag of `body` without its quotes.
        static func version(_ body: Data) -> String {
            version(tag: EntityTag.of(body))
        }

        /// A quoted entity tag without its quotes.
        static func version(tag: String) -> String {
            String(tag.dropFirst().dropLast())
        }
    }
}
