import Foundation
import HeraldCore
import NIOCore
import Synchronization

/// `/feed/index.json` as encoded for each query, with its entity tag, kept until the snapshot
/// reloads or the first message in it expires. A poll that changes nothing (the common case: a
/// 304) then costs a lookup instead of encoding and hashing the whole document, and live streams
/// compare versions the same way.
final class FeedDocuments: Sendable {
    struct Document: Sendable {
        let body: ByteBuffer
        /// The strong entity tag, quoted.
        let tag: String
        let generation: UInt64
        /// When the first message in the document expires (the document changes then).
        let validUntil: Date
    }

    let snapshot: FeedSnapshot
    /// Bounds the memory a flood of distinct `region`/`version` queries can take: past it the
    /// cache starts over (every cached document is rebuilt on its next request).
    let maxCachedBytes: Int
    private let cache = Mutex<(documents: [FeedQuery: Document], bytes: Int)>(([:], 0))

    init(snapshot: FeedSnapshot, maxCachedBytes: Int = 16 << 20) {
        self.snapshot = snapshot
        self.maxCachedBytes = maxCachedBytes
    }

    /// What the cache holds now: documents and the bytes counted against the budget.
    var cached: (documents: Int, bytes: Int) { cache.withLock { ($0.documents.count, $0.bytes) } }

    func document(for query: FeedQuery, at now: Date) throws -> Document {
        // Read before the messages: a reload in between leaves a document filed under the older
        // generation, rebuilt on the next request, never a stale one under the newer.
        let generation = snapshot.generation
        if let cached = cache.withLock({ $0.documents[query] }), cached.generation == generation, now < cached.validUntil {
            return cached
        }
        let messages = snapshot.eligible(at: now, for: query)
        let data = try JSONBody.encoder().encode(FeedRoutes.Document(messages: messages.map(FeedRoutes.Item.init)))
        let document = Document(
            body: ByteBuffer(bytes: data), tag: EntityTag.of(data), generation: generation,
            validUntil: messages.lazy.map(\.expiresAt).min() ?? .distantFuture
        )
        let cost = Self.cost(document, query)
        cache.withLock { cache in
            let replaced = cache.documents[query].map { Self.cost($0, query) } ?? 0
            if cache.bytes - replaced + cost > maxCachedBytes {
                cache = ([:], 0)
            } else {
                cache.bytes -= replaced
            }
            guard cost <= maxCachedBytes else { return }
            cache.documents[query] = document
            cache.bytes += cost
        }
        return document
    }

    /// What a cached document counts against the budget: its body, and the region, which is
    /// whatever a client sent.
    private static func cost(_ document: Document, _ query: FeedQuery) -> Int {
        document.body.readableBytes + (query.region?.utf8.count ?? 0)
    }
}
