import HTTPTypes
import HeraldCore

extension HTTPFields {
    /// The value of the single `name` field, refused when its bytes are not UTF-8 or when it
    /// was sent twice. `value` reads bad bytes as U+FFFD, so `Jos\xE9` and `Jos\xE8` (Latin-1)
    /// would both be the user `Jos\u{FFFD}`, two senders' users made one; two fields would be
    /// joined with ", " into a value neither of them was. Either way what is stored would not be
    /// what was sent.
    ///
    /// U+FFFD is refused too: NIO's HTTP/1.1 parser decodes header values into strings before
    /// Herald sees them, putting U+FFFD where the bytes were not UTF-8, so over a real connection
    /// the bytes check alone passed `Jos\xE9` as `Jos\u{FFFD}` (only a test client that hands
    /// the bytes over unchanged was refused). A client that means U+FFFD itself has no use for it
    /// in these values.
    /// - Throws: a 422 naming the header.
    package func text(_ name: HTTPField.Name) throws -> String? {
        let fields = self[fields: name]
        guard fields.count <= 1 else { throw HeraldError.invalidField(name.rawName, "must be sent once") }
        guard let field = fields.first else { return nil }
        guard let text = field.withUnsafeBytesOfValue({ String(validating: $0, as: UTF8.self) }), !text.unicodeScalars.contains("\u{FFFD}") else {
            throw HeraldError.invalidField(name.rawName, "must be UTF-8 (U+FFFD stands for bytes that were not)")
        }
        return text
    }
}
