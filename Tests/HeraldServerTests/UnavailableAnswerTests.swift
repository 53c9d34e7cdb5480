import Foundation
import HTTPTypes
import HeraldCore
import HeraldServer
import HeraldTestSupport
import Hummingbird
import HummingbirdTesting
import Testing

/// A 503 says when to try again.
@Suite(.cleansUp) struct UnavailableAnswerTests {
    @Test func unavailableCarriesRetryAfterAndTheErrorShape() async throws {
        let router = Router()
        router.add(middleware: ErrorMiddleware<BasicRequestContext>())
        router.get("/busy") { _, _ -> Response in throw HeraldError(.unavailable, code: "overloaded", "too many requests are waiting") }
        try await Application(router: router).test(.router) { client in
            let response = try await client.execute(uri: "/busy", method: .get)
            #expect(response.status == .serviceUnavailable)
            #expect(response.headers[.retryAfter] == "1")
            let body = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: [String: String]]
            #expect(body?["error"]?["code"] == "overloaded")
        }
    }
}
