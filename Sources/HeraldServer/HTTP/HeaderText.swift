import HTTPTypes
import HeraldCore

extension HTTPFields {
    /// The value of the `name` fields, as `subscript(_:)` gives it, refused when its bytes are
    /// not UTF-8: `value` reads them with U+FFFD in place of each bad sequence, so `Jos\xE9`
    /// and `Jos\xE8` (Latin-1) would both be the user `Jos\u{FFFD}`, two senders' users made one,
    /// and what is stored would not be what was sent.
    /// - Throws: a 422 naming the header.
    func text(_ name: HTTPField.Name) throws -> String? {
        for field in self[fields: name] where field.withUnsafeBytesOfValue({ String(validating: $0, as: UTF8.self) }) == nil {
            throw HeraldError.invalidField(name.rawName, "must be UTF-8")
        }
        return self[name]
    }
}
