public import Foundation
public import HeraldCore

/// A card of an offline-first swiping app (docs/cards.md): the backend's content, which users' pools
/// rank and their histories record.
public struct Card: Sendable, Equatable {
    /// The app's own id: 1-128 bytes of letters, digits and `_ - . :`.
    public var id: String
    /// What the app shows, as the backend sent it (at most 16 KiB as JSON).
    public var metadata: [String: JSONValue]
    public var postedAt: Date
    /// The backend's own hotness, carried for apps; ranking uses each user's scores.
    public var hot: Double?

    public static let maxMetadataBytes = 16 * 1024
    public static let maxIDBytes = 128

    public init(id: String, metadata: [String: JSONValue], postedAt: Date, hot: Double? = nil) {
        self.id = id
        self.metadata = metadata
        self.postedAt = postedAt
        self.hot = hot
    }

    /// - Throws: a 422 naming `field` for an id that is empty, too long or has other characters.
    public static func validateID(_ id: String, field: String) throws {
        guard !id.isEmpty, id.utf8.count <= maxIDBytes else { throw HeraldError.invalidField(field, "must be 1-\(maxIDBytes) bytes") }
        let allowed = id.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || [0x5F, 0x2D, 0x2E, 0x3A].contains(byte)
        }
        guard allowed else { throw HeraldError.invalidField(field, "must be letters, digits, '_', '-', '.' or ':'") }
    }

    /// - Throws: a 422 naming the first invalid field under `path`.
    public func validate(path: String) throws {
        try Self.validateID(id, field: "\(path)id")
        guard JSONValue.object(metadata).canonicalText.utf8.count <= Self.maxMetadataBytes else {
            throw HeraldError.invalidField("\(path)metadata", "must be at most \(Self.maxMetadataBytes / 1024) KiB as JSON")
        }
        if let hot, !hot.isFinite { throw HeraldError.invalidField("\(path)hot", "must be a finite number") }
    }
}

/// A card as a pull sends it: the metadata stays the JSON text it is stored as, so a pull of a
/// thousand cards does not decode and re-encode a thousand objects.
public struct CardContent: Sendable, Equatable {
    public var id: String
    public var postedAt: Date
    public var hot: Double?
    /// The metadata object as JSON text.
    public var metadataJSON: String

    public init(id: String, postedAt: Date, hot: Double?, metadataJSON: String) {
        self.id = id
        self.postedAt = postedAt
        self.hot = hot
        self.metadataJSON = metadataJSON
    }

    /// The card with its metadata decoded.
    public func card() throws -> Card {
        guard case .object(let fields) = try JSONDecoder().decode(JSONValue.self, from: Data(metadataJSON.utf8)) else {
            throw HeraldError(.internal, code: "storage_corrupt", "card \(id) has metadata that is not an object")
        }
        return Card(id: id, metadata: fields, postedAt: postedAt, hot: hot)
    }
}

/// One history entry: the card a user saw at a fixed index ("0", "1", ...).
public struct CardHistoryEntry: Sendable, Equatable {
    public var index: Int64
    public var card: String

    public init(index: Int64, card: String) {
        self.index = index
        self.card = card
    }
}

/// A card reported seen by a device, possibly long after and in any order.
public struct SeenReport: Sendable, Equatable {
    public var card: String
    public var at: Date

    public init(card: String, at: Date) {
        self.card = card
        self.at = at
    }
}

/// How a pull orders a pool: `hot` by score (highest first), `recent` by `posted_at` (newest
/// first); ties by card id.
public enum PoolOrder: String, Sendable, CaseIterable {
    case hot
    case recent
}
