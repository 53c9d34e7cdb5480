import Foundation
import HeraldCore
import Testing

@Suite struct NotificationValidatorTests {
    let validator = NotificationValidator(
        types: try! NotificationTypes(extra: ["digest"]),
        resources: try! ResourceResolver(publicBaseURL: "https://pong.example/")
    )
    let now = Date(timeIntervalSince1970: 1_700_000_000)
    let id = ObjectIDGenerator().next()

    func submission(_ change: (inout NotificationSubmission) -> Void = { _ in }) -> NotificationSubmission {
        var s = NotificationSubmission(type: "upvote", title: "Title", body: "Body", url: "/posts/DKJW", userIDs: ["u1"])
        change(&s)
        return s
    }

    @Test func buildsTheNotificationWithDefaults() throws {
        let n = try validator.validate(submission(), id: id, now: now)
        #expect(n.url == "https://pong.example/posts/DKJW")
        #expect(n.distribution == .alert)
        #expect(n.priority == 0)
        #expect(n.target == .users(["u1"]))
        #expect(n.timestamp == now)
    }

    @Test func resourceURLs() throws {
        #expect(try validator.validate(submission { $0.url = "/" }, id: id, now: now).url == "https://pong.example/")
        #expect(try validator.validate(submission { $0.url = nil }, id: id, now: now).url == nil)
        #expect(try validator.validate(submission { $0.url = "https://other.example/x" }, id: id, now: now).url == "https://other.example/x")
        // An '@' past the authority is a path or query character, not a user name.
        let atInPath = "https://other.example:8443/u/@me?to=a@b.example#@top"
        #expect(try validator.validate(submission { $0.url = atInPath }, id: id, now: now).url == atInPath)
        #expect(try validator.validate(submission { $0.url = "HTTP://[::1]:8080" }, id: id, now: now).url == "HTTP://[::1]:8080")
        // public_base_url: `--port 0` leaves port 0 in the default one; a password is refused.
        #expect(try ResourceResolver(publicBaseURL: "http://127.0.0.1:0").resolve("/x") == "http://127.0.0.1:0/x")
        #expect(throws: HeraldError.self) { try ResourceResolver(publicBaseURL: "https://u:p@app.example") }
    }

    @Test func operatorTypesAreAccepted() throws {
        #expect(try validator.validate(submission { $0.type = "digest" }, id: id, now: now).type == "digest")
    }

    @Test func duplicateRecipientsCountOnce() throws {
        let n = try validator.validate(submission { $0.userIDs = ["a", "b", "a"] }, id: id, now: now)
        #expect(n.target == .users(["a", "b"]))
    }

    @Test func unknownTypeIsA400ListingValidTypes() {
        #expect {
            try validator.validate(submission { $0.type = "nope" }, id: id, now: now)
        } throws: { error in
            let e = error as? HeraldError
            return e?.kind == .badRequest && e?.code == "unknown_type" && e!.message.contains("upvote") && e!.message.contains("digest")
        }
    }

    static let invalid: [(String, @Sendable (inout NotificationSubmission) -> Void, String)] = [
        ("missing type", { $0.type = nil }, "'type'"),
        ("missing title", { $0.title = nil }, "'title'"),
        (
            "empty alert",
            {
                $0.title = ""
                $0.body = ""
            }, "'title'"
        ),
        ("bad distribution", { $0.distribution = "loud" }, "'distribution'"),
        ("relative url", { $0.url = "posts/1" }, "'url'"),
        ("ftp url", { $0.url = "ftp://x.example/a" }, "'url'"),
        ("protocol-relative url", { $0.url = "//evil.example/a" }, "'url'"),
        ("url with space", { $0.url = "/a b" }, "'url'"),
        ("url with a user name", { $0.url = "https://bank.example@evil.example/login" }, "user name or password"),
        ("url with a password", { $0.url = "https://u:secret@app.example/x" }, "user name or password"),
        ("url with an empty user name", { $0.url = "http://@app.example/" }, "user name or password"),
        ("url without a host", { $0.url = "https:///x" }, "must name a host"),
        ("url with port past 65535", { $0.url = "https://app.example:99999/x" }, "port"),
        ("past expiry", { $0.expiresAt = "2001-01-01T00:00:00Z" }, "'expires_at'"),
        ("bad expiry", { $0.expiresAt = "tomorrow" }, "'expires_at'"),
        ("huge priority", { $0.priority = 10_000_000 }, "'priority'"),
        ("empty collapse key", { $0.collapseKey = "" }, "'collapse_key'"),
        ("collapse key with a line break", { $0.collapseKey = "score\r\nx-injected: 1" }, "'collapse_key'"),
        ("collapse key with a NUL", { $0.collapseKey = "a\u{0}b" }, "'collapse_key'"),
        ("idempotency key with a tab", { $0.idempotencyKey = "a\tb" }, "'idempotency_key'"),
        ("long idempotency key", { $0.idempotencyKey = String(repeating: "k", count: 256) }, "'idempotency_key'"),
        ("no target", { $0.userIDs = nil }, "exactly one target"),
        ("two targets", { $0.topic = "a-b-c" }, "exactly one target"),
        ("empty user_ids", { $0.userIDs = [] }, "'user_ids'"),
        ("blank user id", { $0.userIDs = ["ok", ""] }, "'user_ids[1]'"),
        ("user id with space", { $0.userIDs = ["a b"] }, "'user_ids[0]'"),
        ("too many users", { $0.userIDs = (0...1000).map { "u\($0)" } }, "'user_ids'"),
        ("empty data key", { $0.data = ["": "x"] }, "'data'"),
        (
            "malformed topic",
            {
                $0.userIDs = nil
                $0.topic = "a-b-c"
            }, "'topic'"
        ),
        (
            "audience naming nobody",
            {
                $0.userIDs = nil
                $0.audience = Audience()
            }, "names nobody"
        ),
        (
            "audience with a bad user id",
            {
                $0.userIDs = nil
                $0.audience = Audience(userIDs: ["a b"])
            }, "audience.user_ids[0]"
        ),
        ("title too long", { $0.title = String(repeating: "t", count: 1025) }, "'title'"),
    ]

    @Test(arguments: 0..<invalid.count)
    func invalidSubmissionsAre422NamingTheField(_ index: Int) {
        let (name, change, fragment) = Self.invalid[index]
        do {
            _ = try validator.validate(submission(change), id: id, now: now)
            Issue.record("\(name): accepted")
        } catch let error as HeraldError {
            #expect(error.kind == .unprocessable, "\(name)")
            #expect(error.message.contains(fragment), "\(name): \(error.message)")
        } catch {
            Issue.record("\(name): \(error)")
        }
    }
}
