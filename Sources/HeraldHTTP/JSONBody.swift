import Foundation
import HeraldCore
import Hummingbird

/// Reading JSON request bodies and writing JSON responses, with errors that name the field.
public enum JSONBody {
    public static let maxBytes = 64 * 1024

    /// Decodes the request body as `T`.
    /// - Parameter knownFields: when given, a top-level field outside the set is refused (422),
    ///   so a misspelt field is reported instead of silently ignored.
    package static func decode<T: Decodable>(
        _ type: T.Type, from request: Request, context: HeraldRequestContext, knownFields: Set<String>? = nil
    ) async throws -> T {
        try await decodeKeepingBytes(type, from: request, context: context, knownFields: knownFields).value
    }

    /// ``decode(_:from:context:knownFields:)``, also returning the body as received.
    package static func decodeKeepingBytes<T: Decodable>(
        _ type: T.Type, from request: Request, context: HeraldRequestContext, knownFields: Set<String>? = nil
    ) async throws -> (value: T, bytes: Data) {
        if let contentType = request.headers[.contentType] {
            let type = MediaType(contentType)
            guard type.essence == "application/json" else {
                throw HeraldError(.unsupportedMediaType, code: "unsupported_media_type", "send the body as 'Content-Type: application/json'")
            }
            guard type.isUTF8 else { throw type.charsetRefusal }
        }
        guard !AnnouncedLength.exceeds(request, maxBytes) else { throw tooLarge }
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: maxBytes)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw tooLarge
        }
        let data = Data(buffer.readableBytesView)
        guard !data.isEmpty else { throw HeraldError(.badRequest, code: "missing_body", "a JSON object body is required") }
        // One parse: the wrapper reads the object's keys and the value from the same decoder.
        let body: KeyedBody<T>
        do {
            body = try JSONDecoder().decode(KeyedBody<T>.self, from: data)
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.isEmpty {
            throw HeraldError(.badRequest, code: "invalid_json", "the body must be a JSON object")
        } catch {
            // The decoder stops at 512 levels with the error broken JSON gets: a body nested that
            // deep is told what is wrong with it, as one nested past 64 levels is below.
            if let problem = JSONTextCheck.firstProblem(in: data), case .tooDeep = problem { throw JSONTextCheck.error(for: problem) }
            throw HeraldError(.badRequest, code: "invalid_json", "the body is not valid JSON")
        }
        // Refused rather than stored altered: a 2xx means stored exactly as sent.
        if let problem = JSONTextCheck.firstProblem(in: data) { throw JSONTextCheck.error(for: problem) }
        if let knownFields {
            for name in body.keys.sorted() where !knownFields.contains(name) {
                throw HeraldError(
                    .unprocessable, code: "unknown_field", "unknown field '\(name)'; known fields: \(knownFields.sorted().joined(separator: ", "))")
            }
        }
        do {
            return (try body.value.get(), data)
        } catch {
            throw decodingFailure(error)
        }
    }

    /// The 4xx for a body the decoder read as JSON but could not turn into the value: a check a
    /// type's decoder makes throws its own error; a `DecodingError` names its field; Foundation reports a number no Swift type of the field can
    /// hold (`1e400`, `2.5e-42` for an integer) with an error of its own, without the path.
    package static func decodingFailure(_ error: any Error) -> HeraldError {
        if let error = error as? HeraldError { return error }
        if let error = error as? DecodingError { return fieldError(error) }
        return HeraldError(.unprocessable, code: "invalid_field", "a number in the body is out of range for its field")
    }

    package static let tooLarge = HeraldError(.payloadTooLarge, code: "payload_too_large", "the body is larger than \(maxBytes / 1024) KiB")

    package static func fieldError(_ error: DecodingError) -> HeraldError {
        switch error {
        case .typeMismatch(let type, let context):
            return .invalidField(path(context.codingPath), "must be \(describe(type))")
        case .valueNotFound(let type, let context):
            return .invalidField(path(context.codingPath), "must be \(describe(type)), not null")
        case .keyNotFound(let key, let context):
            return .missingField(path(context.codingPath + [key]))
        case .dataCorrupted(let context):
            return .invalidField(path(context.codingPath), context.debugDescription)
        @unknown default:
            return HeraldError(.unprocessable, code: "invalid_field", "the body has an invalid value")
        }
    }

    package static func path(_ codingPath: [any CodingKey]) -> String {
        guard !codingPath.isEmpty else { return "body" }
        var text = ""
        for key in codingPath {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return text
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Int64.Type: "an integer"
        case is Double.Type: "a number"
        default:
            "\(type)".hasPrefix("Array") ? "an array" : "\(type)".hasPrefix("Dictionary") ? "an object" : "of the documented type"
        }
    }

    package static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        return encoder
    }

    /// A JSON response; slashes stay unescaped so URLs read as URLs.
    package static func response(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        response(bytes: try encoder().encode(value), status: status)
    }

    /// A JSON response of JSON text already written.
    package static func response(bytes: some Sequence<UInt8>, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

/// An optional that is written as `null` rather than left out: apps expect keys such as
/// `next` and `url` to be present.
package struct Nullable<Wrapped: Encodable>: Encodable {
    package var value: Wrapped?

    package init(_ value: Wrapped?) { self.value = value }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let value { try container.encode(value) } else { try container.encodeNil() }
    }
}

/// Decodes any JSON value and keeps nothing: used to list an object's keys.
/// A JSON object's keys, and the value decoded from it (or why it could not be), so unknown
/// fields can be reported before type errors without parsing the body twice.
package struct KeyedBody<T: Decodable>: Decodable {
    package struct Key: CodingKey {
        package var stringValue: String
        package var intValue: Int? { nil }
        package init(stringValue: String) { self.stringValue = stringValue }
        package init?(intValue: Int) { nil }
    }

    package let keys: [String]
    package let value: Result<T, any Error>

    package init(from decoder: any Decoder) throws {
        // A closure, not `\.stringValue`: a key path is instantiated at run time on every call
        // (2 % of an accept's CPU).
        keys = try decoder.container(keyedBy: Key.self).allKeys.map { $0.stringValue }
        do {
            value = .success(try T(from: decoder))
        } catch {
            value = .failure(error)
        }
    }
}
