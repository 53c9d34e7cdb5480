import Foundation

/// User ids are opaque strings chosen by the backend; Herald only insists they are printable,
/// and written one way.
public enum UserID {
    /// Longest id, in code points.
    public static let maxLength = 128

    /// - Throws: a 422 naming `field` when `id` is empty, too long, has spaces or control
    ///   characters, or is not in Unicode normalization form C.
    public static func validate(_ id: String, field: String) throws {
        guard !id.isEmpty else { throw HeraldError.invalidField(field, "must not be empty") }
        guard id.unicodeScalars.count <= maxLength else {
            throw HeraldError.invalidField(field, "must be at most \(maxLength) characters")
        }
        guard id.unicodeScalars.allSatisfy({ !$0.properties.isWhitespace && $0.value >= 0x20 && $0.value != 0x7f }) else {
            throw HeraldError.invalidField(field, "must not contain spaces or control characters")
        }
        try checkNFC(id, field: field)
    }

    /// - Throws: a 422 naming `field` when `text`, an id matched against others by bytes, is not
    ///   in Unicode normalization form C.
    public static func checkNFC(_ text: String, field: String) throws {
        guard isNFC(text) else {
            throw HeraldError.invalidField(
                field, "must be in Unicode normalization form C (NFC): compose accents with their letters ('é' as U+00E9, not 'e' and U+0301)")
        }
    }

    /// Swift compares strings by canonical equivalence, the stores by their bytes: "é" as U+00E9
    /// and as "e" + U+0301 would be one user to Herald's routing (a dictionary of recipients, a
    /// set of user ids) and two to its database, so one user's notifications could reach the
    /// other's devices. In NFC, canonically equivalent strings are the same bytes.
    static func isNFC(_ id: String) -> Bool {
        id.utf8.allSatisfy { $0 < 0x80 } || id.unicodeScalars.elementsEqual(id.precomposedStringWithCanonicalMapping.unicodeScalars)
    }

    /// Whether two ids are the same bytes, as the stores compare them. Use it, not `==`, on an
    /// id read from the database: rows written before ids had to be in NFC may hold one that
    /// `==` takes for another.
    public static func same(_ id: String, _ other: String) -> Bool {
        id.utf8.elementsEqual(other.utf8)
    }
}
