import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HummingbirdTesting
import Testing

/// Query parameters are read as sent or refused: Hummingbird's own reader takes escapes that
/// are not UTF-8 as U+FFFD (Latin-1 `%CE` and `%CF` would be one value), keeps a malformed
/// escape as written, and answers the first of two values.
@Suite(.cleansUp) struct QueryTextTests {
    enum Caller { case user, communicator, anonymous }

    static let parameters: [(path: String, name: String, caller: Caller)] = [
        ("/api/notifications/history", "limit", .user), ("/api/notifications/history", "before", .user),
        ("/message", "topic_key", .communicator), ("/message", "limit", .communicator), ("/message", "before", .communicator),
        ("/feed/index.json", "region", .anonymous), ("/feed/index.json", "version", .anonymous),
        ("/feed/next", "read", .anonymous), ("/feed/next", "region", .anonymous),
        ("/api/content", "format", .user),
        ("/api/pull", "mode", .user), ("/api/pull", "limit", .user), ("/api/pull", "cache_key", .user),
        ("/api/events/stats", "card", .communicator),
    ]

    @Test func escapesThatAreNotUTF8MalformedOrRepeatedAreRefusedNamingTheParameter() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            for (path, name, caller) in Self.parameters {
                let fields: HTTPFields
                switch caller {
                case .user: fields = headers(herald.backend, user: "ada")
                case .communicator: fields = headers(path == "/api/events/stats" ? herald.backend : herald.communicator)
                case .anonymous: fields = headers(contentType: nil)
                }
                for query in ["\(name)=%CEle", "\(name)=50%", "\(name)=%zz", "\(name)=1&\(name)=2"] {
                    let response = try await client.call(.get, "\(path)?\(query)", fields)
                    #expect(
                        response.status == .badRequest && response.errorCode == "invalid_query" && response.errorMessage.contains("'\(name)'"),
                        "\(path)?\(query): \(response.status) \(response.errorMessage)")
                }
            }
        }
    }

    /// The same region spelt in UTF-8 escapes is read as that region, and `+` stays a `+`.
    @Test func utf8EscapesAreReadAsTheTextTheySpell() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            for (title, region) in [("island", "Île"), ("plus", "A+B")] {
                let body: [String: Any] = [
                    "title": title, "body": "b", "expires_at": Timestamp.format(Date().addingTimeInterval(3600)), "target_regions": [region],
                ]
                let created = try await client.call(.post, "/api/feed/messages", headers(herald.admin), json: js(body))
                #expect(created.status == .created, "\(created.errorMessage)")
            }
            func titles(_ query: String) async throws -> [String] {
                let response = try await client.call(.get, "/feed/index.json?\(query)", headers(contentType: nil))
                #expect(response.status == .ok, "\(query): \(response.errorMessage)")
                return (response.object["messages"] as? [[String: Any]] ?? []).compactMap { $0["title"] as? String }
            }
            #expect(try await titles("region=%C3%8Ele") == ["island"])
            #expect(try await titles("region=A+B") == ["plus"])
            #expect(try await titles("region=A%2BB") == ["plus"])
            #expect(try await titles("region=%C3%8E") == [])
        }
    }
}
