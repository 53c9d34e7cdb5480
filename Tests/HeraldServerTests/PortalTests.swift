import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import HeraldTopics
import HummingbirdTesting
import NIOCore
import Testing

/// The portal's security and error handling at the HTTP level; Tests/Browser drives the
/// pages themselves in Chromium.
@Suite(.cleansUp) struct PortalTests {
    func form(_ fields: [String: String], cookie: String? = nil, forwardedProto: String? = nil) -> (HTTPFields, String) {
        var headers = HTTPFields()
        headers[.contentType] = "application/x-www-form-urlencoded"
        if let cookie { headers[.cookie] = cookie }
        if let forwardedProto { headers[HTTPField.Name("X-Forwarded-Proto")!] = forwardedProto }
        let body = fields.map { key, value in
            "\(key)=\(value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"
        }.joined(separator: "&")
        return (headers, body)
    }

    func csrf(in page: TestResponse) -> String? {
        String(buffer: page.body).firstMatch(of: /name="csrf" value="([0-9a-f]{64})"/).map { String($0.1) }
    }

    func cookie(_ response: TestResponse, _ name: String) -> String? {
        response.headers[values: .setCookie].first { $0.hasPrefix(name + "=") }
    }

    /// Signs in with `key`; returns the session cookie header value, or the failed response.
    func signIn(_ client: any TestClientProtocol, key: String, forwardedProto: String? = nil) async throws -> (String?, TestResponse) {
        let page = try await client.call(.get, "/portal/login")
        let token = try #require(csrf(in: page))
        let (headers, body) = form(["csrf": token, "key": key], cookie: "herald_login_csrf=\(token)", forwardedProto: forwardedProto)
        let response = try await client.call(.post, "/portal/login", headers, json: body)
        let session = cookie(response, "herald_session").flatMap { $0.split(separator: ";").first.map(String.init) }
        return (session, response)
    }

    /// Signs in as admin and opens the channels page. - Returns: the session cookie and the
    /// page's CSRF token, for posting its forms.
    func adminOnChannels(_ client: any TestClientProtocol, _ herald: TestHerald) async throws -> (cookie: String, csrf: String) {
        let (session, _) = try await signIn(client, key: herald.admin)
        let sessionCookie = try #require(session)
        return (sessionCookie, try #require(csrf(in: try await client.call(.get, "/portal/channels", [.cookie: sessionCookie]))))
    }

    @Test func signInGivesAStrictHttpOnlySessionAndWrongKeysAnErrorPage() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { (client: any TestClientProtocol) async throws in
            let anonymous = try await client.call(.get, "/portal/send")
            #expect(anonymous.status == .seeOther && anonymous.headers[.location] == "/portal/login")

            let (none, wrong) = try await signIn(client, key: "hk_unknown_key_000000000000000000000000")
            #expect(none == nil)
            #expect(wrong.status == .unauthorized)
            #expect(wrong.headers[.contentType]?.hasPrefix("text/html") == true)
            #expect(String(buffer: wrong.body).contains("unknown or revoked"))

            let (_, backend) = try await signIn(client, key: herald.backend)
            #expect(backend.status == .forbidden, "backend keys are for the API, not the portal")

            let (session, ok) = try await signIn(client, key: herald.admin, forwardedProto: "https")
            #expect(ok.status == .seeOther)
            let setCookie = try #require(cookie(ok, "herald_session"))
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict") && setCookie.contains("Max-Age=") && setCookie.contains("Secure"))
            let page = try await client.call(.get, "/portal/channels", [.cookie: try #require(session)])
            #expect(page.status == .ok)
            #expect(page.headers[HTTPField.Name("Content-Security-Policy")!]?.contains("frame-ancestors 'none'") == true)
            #expect(!String(buffer: page.body).contains(herald.admin), "the key never appears in a page")

            // public_base_url is https: Secure whatever a proxy says (or does not say).
            let (_, direct) = try await signIn(client, key: herald.admin)
            #expect(cookie(direct, "herald_session")?.contains("Secure") == true, "an https deployment's cookie went out without Secure")
        }
        // On a plain-http address (a developer's machine), Secure only when a proxy says TLS.
        let local = try await TestHerald.make { $0.publicBaseURL = "http://127.0.0.1:8080" }
        try await local.test { (client: any TestClientProtocol) async throws in
            let (_, plain) = try await signIn(client, key: local.admin)
            #expect(cookie(plain, "herald_session")?.contains("Secure") == false, "Secure only when the browser came over TLS")
            let (_, proxied) = try await signIn(client, key: local.admin, forwardedProto: "https")
            #expect(cookie(proxied, "herald_session")?.contains("Secure") == true)
        }
    }

    /// The sign-in form checks an API key: wrong keys count with the API's failed credential
    /// checks, so the form is no way around `auth.failed_attempts_per_minute`.
    @Test func wrongKeysAtTheSignInFormAreLimitedPerAddress() async throws {
        let herald = try await TestHerald.make { $0.failedAuthPerMinute = 2 }
        try await herald.test { (client: any TestClientProtocol) async throws in
            for _ in 0..<2 {
                #expect(try await signIn(client, key: "hk_" + String(repeating: "9", count: 48)).1.status == .unauthorized)
            }
            let (session, limited) = try await signIn(client, key: herald.admin)
            #expect(session == nil && limited.status == .tooManyRequests && limited.headers[.retryAfter] != nil, "\(limited.status)")
            #expect(String(buffer: limited.body).contains("Too many failed sign-ins"))
        }
    }

    @Test func formsWithoutTheSessionsTokenAreRefused() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { (client: any TestClientProtocol) async throws in
            let (session, _) = try await signIn(client, key: herald.admin)
            let sessionCookie = try #require(session)
            let (headers, body) = form(["csrf": String(repeating: "0", count: 64), "name": "Forged"], cookie: sessionCookie)
            let forged = try await client.call(.post, "/portal/channels/create-channel", headers, json: body)
            #expect(forged.status == .forbidden)
            #expect(try await SharedTopicStore(database: herald.server.store).channels().isEmpty)

            // Login CSRF: a token without the matching cookie is refused too.
            let (loginHeaders, loginBody) = form(["csrf": String(repeating: "1", count: 64), "key": herald.admin])
            #expect(try await client.call(.post, "/portal/login", loginHeaders, json: loginBody).status == .forbidden)
        }
    }

    @Test func namesAreEscapedAndCommunicatorsStayOutOfAdminPages() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { (client: any TestClientProtocol) async throws in
            let (sessionCookie, token) = try await adminOnChannels(client, herald)
            let (headers, body) = form(["csrf": token, "name": "<script>alert(1)</script>", "desc": "\"quoted\""], cookie: sessionCookie)
            #expect(try await client.call(.post, "/portal/channels/create-channel", headers, json: body).status == .seeOther)
            let html = String(buffer: try await client.call(.get, "/portal/channels", [.cookie: sessionCookie]).body)
            #expect(!html.contains("<script>alert(1)</script>"))
            #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))

            let (communicator, _) = try await signIn(client, key: herald.communicator)
            let forbidden = try await client.call(.get, "/portal/channels", [.cookie: try #require(communicator)])
            #expect(forbidden.status == .forbidden)
            #expect(String(buffer: forbidden.body).contains("Admins only"))
            #expect(try await client.call(.get, "/portal/send", [.cookie: try #require(communicator)]).status == .ok)

            // Sign-out ends the session on the server, not just in the browser.
            let (logoutHeaders, logoutBody) = form(["csrf": token], cookie: sessionCookie)
            #expect(try await client.call(.post, "/portal/logout", logoutHeaders, json: logoutBody).status == .seeOther)
            #expect(try await client.call(.get, "/portal/channels", [.cookie: sessionCookie]).status == .seeOther)
        }
    }

    /// A form field whose bytes are not UTF-8 (a Latin-1 `%E9`, or a raw byte) is refused: it
    /// was read as empty, and stored so. So is a field given twice (the last one was stored).
    @Test func formFieldsThatAreNotUTF8AreRefusedNotEmptied() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { (client: any TestClientProtocol) async throws in
            let (sessionCookie, token) = try await adminOnChannels(client, herald)
            let (headers, _) = form([:], cookie: sessionCookie)
            let escaped = try await client.call(.post, "/portal/channels/create-channel", headers, json: "csrf=\(token)&name=Latin&desc=Caf%E9")
            #expect(escaped.status == .unprocessableContent, "\(escaped.status)")
            #expect(String(buffer: escaped.body).contains("desc"))
            let raw = try await client.execute(
                uri: "/portal/channels/create-channel", method: .post, headers: headers,
                body: ByteBuffer(bytes: Array("csrf=\(token)&name=Raw&desc=Caf".utf8) + [0xE9]))
            #expect(raw.status == .badRequest, "\(raw.status)")
            // A field given twice was read as its last value.
            let twice = try await client.call(.post, "/portal/channels/create-channel", headers, json: "csrf=\(token)&name=Twice&desc=a&desc=b")
            #expect(twice.status == .unprocessableContent && String(buffer: twice.body).contains("desc"), "\(twice.status)")
            let html = String(buffer: try await client.call(.get, "/portal/channels", [.cookie: sessionCookie]).body)
            #expect(!html.contains("Latin") && !html.contains(">Raw<") && !html.contains("Twice"), "nothing was created")
        }
    }

    /// Sessions live in storage: a second server on the same database knows them, and revoking
    /// the key ends them.
    @Test func sessionsAreSharedThroughStorageAndEndWithTheirKey() async throws {
        let herald = try await TestHerald.make()
        var second = herald.server.configuration
        second.bootstrapAdminKey = nil
        let other = try await HeraldServer.start(second)
        TestResources.register { await other.close() }
        let session = try await herald.test { (client: any TestClientProtocol) async throws -> String? in
            try await signIn(client, key: herald.communicator).0
        }
        let cookie = try #require(session)
        try await other.application(deliveryWorkers: false).test(.router) { (client: any TestClientProtocol) async throws in
            #expect(try await client.call(.get, "/portal/send", [.cookie: cookie]).status == .ok, "the other process knows the session")
            let keys = try await other.store.keys()
            let communicator = try #require(keys.first { $0.role == .communicator })
            #expect(try await other.store.revokeKey(id: communicator.id, at: Date()))
            #expect(try await client.call(.get, "/portal/send", [.cookie: cookie]).status == .seeOther, "revoking the key ends the session")
        }
    }

    /// `/portal/why`: one recipient's explanation for admins; a bad or unknown notification id, or
    /// a user id that is not one, is the page's own 404, and the user id is escaped in the page.
    @Test func theWhyPageExplainsOneRecipientAndRefusesBadInput() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { (client: any TestClientProtocol) async throws in
            let sent = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "c", "user_ids": ["<b>ann</b>"]])
            let id = try #require(sent.object["id"] as? String)
            let (session, _) = try await signIn(client, key: herald.admin)
            let cookie = try #require(session)
            let page = try await client.call(.get, "/portal/why?id=\(id)&user=%3Cb%3Eann%3C%2Fb%3E", [.cookie: cookie])
            #expect(page.status == .ok)
            let html = String(buffer: page.body)
            #expect(html.contains("id=\"why-sinks\"") && html.contains("in_app") && html.contains("&lt;b&gt;ann&lt;/b&gt;"))
            #expect(!html.contains("<b>ann</b>"), "the user id is escaped")
            for query in ["id=nope&user=ann", "id=\(ObjectIDGenerator().next())&user=ann", "id=\(id)&user=a%20b", "id=\(id)"] {
                let refused = try await client.call(.get, "/portal/why?\(query)", [.cookie: cookie])
                #expect(refused.status == .notFound, "\(query)")
            }
            let (communicator, _) = try await signIn(client, key: herald.communicator)
            let forbidden = try await client.call(.get, "/portal/why?id=\(id)&user=ann", [.cookie: try #require(communicator)])
            #expect(forbidden.status == .notFound, "admins, and the communicator who sent a Message Hub message, only")
        }
    }

    /// A communicator sees the status and the recipients' explanations of the messages it sent,
    /// and nothing of another sender's or of the sinks: those are answered as unknown ids.
    @Test func aCommunicatorSeesWhyForTheMessagesItSent() async throws {
        let herald = try await TestHerald.make()
        let topics = try await TopicTree.make(in: herald.server.store, ids: ObjectIDGenerator())
        let otherSecret = APIKeySecret.generate()
        try await herald.server.store.createKey(
            APIKeyRecord(id: ObjectIDGenerator().next(), name: "someone-else", role: .communicator, createdAt: Date()),
            secretHash: APIKeySecret.hash(otherSecret))
        try await herald.test { (client: any TestClientProtocol) async throws in
            _ = try await client.call(.post, "/api/notifications/register", headers(herald.backend, user: "ann"), json: ["fcm_token": "t-ann"])
            let message = try await client.call(
                .post, "/message", headers(herald.communicator),
                json: ["title": "Snow day", "desc": "Closed", "message": "Stay home", "topic_key": topics.forced.topicKey, "distribution": "Alert"])
            let id = try #require(message.object["msi_key"] as? String, "\(message.object)")
            let sent = try await client.call(
                .post, "/api/notifications", headers(herald.backend), json: ["type": "comment", "title": "c", "user_ids": ["ann"]])
            let notification = try #require(sent.object["id"] as? String)

            let mine = try #require(try await signIn(client, key: herald.communicator).0)
            let status = try await client.call(.get, "/portal/status?id=\(id)", [.cookie: mine])
            let statusPage = String(buffer: status.body)
            #expect(status.status == .ok && statusPage.contains("Snow day") && statusPage.contains("class=\"why\""))
            #expect(!statusPage.contains("id=\"sinks\""), "the sinks' health is for admins")
            let why = try await client.call(.get, "/portal/why?id=\(id)&user=ann", [.cookie: mine])
            #expect(why.status == .ok && String(buffer: why.body).contains("id=\"decided-with\""))
            for query in ["status?id=\(notification)", "why?id=\(notification)&user=ann"] {
                let page = try await client.call(.get, "/portal/\(query)", [.cookie: mine])
                #expect(String(buffer: page.body).contains("No message you sent has that id"), "\(query): not theirs")
            }

            let theirs = try #require(try await signIn(client, key: otherSecret).0)
            let otherStatus = try await client.call(.get, "/portal/status?id=\(id)", [.cookie: theirs])
            #expect(!String(buffer: otherStatus.body).contains("Snow day"), "another communicator's message is not theirs")
            #expect(try await client.call(.get, "/portal/why?id=\(id)&user=ann", [.cookie: theirs]).status == .notFound)

            let admin = try #require(try await signIn(client, key: herald.admin).0)
            let adminStatus = String(buffer: try await client.call(.get, "/portal/status?id=\(id)", [.cookie: admin]).body)
            #expect(adminStatus.contains("Snow day") && adminStatus.contains("id=\"sinks\""))
        }
    }
}
