public import Foundation
import Synchronization

/// A 12-byte identifier written as 24 lowercase hex characters, ordered by creation time
/// like a MongoDB ObjectId: 4 bytes of Unix seconds, 5 random bytes chosen once per process,
/// and a 3-byte counter.
public struct ObjectID: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    /// The 24 lowercase hex characters.
    public let hex: String

    /// Accepts exactly 24 lowercase hex characters.
    public init?(_ text: String) {
        guard text.utf8.count == 24, text.utf8.allSatisfy(ObjectID.isLowerHex) else { return nil }
        self.hex = text
    }

    init(bytes: [UInt8]) {
        self.hex = Hex.lowercase(bytes)
    }

    public var description: String { hex }

    /// The creation second encoded in the id.
    public var date: Date {
        let seconds = UInt32(hex.prefix(8), radix: 16) ?? 0
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    public static func < (lhs: ObjectID, rhs: ObjectID) -> Bool { lhs.hex < rhs.hex }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = ObjectID(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a 24-character hex id"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }

    private static func isLowerHex(_ c: UInt8) -> Bool {
        (c >= 48 && c <= 57) || (c >= 97 && c <= 102)
    }
}

/// Makes time-ordered ``ObjectID``s; safe to share between tasks.
public final class ObjectIDGenerator: Sendable {
    private let processUnique: [UInt8]
    private let counter: Mutex<UInt32>

    /// A generator with this process's random bytes and a random first count.
    public init() {
        var rng = SystemRandomNumberGenerator()
        self.processUnique = (0..<5).map { _ in UInt8.random(in: 0...255, using: &rng) }
        self.counter = Mutex(UInt32.random(in: 0..<0xFF_FFFF, using: &rng))
    }

    /// A new id with `date`'s second; ids made in one second are ordered by the counter.
    public func next(at date: Date = Date()) -> ObjectID {
        let seconds = UInt32(clamping: Int64(saturating: date.timeIntervalSince1970.rounded(.down)))
        let count = counter.withLock { value -> UInt32 in
            value = (value &+ 1) & 0xFF_FFFF
            return value
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity(12)
        bytes.append(contentsOf: [UInt8(seconds >> 24), UInt8((seconds >> 16) & 0xff), UInt8((seconds >> 8) & 0xff), UInt8(seconds & 0xff)])
        bytes.append(contentsOf: processUnique)
        bytes.append(contentsOf: [UInt8(count >> 16), UInt8((count >> 8) & 0xff), UInt8(count & 0xff)])
        return ObjectID(bytes: bytes)
    }
}
