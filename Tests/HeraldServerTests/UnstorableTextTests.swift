import Foundation
import HTTPTypes
import HeraldCore
import HeraldHTTP
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import Testing

@testable import HeraldServer

/// A 2xx means stored exactly as sent: text Herald could not store as sent (U+0000, unpaired
/// surrogates) is refused with a 422 naming the field, on every route that takes text.
@Suite(.cleansUp) struct UnstorableTextTests {
    /// Raw JSON bodies: `\u0000` and lone surrogates can only arrive as escapes.
    static let cases: [(String, String, String, String)] = [
        ("POST", "/api/notifications", #"{"type":"generic","title":"a\u0000b","body":"b","user_ids":["u"]}"#, "title"),
        ("POST", "/api/notifications", #"{"type":"generic","title":"t","body":"b","data":{"k":"v\u0000"},"user_ids":["u"]}"#, "data.k"),
        ("POST", "/api/notifications", #"{"type":"generic","title":"t","body":"b","data":{"k\u0000":"v"},"user_ids":["u"]}"#, "data"),
        ("POST", "/api/notifications", #"{"type":"generic","title":"t","body":"b","user_ids":["u","x\u0000"]}"#, "user_ids[1]"),
        ("POST", "/api/notifications", #"{"type":"generic","title":"\ud800","body":"b","user_ids":["u"]}"#, "title"),
        ("POST", "/api/notifications", #"{"type":"generic","title":"t","body":"\udc00x","user_ids":["u"]}"#, "body"),
        ("POST", "/api/notifications", #"{"type":"generic","title":"t","body":"\ud800\u0041","user_ids":["u"]}"#, "body"),
        ("POST", "/api/notifications/register", #"{"fcm_token":"tok\u0000en"}"#, "fcm_token"),
        ("PATCH", "/api/notifications/settings", #"{"quiet_hours":{"start":"22:00","end":"07:00","tz":"UTC\u0000"}}"#, "quiet_hours.tz"),
        ("PUT", "/api/users/u1", #"{"region":"QC\u0000"}"#, "region"),
        ("POST", "/channel", #"{"name":"News\u0000","desc":"d"}"#, "name"),
        ("POST", "/message", #"{"title":"t","desc":"d\u0000","message":"m","topic_key":"x","distribution":"Alert"}"#, "desc"),
        ("POST", "/api/feed/messages", #"{"title":"t\u0000","body":"b","expires_at":"2999-01-01T00:00:00Z"}"#, "title"),
        ("PUT", "/api/content/pending", #"{"items":[{"type":"post","title":"x\u0000","visibility":{"all":true}}]}"#, "items[0].title"),
    ]

    @Test(arguments: 0..<cases.count)
    func refusedNamingTheField(_ index: Int) async throws {
        let (method, path, body, field) = Self.cases[index]
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let response = try await client.call(HTTPRequest.Method(method) ?? .post, path, headers(herald.admin, user: "u"), json: body)
            #expect(response.status == .unprocessableContent, "\(method) \(path): \(String(buffer: response.body))")
            #expect(response.errorMessage.contains("'\(field)'"), "\(response.errorMessage)")
        }
        #expect(try await herald.server.store.devices(userID: "u").isEmpty)
    }

    /// Properly paired surrogates (an emoji as escapes) and an escaped backslash before `u0000`
    /// are ordinary text, stored as sent.
    @Test func legitimateEscapesAreStoredExactly() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let body = #"{"type":"generic","title":"\ud83d\ude00 \\u0000","body":"b","user_ids":["u"]}"#
            let response = try await client.call(.post, "/api/notifications", headers(herald.backend), json: body)
            #expect(response.status == .accepted, "\(String(buffer: response.body))")
            try await herald.deliver()
            let history = try await client.call(.get, "/api/notifications/history", headers(herald.backend, user: "u", contentType: nil))
            let item = try #require((history.object["history"] as? [[String: Any]])?.first)
            #expect((item["notification"] as? [String: Any])?["title"] as? String == "😀 \\u0000")
        }
    }

    @Test func theEncodedNULCheckFindsEveryPercentZeroZero() {
        for text in ["%00", "/a%00", "%%00", "%0%00", "x%000", "/api?x=1&y=%00&z"] {
            #expect(ErrorMiddleware<HeraldRequestContext>.hasEncodedNUL(text), "\(text)")
        }
        for text in ["", "%", "%0", "%0 0", "%100", "/a%20b%0", "0%0", "%%0%0", "😀%0😀0"] {
            #expect(!ErrorMiddleware<HeraldRequestContext>.hasEncodedNUL(text), "\(text)")
        }
    }

    @Test(arguments: ["/api/users/a%00b", "/message?topic_key=a%00b", "/api/notifications/history?before=%00"])
    func aURLWithU0000IsRefused(_ path: String) async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let method: HTTPRequest.Method = path.hasPrefix("/api/users") ? .put : .get
            let response = try await client.call(method, path, headers(herald.admin, user: "u"), json: method == .put ? #"{"region":"QC"}"# : nil)
            #expect(response.status == .badRequest)
            #expect(response.errorCode == "invalid_url")
        }
    }
}
