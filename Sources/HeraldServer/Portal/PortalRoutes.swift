import Foundation
import HTTPTypes
import HeraldCore
import HeraldHTTP
import HeraldTopics
import Hummingbird

/// The Message Hub web portal under `/portal/`: communicators send messages; admins also manage
/// the hierarchy and read the archive and delivery status. Server-rendered HTML, a session
/// cookie exchanged for an API key, and a CSRF token in every form.
struct PortalRoutes {
    let pages: PortalPages
    let sessions: PortalSessions
    let store: any (TopicLookup & NotificationStore & APIKeyStore & DeliveryQueue)
    /// The hierarchy the channels page lists and changes (the topics module's).
    let topics: any TopicStore
    let service: NotificationService
    let circuits: CircuitBreakers
    /// Each sink's last hour, drawn on the status page.
    let timeline: DeliveryTimeline
    let ids: ObjectIDGenerator
    /// Whether Herald's public address is `https`: then every portal cookie is `Secure`,
    /// whatever a proxy says, so a browser never sends it over plain HTTP.
    let secureCookies: Bool
    /// A wrong key at the sign-in form counts as a failed credential check (``AuthMiddleware``).
    let failures: FailedAuthLimiter
    let proxies: TrustedProxies

    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto") ?? .via

    /// Recorded as undocumented: openapi.yaml describes the JSON API, not the portal's pages (the
    /// table still answers another method on these paths with 405 and `Allow`).
    func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .get, "/portal/", documented: false) { request, _ in try await home(request) }
        table.add(router, .get, "/portal/login", documented: false) { request, _ in loginPage(request, error: nil) }
        table.add(router, .post, "/portal/login", documented: false) { request, context in try await login(request, context: context) }
        table.add(router, .post, "/portal/logout", documented: false) { request, _ in try await logout(request) }
        table.add(router, .get, "/portal/send", documented: false) { request, _ in
            try await withSession(request) { try await sendPage($0, values: [:], errors: [:]) }
        }
        table.add(router, .post, "/portal/send", documented: false) { request, _ in
            try await withSession(request, form: PortalForm(request)) { try await send($0, $1) }
        }
        table.add(router, .get, "/portal/channels", documented: false) { request, _ in
            try await withSession(request, admin: true) { try await channelsPage($0, error: nil) }
        }
        table.add(router, .post, "/portal/channels/{action}", documented: false) { request, context in
            let action = context.parameters.get("action") ?? ""
            return try await withSession(request, form: PortalForm(request), admin: true) { try await changeHierarchy(action, $0, $1) }
        }
        table.add(router, .get, "/portal/messages", documented: false) { request, _ in
            try await withSession(request, admin: true) { try await messagesPage(request, $0) }
        }
        // Admins see every notification and the sinks; a communicator the messages it sent.
        table.add(router, .get, "/portal/status", documented: false) { request, _ in
            try await withSession(request) { try await statusPage(request, $0) }
        }
        table.add(router, .get, "/portal/why", documented: false) { request, _ in
            try await withSession(request) { try await whyPage(request, $0) }
        }
        table.add(router, .get, "/portal/static/portal.css", documented: false) { _, _ in pages.asset(pages.stylesheet, contentType: "text/css; charset=utf-8")
        }
        table.add(router, .get, "/portal/static/portal.js", documented: false) { _, _ in
            pages.asset(pages.script, contentType: "text/javascript; charset=utf-8")
        }
    }

    // MARK: Sessions

    func session(_ request: Request) async throws -> PortalSession? {
        guard let cookie = request.cookies[PortalSessions.cookie] else { return nil }
        return try await sessions.session(id: cookie.value)
    }

    /// Runs `body` for a signed-in user: others go to the login page, communicators asking for an
    /// admin page get 403, and a form without the session's CSRF token is refused.
    func withSession(
        _ request: Request, form: PortalForm? = nil, admin: Bool = false, _ body: (PortalSession, PortalForm) async throws -> Response
    ) async throws -> Response {
        guard let session = try await session(request) else { return PortalPages.redirect(to: "/portal/login") }
        if admin && !session.isAdmin {
            return pages.page(
                "error", ["title": "Admins only", "message": "This page needs an admin key. You are signed in as a communicator."], session: session,
                status: .forbidden)
        }
        if let form, !PortalSessions.sameToken(form["csrf"] ?? "", session.csrf) {
            return pages.page(
                "error", ["title": "Form expired", "message": "The form was not sent from this session. Go back, reload the page and try again."],
                session: session, status: .forbidden)
        }
        do {
            return try await body(session, form ?? (try PortalForm(text: "")))
        } catch let error as HeraldError {
            return pages.page(
                "error", ["title": "Something went wrong", "message": error.message], session: session,
                status: ErrorAnswer.status(error.kind))
        }
    }

    func withSession(_ request: Request, admin: Bool = false, _ body: (PortalSession) async throws -> Response) async throws -> Response {
        try await withSession(request, form: nil, admin: admin) { session, _ in try await body(session) }
    }

    /// `Secure` when `public_base_url` is `https`, or the browser reached Herald over TLS (a
    /// proxy in front says so).
    func cookie(_ name: String, _ value: String, path: String = "/portal", maxAge: Int, request: Request) -> String {
        let forwardedTLS = request.headers[Self.forwardedProto]?.lowercased() == "https"
        let secure = secureCookies || forwardedTLS ? "; Secure" : ""
        return "\(name)=\(value); Path=\(path); Max-Age=\(maxAge); HttpOnly; SameSite=Strict\(secure)"
    }

    func home(_ request: Request) async throws -> Response {
        PortalPages.redirect(to: try await session(request) == nil ? "/portal/login" : "/portal/send")
    }

    func loginPage(_ request: Request, error: String?, status: HTTPResponse.Status = .ok) -> Response {
        // Login CSRF: the form echoes a token that only this browser holds as a cookie.
        let token = PortalSessions.randomToken()
        var values: [String: Any] = ["csrf": token]
        if let error { values["error"] = error }
        var response = pages.page("login", values, session: nil, status: status)
        response.headers.append(
            HTTPField(name: .setCookie, value: cookie(PortalSessions.loginCookie, token, path: "/portal/login", maxAge: 900, request: request)))
        return response
    }

    func login(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        let form = try await PortalForm(request)
        guard let expected = request.cookies[PortalSessions.loginCookie]?.value, PortalSessions.sameToken(form["csrf"] ?? "", expected) else {
            return loginPage(request, error: "The sign-in form expired. Please try again.", status: .forbidden)
        }
        let client = FailedAuthLimiter.client(of: request, context: context, proxies: proxies)
        if let wait = failures.wait(client) {
            var page = loginPage(request, error: "Too many failed sign-ins from this address. Try again in \(wait) s.", status: .tooManyRequests)
            page.headers[.retryAfter] = String(wait)
            return page
        }
        let secret = form.text("key") ?? ""
        guard secret.hasPrefix(APIKeySecret.prefix), let key = try await store.key(secretHash: APIKeySecret.hash(secret)) else {
            failures.failedGuess(client: client)
            return loginPage(request, error: "That key is unknown or revoked.", status: .unauthorized)
        }
        guard key.role == .communicator || key.role == .admin else {
            return loginPage(request, error: "The portal is for communicator and admin keys; this is a \(key.role.rawValue) key.", status: .forbidden)
        }
        let session = try await sessions.create(for: key)
        return PortalPages.redirect(
            to: "/portal/",
            setting: [
                cookie(PortalSessions.cookie, session.id, maxAge: Int(PortalSessions.lifetime), request: request),
                cookie(PortalSessions.loginCookie, "", path: "/portal/login", maxAge: 0, request: request),
            ]
        )
    }

    func logout(_ request: Request) async throws -> Response {
        let form = try await PortalForm(request)
        if let session = try await session(request), PortalSessions.sameToken(form["csrf"] ?? "", session.csrf) {
            try await sessions.end(id: session.id)
        }
        return PortalPages.redirect(to: "/portal/login", setting: [cookie(PortalSessions.cookie, "", maxAge: 0, request: request)])
    }

    // MARK: Sending

    func sendPage(_ session: PortalSession, values: [String: String], errors: [String: String], status: HTTPResponse.Status = .ok) async throws -> Response {
        let channels = try await topics.channels()
        let selected = values["topic_key"]
        let subjects: [[String: Any]] = Self.subjects(of: channels).map { entry in
            [
                "topicKey": entry.subject.topicKey, "label": entry.label, "name": entry.subject.name, "area": entry.area.id.hex,
                "distribution": entry.subject.opt.distribution.rawValue, "selected": entry.subject.topicKey == selected,
            ]
        }
        let areas: [[String: Any]] = channels.flatMap { channel in
            channel.areas.map { ["id": $0.id.hex, "name": $0.name, "channel": channel.id.hex] }
        }
        return pages.page(
            "send",
            [
                "channels": channels.map { ["id": $0.id.hex, "name": $0.name] }, "areas": areas, "subjects": subjects, "hasSubjects": !subjects.isEmpty,
                "values": values, "errors": errors, "hasErrors": !errors.isEmpty,
            ],
            session: session, status: status
        )
    }

    func send(_ session: PortalSession, _ form: PortalForm) async throws -> Response {
        let values = ["topic_key": form["topic_key"] ?? "", "title": form["title"] ?? "", "desc": form["desc"] ?? "", "message": form["message"] ?? ""]
        guard let topicKey = form.text("topic_key"), let entry = try await store.subject(topicKey: topicKey) else {
            return try await sendPage(session, values: values, errors: ["topic_key": "Choose a subject."], status: .unprocessableContent)
        }
        let distribution = entry.subject.opt.distribution
        let submission = MessageSubmission(
            title: form.text("title") ?? "", desc: distribution == .alert ? form.text("desc") : nil, message: form.text("message") ?? "",
            topicKey: topicKey, distribution: distribution.rawValue
        )
        do {
            let archived = try await service.postMessage(submission, sender: session.role.sender(keyName: session.keyName))
            return pages.page(
                "sent",
                [
                    "msiKey": archived.msiKey, "title": archived.title, "subject": "\(entry.channel) / \(entry.area) / \(entry.subject.name)",
                    "distribution": archived.distribution.rawValue,
                ],
                session: session, status: .created
            )
        } catch let error as HeraldError where error.kind == .unprocessable {
            return try await sendPage(session, values: values, errors: [Self.field(of: error) ?? "form": error.message], status: .unprocessableContent)
        }
    }

    /// Every subject with its area and its "Channel / Area / Subject" label, in hierarchy order.
    static func subjects(of channels: [Channel]) -> [(area: Area, subject: Subject, label: String)] {
        channels.flatMap { channel in
            channel.areas.flatMap { area in area.subjects.map { (area, $0, "\(channel.name) / \(area.name) / \($0.name)") } }
        }
    }

    /// The field a validation error names (`'title' must not be empty` → `title`).
    static func field(of error: HeraldError) -> String? {
        let parts = error.message.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let name = String(parts[1])
        return name == "opt.distribution" || name == "distribution" ? "topic_key" : name
    }
}
