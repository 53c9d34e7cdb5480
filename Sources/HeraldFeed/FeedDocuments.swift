public import Foundation
public import HeraldCore
import HeraldHTTP
public import NIOCore
import Synchronization

/// `/feed/index.json` as encoded for each query, with its entity tag, kept until the snapshot
/// reloads or the first message in it expires. A poll that changes nothing (the common case: a
/// 304) then costs two lookups instead of encoding and hashing the whole document, and live
/// streams compare versions the same way.
///
/// A query's `region` and `version` are whatever a client sent, so documents are filed by what
/// they hold (the eligible messages, in order), not by the query: any number of made-up regions
/// and versions map onto the few documents the feed's messages can make, and cannot push
/// everyone else's out of the cache (docs/security.md, "Shared state"). Which document a query
/// gets is remembered separately; flooding that table costs its owner a filter of the feed, not
/// an encoding.
public final class FeedDocuments: Sendable {
    /// One encoded document.
    public struct Document: Sendable {
        public let body: ByteBuffer
        /// The strong entity tag, quoted.
        public let tag: String
        let generation: UInt64
        /// When the first message in the document expires (the document changes then).
        let validUntil: Date
    }

    /// The messages a document holds, in order: what makes two documents the same.
    private typealias Contents = [ObjectID]

    private struct Filed {
        let contents: Contents
        let generation: UInt64
        let validUntil: Date
    }

    private struct Cache {
        var documents: [Contents: Document] = [:]
        var bytes = 0
        var queries: [FeedQuery: Filed] = [:]
        var queryBytes = 0
        /// The snapshot's generation every document was built from.
        var generation: UInt64 = 0
    }

    let snapshot: FeedSnapshot
    /// Bounds the memory documents take: past it the cache starts over (every cached document
    /// is rebuilt on its next request).
    let maxCachedBytes: Int
    /// Bounds the table of queries (their regions are client-chosen text) the same way.
    let maxQueryBytes: Int
    private let cache = Mutex(Cache())

    /// Documents of `snapshot`, within the two memory bounds.
    public init(snapshot: FeedSnapshot, maxCachedBytes: Int = 16 << 20, maxQueryBytes: Int = 4 << 20) {
        self.snapshot = snapshot
        self.maxCachedBytes = maxCachedBytes
        self.maxQueryBytes = maxQueryBytes
    }

    /// What the cache holds now: documents and the bytes counted against the budget.
    var cached: (documents: Int, bytes: Int) { cache.withLock { ($0.documents.count, $0.bytes) } }

    /// The document `query` gets at `now`, encoded once per change of what it holds.
    public func document(for query: FeedQuery, at now: Date) throws -> Document {
        // Read before the messages: a reload in between leaves a document filed under the older
        // generation, rebuilt on the next request, never a stale one under the newer.
        let generation = snapshot.generation
        if let document = cache.withLock({ cache -> Document? in
            guard let filed = cache.queries[query], filed.generation == generation, now < filed.validUntil else { return nil }
            return cache.documents[filed.contents]
        }) {
            return document
        }
        let messages = snapshot.eligible(at: now, for: query)
        let contents = messages.map(\.id)
        let validUntil = messages.lazy.map(\.expiresAt).min() ?? .distantFuture
        let filed = Filed(contents: contents, generation: generation, validUntil: validUntil)
        if let document = cache.withLock({ cache -> Document? in
            guard let document = cache.documents[contents], document.generation == generation, now < document.validUntil else { return nil }
            Self.file(query, filed, in: &cache, budget: maxQueryBytes)
            return document
        }) {
            return document
        }
        let data = try JSONBody.encoder().encode(FeedRoutes.Document(messages: messages.map(FeedRoutes.Item.init)))
        let document = Document(body: ByteBuffer(bytes: data), tag: EntityTag.of(data), generation: generation, validUntil: validUntil)
        let cost = Self.cost(document, contents)
        cache.withLock { cache in
            // Documents of an older snapshot, or past their first expiry, are never served again.
            if cache.generation != generation { cache = Cache(generation: generation) }
            if cache.documents.values.contains(where: { now >= $0.validUntil }) {
                cache.documents = cache.documents.filter { now < $0.value.validUntil }
                cache.bytes = cache.documents.reduce(0) { $0 + Self.cost($1.value, $1.key) }
            }
            let replaced = cache.documents[contents].map { Self.cost($0, contents) } ?? 0
            if cache.bytes - replaced + cost > maxCachedBytes {
                cache = Cache(generation: generation)
            } else {
                cache.bytes -= replaced
            }
            guard cost <= maxCachedBytes else { return }
            cache.documents[contents] = document
            cache.bytes += cost
            Self.file(query, filed, in: &cache, budget: maxQueryBytes)
        }
        return document
    }

    /// What a cached document counts against the budget.
    private static func cost(_ document: Document, _ contents: Contents) -> Int {
        document.body.readableBytes + 12 * contents.count
    }

    /// Remembers which document `query` gets, within `budget` bytes of queries.
    private static func file(_ query: FeedQuery, _ filed: Filed, in cache: inout Cache, budget: Int) {
        func cost(_ filed: Filed) -> Int { (query.region?.utf8.count ?? 0) + 32 + 12 * filed.contents.count }
        guard cost(filed) <= budget else { return }
        let replaced = cache.queries[query].map(cost) ?? 0
        if cache.queryBytes - replaced + cost(filed) > budget { (cache.queries, cache.queryBytes) = ([:], replaced) }
        cache.queries[query] = filed
        cache.queryBytes += cost(filed) - replaced
    }
}
