import HTTPTypes
import HeraldHTTP
import Testing

@testable import HeraldServer

/// Middlewares that decide by the path before routing read it as the router does: a second
/// slash (`//api/users/x`) is served, so it must not slip past them.
@Suite struct RequestPathTests {
    @Test func pathsAreReadAsTheRouterReadsThem() {
        #expect(RequestPath.path("/portal/login", isUnder: ["portal"]))
        #expect(RequestPath.path("//portal//login", isUnder: ["portal"]))
        #expect(RequestPath.path("/portal", isUnder: ["portal"]))
        #expect(!RequestPath.path("/portalx/login", isUnder: ["portal"]), "a segment, not a string prefix")
        #expect(!RequestPath.path("/%70ortal/login", isUnder: ["portal"]), "the router does not decode it either (404)")
        #expect(!RequestPath.path("/api", isUnder: ["api", "users"]))
    }

    @Test func membershipWakesHowEverThePathIsSpelt() {
        #expect(MembershipWakeMiddleware.wakes(after: .delete, "/api/users/erin", status: 200))
        #expect(MembershipWakeMiddleware.wakes(after: .delete, "//api/users/erin", status: 200))
        #expect(MembershipWakeMiddleware.wakes(after: .post, "/api//notifications/register", status: 200))
        #expect(MembershipWakeMiddleware.wakes(after: .put, "/api/notifications/subscriptions/t1", status: 204))
        #expect(!MembershipWakeMiddleware.wakes(after: .get, "/api/users/erin", status: 200), "a read changes nothing")
        #expect(!MembershipWakeMiddleware.wakes(after: .delete, "/api/users/erin", status: 403), "nor does a refusal")
        #expect(!MembershipWakeMiddleware.wakes(after: .post, "/api/notifications", status: 202))
    }
}
