import Foundation
import HTTPTypes
import HeraldCore
import Hummingbird
import Mustache

/// The portal's templates (`Resources/portal/*.mustache`, rendered with swift-mustache, which
/// escapes every `{{value}}`) and its static files, loaded once at start.
struct PortalPages: Sendable {
    let library: MustacheLibrary
    let stylesheet: String
    let script: String

    static func load() async throws -> PortalPages {
        guard let folder = Bundle.module.url(forResource: "portal", withExtension: nil) else {
            throw HeraldError(.internal, code: "missing_resource", "the portal templates are missing from the build")
        }
        return PortalPages(
            library: try await MustacheLibrary(directory: folder.path),
            stylesheet: try String(contentsOf: folder.appendingPathComponent("portal.css"), encoding: .utf8),
            script: try String(contentsOf: folder.appendingPathComponent("portal.js"), encoding: .utf8)
        )
    }

    /// An HTML response: `template` rendered with `values`, plus the signed-in user's
    /// navigation when there is a session.
    func page(_ template: String, _ values: [String: Any], session: PortalSession?, status: HTTPResponse.Status = .ok) -> Response {
        var values = values
        if let session {
            values["session"] = ["name": session.keyName, "role": session.role.rawValue, "admin": session.isAdmin, "csrf": session.csrf]
        }
        let html = library.render(values, withTemplate: template) ?? "<!doctype html><title>Herald</title><p>The page could not be rendered.</p>"
        return Response(status: status, headers: Self.headers(contentType: "text/html; charset=utf-8"), body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    func asset(_ text: String, contentType: String) -> Response {
        var headers = Self.headers(contentType: contentType)
        headers[.cacheControl] = "max-age=300"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// Nothing from elsewhere may run, frame the portal, or learn where a user came from.
    static func headers(contentType: String) -> HTTPFields {
        var headers = HTTPFields()
        headers[.contentType] = contentType
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name("Content-Security-Policy")!] = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return headers
    }

    static func redirect(to location: String, setting cookies: [String] = []) -> Response {
        var headers = Self.headers(contentType: "text/html; charset=utf-8")
        headers[.location] = location
        for cookie in cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        return Response(status: .seeOther, headers: headers)
    }
}
