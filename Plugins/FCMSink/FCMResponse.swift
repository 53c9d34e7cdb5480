import Foundation
import HeraldCore

/// What one FCM answer means for the delivery (docs/fcm.md: classify by HTTP status and by the
/// `errorCode` of the `FcmError` detail; a `google.rpc.BadRequest` detail is a payload bug).
public enum FCMResult: Sendable, Equatable {
    /// FCM took the message.
    case sent
    /// The token is dead: remove the device, never try it again.
    case unregistered(String)
    /// The token belongs to another sender; on every token at once it means wrong credentials.
    case senderMismatch(String)
    /// FCM refused the payload; the device is fine.
    case payloadFault(String)
    /// 401: the access token was refused.
    case unauthorized(String)
    /// 429 or 5xx: try again, no sooner than `after` when FCM said so. FCM answered, so it is up:
    /// this message waits its own backoff (it says nothing of the provider as a whole).
    case transient(after: Duration?, reason: String)
    /// No answer came (refused, reset, timed out): FCM may be down, which its circuit judges.
    case unanswered(String)
    /// Any other refusal: do not retry.
    case refused(String)

    static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    static let badRequestType = "type.googleapis.com/google.rpc.BadRequest"

    /// Classifies an FCM response.
    /// - Parameters:
    ///   - status: the HTTP status.
    ///   - body: the response body.
    ///   - retryAfter: the `Retry-After` header, in seconds or as an HTTP-date.
    ///   - now: the time an HTTP-date is counted from.
    public static func classify(status: Int, body: Data, retryAfter: String?, now: Date = Date()) -> FCMResult {
        if (200..<300).contains(status) { return .sent }
        struct Body: Decodable {
            struct Detail: Decodable {
                var type: String?
                var errorCode: String?
                enum CodingKeys: String, CodingKey {
                    case type = "@type"
                    case errorCode
                }
            }
            struct Inner: Decodable {
                var code: Int?
                var message: String?
                var status: String?
                var details: [Detail]?
            }
            var error: Inner?
        }
        let parsed = (try? JSONDecoder().decode(Body.self, from: body))?.error
        let errorCode = parsed?.details?.first { $0.type == fcmErrorType }?.errorCode
        let hasBadRequest = parsed?.details?.contains { $0.type == badRequestType } ?? false
        let text = "FCM \(status) \(errorCode ?? parsed?.status ?? "error"): \(parsed?.message ?? String(decoding: body.prefix(300), as: UTF8.self))"
        let after = retryAfter.flatMap { RetryAfter.parse($0, now: now) }

        if errorCode == "UNREGISTERED" { return .unregistered(text) }
        if errorCode == "SENDER_ID_MISMATCH" { return .senderMismatch(text) }
        if status == 400 || errorCode == "INVALID_ARGUMENT" {
            // An FcmError without field violations is about the registration token itself.
            if hasBadRequest || errorCode == nil { return .payloadFault(text) }
            return .unregistered(text)
        }
        if status == 401 { return .unauthorized(text) }
        if status == 429 || errorCode == "QUOTA_EXCEEDED" { return .transient(after: after, reason: text) }
        if status >= 500 { return .transient(after: after, reason: text) }
        return .refused(text)
    }
}
