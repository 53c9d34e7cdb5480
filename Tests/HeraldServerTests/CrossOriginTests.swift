import Foundation
import HTTPTypes
import HeraldCore
import HeraldTestSupport
import HummingbirdTesting
import Testing

@testable import HeraldServer

/// A browser app on another origin calls the API with a user token: its preflight is answered,
/// and every answer (errors too) carries the CORS headers, for the listed origins only.
@Suite(.cleansUp) struct CrossOriginTests {
    static let app = "https://app.example"

    func headers(origin: String?, _ extra: [(String, String)] = []) -> HTTPFields {
        var fields = HTTPFields()
        if let origin { fields[.origin] = origin }
        for (name, value) in extra { fields[HTTPField.Name(name)!] = value }
        return fields
    }

    @Test func listedOriginsArePreflightedAndAnswered() async throws {
        let herald = try await TestHerald.make { $0.corsOrigins = [Self.app, "http://localhost:3000"] }
        let token = try await herald.userToken("ana")
        try await herald.test { client in
            let preflight = try await client.call(
                .options, "/api/notifications/register",
                headers(origin: Self.app, [("Access-Control-Request-Method", "POST"), ("Access-Control-Request-Headers", "authorization, content-type")]))
            #expect(preflight.status == .noContent)
            #expect(preflight.headers[.accessControlAllowOrigin] == Self.app)
            let allowedHeaders = preflight.headers[.accessControlAllowHeaders]?.lowercased() ?? ""
            #expect(allowedHeaders.contains("authorization") && allowedHeaders.contains("content-type") && !allowedHeaders.contains("x-user-id"))
            #expect(preflight.headers[.accessControlAllowMethods]?.contains("POST") == true)
            #expect(preflight.headers[.accessControlAllowCredentials] == nil)
            #expect(preflight.headers[.vary] == "Origin")

            var fields = headers(origin: Self.app, [("Authorization", "Bearer \(token)")])
            let history = try await client.call(.get, "/api/notifications/history", fields)
            #expect(history.status == .ok)
            #expect(history.headers[.accessControlAllowOrigin] == Self.app)

            // An error keeps Herald's shape and the browser may read it.
            fields[.authorization] = "Bearer not-a-token"
            let refused = try await client.call(.get, "/api/notifications/history", fields)
            #expect(refused.status == .unauthorized && refused.errorCode != nil, "\(refused.object)")
            #expect(refused.headers[.accessControlAllowOrigin] == Self.app)

            // Another origin, `null`, or the portal: no CORS, and no preflight answer.
            for origin in ["https://evil.example", "null", "https://app.example.evil.example"] {
                let other = try await client.call(.options, "/api/notifications/register", headers(origin: origin, [("Access-Control-Request-Method", "POST")]))
                #expect(other.status == .methodNotAllowed, "\(origin)")
                #expect(other.headers[.accessControlAllowOrigin] == nil, "\(origin)")
            }
            // However the path is spelt: the router serves `//portal/login` as `/portal/login`.
            for path in ["/portal/login", "//portal/login", "/portal//login"] {
                let portal = try await client.call(.get, path, headers(origin: Self.app))
                #expect(portal.status == .ok && portal.headers[.accessControlAllowOrigin] == nil, "\(path)")
            }
        }
    }

    @Test func anyOriginWithAStarAndNoneByDefault() async throws {
        let open = try await TestHerald.make { $0.corsOrigins = ["*"] }
        try await open.test { client in
            let feed = try await client.call(.get, "/feed/index.json", headers(origin: "https://any.example"))
            #expect(feed.headers[.accessControlAllowOrigin] == "*")
            let null = try await client.call(.get, "/feed/index.json", headers(origin: "null"))
            #expect(null.headers[.accessControlAllowOrigin] == nil, "null is never an allowed origin")
        }
        let closed = try await TestHerald.make()
        try await closed.test { client in
            let preflight = try await client.call(
                .options, "/api/notifications/register", headers(origin: Self.app, [("Access-Control-Request-Method", "POST")]))
            #expect(preflight.status == .methodNotAllowed)
            #expect(preflight.headers[.accessControlAllowOrigin] == nil)
        }
    }

    @Test(arguments: ["https://app.example/", "https://app.example/path", "app.example", "null", "ftp://app.example", "https://App.example", "https://"])
    func entriesThatAreNotOriginsAreRefusedNamingTheKey(_ entry: String) async throws {
        let error = await #expect(throws: HeraldError.self) {
            _ = try await HeraldConfiguration.load(configFile: nil, environment: ["HERALD_SERVER_CORS_ORIGINS": entry])
        }
        #expect(error?.message.contains("server.cors_origins") == true, "\(error?.message ?? "")")
    }

    @Test func originsAreReadAsAListOrOneCommaSeparatedString() async throws {
        let configuration = try await HeraldConfiguration.load(
            configFile: nil, environment: ["HERALD_SERVER_CORS_ORIGINS": "https://app.example, http://localhost:3000"])
        #expect(configuration.corsOrigins == ["https://app.example", "http://localhost:3000"])
    }
}
