import AsyncHTTPClient
import Foundation
import HTTPTypes
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import Testing

/// What a fuzzer driven by openapi.yaml does not send: bodies of the wrong kind, broken or hostile
/// JSON, numbers no field can hold, arrays and headers far past any limit. Every answer is a 4xx
/// with the error shape (never a 5xx), and the server keeps answering afterwards.
@Suite(.cleansUp) struct BadInputMatrixTests {
    /// Routes that take a JSON body, each with a body it would accept.
    static let routes: [(method: String, path: String, valid: String)] = [
        ("POST", "/api/notifications", #"{"type":"generic","title":"t","body":"b","user_ids":["u"]}"#),
        ("POST", "/api/notifications/register", #"{"fcm_token":"token-1"}"#),
        ("PATCH", "/api/notifications/settings", #"{"enabled":true}"#),
        ("PUT", "/api/users/u", #"{"region":"QC"}"#),
        ("PUT", "/api/cards/c1", #"{"metadata":{},"posted_at":"2030-01-01T00:00:00Z"}"#),
        ("POST", "/api/events", #"{"events":[{"event_id":"e1","type":"focus","at":"2030-01-01T00:00:00Z"}]}"#),
        ("PUT", "/api/content/pending", #"{"items":[{"type":"post","visibility":{"all":true}}]}"#),
        ("POST", "/channel", #"{"name":"News"}"#),
        ("POST", "/api/feed/messages", #"{"title":"t","expires_at":"2999-01-01T00:00:00Z","target_regions":["CA"]}"#),
    ]

    /// Hostile variants of any body: (name, content type, bytes, expected status, expected code).
    static func variants(of valid: String) -> [(String, String?, [UInt8], HTTPResponse.Status, String?)] {
        let object = String(valid.dropFirst().dropLast())
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        // Within the decoder's 512 levels but past what Herald takes (and JSONEncoder writes).
        let nearTheDecodersLimit = String(repeating: "[", count: 509) + String(repeating: "]", count: 509)
        let pastHeraldsLimit = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        return [
            ("text/plain", "text/plain", Array(valid.utf8), .unsupportedMediaType, "unsupported_media_type"),
            ("form", "application/x-www-form-urlencoded", Array("a=1&b=2".utf8), .unsupportedMediaType, "unsupported_media_type"),
            ("a type that starts like JSON", "application/jsonx", Array(valid.utf8), .unsupportedMediaType, "unsupported_media_type"),
            ("a JSON patch", "application/json-patch+json", Array(valid.utf8), .unsupportedMediaType, "unsupported_media_type"),
            ("a Latin-1 charset", "application/json; charset=ISO-8859-1", Array(valid.utf8), .unsupportedMediaType, "unsupported_media_type"),
            ("truncated", "application/json", Array(valid.utf8.dropLast(3)), .badRequest, "invalid_json"),
            ("invalid UTF-8", "application/json", Array("{\"title\":\"".utf8) + [0xFF, 0xFE, 0xC0] + Array("\"}".utf8), .badRequest, "invalid_json"),
            ("truncated UTF-8", "application/json", Array("{\"title\":\"".utf8) + [0xE2, 0x82] + Array("\"}".utf8), .badRequest, "invalid_json"),
            ("not an object", "application/json", Array("[1,2,3]".utf8), .badRequest, "invalid_json"),
            // Past the decoder's own limit: still named as too deep, not as broken JSON.
            ("600-deep nesting", "application/json", Array("{\(object),\"x\":\(deep)}".utf8), .unprocessableContent, "invalid_field"),
            ("510-deep nesting", "application/json", Array("{\(object),\"x\":\(nearTheDecodersLimit)}".utf8), .unprocessableContent, "invalid_field"),
            ("65-deep nesting", "application/json", Array("{\(object),\"x\":\(pastHeraldsLimit)}".utf8), .unprocessableContent, "invalid_field"),
            (
                "an integer a double rounds", "application/json", Array("{\(object),\"x\":[1,-12345678901234567890]}".utf8), .unprocessableContent,
                "invalid_field"
            ),
            ("duplicate key", "application/json", Array("{\(object),\(object)}".utf8), .badRequest, "duplicate_key"),
            ("escaped duplicate key", "application/json", Array(#"{"a":1,"\u0061":2}"#.utf8), .badRequest, "duplicate_key"),
            ("nested duplicate key", "application/json", Array("{\(object),\"x\":{\"k\":1,\"k\":2}}".utf8), .badRequest, "duplicate_key"),
            (
                "huge array", "application/json", Array("{\"x\":[\(Array(repeating: "1", count: 40_000).joined(separator: ","))]}".utf8), .contentTooLarge,
                "payload_too_large"
            ),
        ]
    }

    @Test(arguments: 0..<routes.count)
    func hostileBodiesAreRefusedWithTheErrorShape(_ index: Int) async throws {
        let route = Self.routes[index]
        let herald = try await TestHerald.make()
        try await herald.test { client in
            for (name, contentType, bytes, status, code) in Self.variants(of: route.valid) {
                var fields = headers(herald.admin, user: "u", contentType: nil)
                if let contentType { fields[.contentType] = contentType }
                let response = try await client.execute(
                    uri: route.path, method: HTTPRequest.Method(route.method) ?? .post, headers: fields, body: ByteBuffer(bytes: bytes))
                #expect(response.status == status, "\(route.method) \(route.path) \(name): \(String(buffer: response.body))")
                #expect(response.errorCode == code, "\(route.method) \(route.path) \(name): \(String(buffer: response.body))")
                #expect(!response.errorMessage.isEmpty)
            }
            // Still answering, and the valid body is still accepted.
            let fine = try await client.call(HTTPRequest.Method(route.method) ?? .post, route.path, headers(herald.admin, user: "u"), json: route.valid)
            #expect((200..<300).contains(fine.status.code), "\(route.method) \(route.path): \(String(buffer: fine.body))")
            // Media types are case-insensitive, and UTF-8 may be named, quoted or not.
            var named = headers(herald.admin, user: "u", contentType: nil)
            named[.contentType] = #"Application/JSON ; Charset="UTF-8""#
            let again = try await client.execute(
                uri: route.path, method: HTTPRequest.Method(route.method) ?? .post, headers: named, body: ByteBuffer(string: route.valid))
            #expect((200..<300).contains(again.status.code), "\(route.method) \(route.path): \(String(buffer: again.body))")
        }
    }

    /// Numbers no Swift type of their field can hold are a 422 naming the field (or the body),
    /// never a 500: Foundation reports some of them with an error of its own.
    static let numbers: [(String, String, String)] = [
        ("POST", "/api/notifications", #"{"type":"generic","title":"t","priority":1e400,"user_ids":["u"]}"#),
        ("POST", "/api/notifications", #"{"type":"generic","title":"t","priority":2.5890419884777833e-42,"user_ids":["u"]}"#),
        ("POST", "/api/notifications", #"{"type":"generic","title":"t","priority":1e30,"user_ids":["u"]}"#),
        ("POST", "/api/feed/messages", #"{"title":"t","expires_at":"2999-01-01T00:00:00Z","target_regions":["CA"],"priority":2.5890419884777833e-42}"#),
        ("POST", "/api/feed/messages", #"{"title":"t","expires_at":"2999-01-01T00:00:00Z","target_regions":["CA"],"priority":-1e400}"#),
        ("PUT", "/api/cards/c1", #"{"metadata":{},"posted_at":"2030-01-01T00:00:00Z","hot":1e400}"#),
        ("PUT", "/api/users/u", #"{"tier_id":9223372036854775808}"#),
        ("PUT", "/api/content/pending", #"{"items":[{"type":"post","order":1e30}]}"#),
        ("POST", "/api/pool/scores", #"{"timestamp":1e400,"users":{}}"#),
    ]

    @Test(arguments: 0..<numbers.count)
    func numbersOutOfRangeAreRefused(_ index: Int) async throws {
        let (method, path, body) = Self.numbers[index]
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let response = try await client.call(HTTPRequest.Method(method) ?? .post, path, headers(herald.admin, user: "u"), json: body)
            #expect(response.status == .unprocessableContent || response.status == .badRequest, "\(path) \(body): \(String(buffer: response.body))")
            #expect(response.errorCode != nil, "\(String(buffer: response.body))")
        }
    }

    /// An NDJSON score upload gets the same checks line by line, naming the line.
    @Test(arguments: [
        ("invalid UTF-8", Array("{\"user_id\":\"u\",\"card\":\"".utf8) + [0xFF] + Array("\",\"score\":1,\"timestamp\":1}\n".utf8), "invalid_json"),
        ("duplicate key", Array("{\"user_id\":\"u\",\"user_id\":\"v\",\"card\":\"c\",\"score\":1,\"timestamp\":1}\n".utf8), "duplicate_key"),
    ])
    func hostileNDJSONLinesAreRefused(_ name: String, _ bytes: [UInt8], _ code: String) async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let response = try await client.execute(
                uri: "/api/pool/scores", method: .post, headers: headers(herald.admin, contentType: "application/x-ndjson"), body: ByteBuffer(bytes: bytes))
            #expect(response.status == .badRequest, "\(name): \(String(buffer: response.body))")
            #expect(response.errorCode == code)
            #expect(response.errorMessage.hasPrefix("line 1: "), "\(response.errorMessage)")
        }
    }

    /// A request head over Hummingbird's limit never reaches routing: its parser answers a bare
    /// 400 (or closes the connection), and the server keeps serving the next client.
    @Test func anOversizedHeadDoesNotHurtTheServer() async throws {
        let herald = try await TestHerald.make()
        _ = try await herald.serve { base in
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            do {
                var request = HTTPClientRequest(url: base + "/health/live")
                request.headers.add(name: "X-Huge", value: String(repeating: "a", count: 256 * 1024))
                if let response = try? await client.execute(request, timeout: .seconds(10)) {
                    #expect((400..<500).contains(Int(response.status.code)), "\(response.status)")
                }
                let after = try await client.execute(HTTPClientRequest(url: base + "/health/live"), timeout: .seconds(10))
                #expect(after.status == .ok)
                try await client.shutdown()
            } catch {
                try await client.shutdown()
                throw error
            }
        }
    }
}
