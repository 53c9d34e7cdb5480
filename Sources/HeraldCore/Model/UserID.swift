/// User ids are opaque strings chosen by the backend; Herald only insists they are printable.
public enum UserID {
    public static let maxLength = 128

    /// - Throws: a 422 naming `field` when `id` is empty, too long, or has spaces or control characters.
    public static func validate(_ id: String, field: String) throws {
        guard !id.isEmpty else { throw HeraldError.invalidField(field, "must not be empty") }
        guard id.unicodeScalars.count <= maxLength else {
            throw HeraldError.invalidField(field, "must be at most \(maxLength) characters")
        }
        guard id.unicodeScalars.allSatisfy({ !$0.properties.isWhitespace && $0.value >= 0x20 && $0.value != 0x7f }) else {
            throw HeraldError.invalidField(field, "must not contain spaces or control characters")
        }
    }
}
