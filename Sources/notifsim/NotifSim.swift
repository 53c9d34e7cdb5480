import ArgumentParser
import AsyncHTTPClient
import Foundation
import HeraldCore
import NIOCore
import NIOFoundationCompat

/// Fires notifications at a running Herald, one or many.
@main
struct NotifSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifsim",
        abstract: "Send notifications to a running Herald.",
        discussion: """
            Example: notifsim -u 62cc403b99efc110a9a73a55 -t generic -r /
            With HERALD_NOTIFSIM_USER set: notifsim -t leader -b "You're on the leaderboard!"
            The resource from the type: notifsim -t comment --id DKJW (→ /posts/DKJW)
            Check without sending: notifsim -u alice -t upvote --id DKJW --dry-run
            Load: notifsim -u alice -t hot -n Title --count 10000 --concurrency 32
            """
    )

    /// The arguments' bytes are checked before ArgumentParser reads them as text (see
    /// ``CommandLineText``): a byte that is not UTF-8 would become U+FFFD, another value.
    static func main() async {
        if let problem = CommandLineText.problem() { Self.exit(withError: ValidationError(problem)) }
        await Self.main(nil)
        if let problem = StandardStream.flushPrinted() {
            StandardStream.error.line("notifsim: error: \(problem)")
            Self.exit(withError: ExitCode(74))
        }
    }

    @Option(name: .short, help: "User id to send to (repeat for several; default $HERALD_NOTIFSIM_USER).")
    var user: [String] = []

    @Option(
        help:
            "The post or thread id: with -r omitted, the resource follows from the type (message, reply → /messages/ID; upvote, comment, hot, top → /posts/ID; leader → /stats)."
    )
    var id: String?

    @Flag(name: .customLong("dry-run"), help: "Validate and route, and have each push provider validate (FCM validate_only); store and send nothing.")
    var dryRun = false

    @Option(name: .short, help: "Notification type (upvote, comment, hot, top, leader, message, reply, violation, generic, alert, or a configured one).")
    var type: String = "generic"

    @Option(name: .short, help: "Resource path such as /posts/ID, an absolute URL, or 'null'.")
    var resource: String?

    @Option(name: [.customShort("n"), .long], help: "Title.")
    var title: String = "Hello from notifsim"

    @Option(name: .short, help: "Body.")
    var body: String = ""

    @Option(help: "alert or information.")
    var distribution: String?

    @Option(help: "A data entry key=value (repeatable).")
    var data: [String] = []

    @Option(help: "Send to a topic_key instead of users.")
    var topic: String?

    @Option(help: "Idempotency key: the same key within 24 h sends nothing again.")
    var idempotencyKey: String?

    @Option(help: "Herald's base URL.")
    var url: String = ProcessInfo.processInfo.environment["HERALD_URL"] ?? "http://127.0.0.1:8080"

    @Option(help: "API key with role backend or admin (default $HERALD_API_KEY).")
    var key: String?

    @Option(parsing: .unconditional, help: "Send this many notifications (load mode).")
    var count: Int = 1

    @Option(parsing: .unconditional, help: "Requests in flight at once in load mode.")
    var concurrency: Int = 8

    @Option(parsing: .unconditional, help: "At most this many requests per second in load mode (default: as fast as possible).")
    var rate: Double?

    /// `-u`, or the developer's own test account from the environment.
    var recipients: [String] {
        if !user.isEmpty { return user }
        return ProcessInfo.processInfo.environment["HERALD_NOTIFSIM_USER"].flatMap { $0.isEmpty ? nil : [$0] } ?? []
    }

    /// `-r`, or the resource the app opens for this type and `--id` (the app team's convention).
    var resolvedResource: String? {
        if let resource { return resource }
        switch type {
        case "leader": return "/stats"
        case "message", "reply": return id.map { "/messages/\($0)" }
        case "upvote", "comment", "hot", "top": return id.map { "/posts/\($0)" }
        default: return nil
        }
    }

    func validate() throws {
        guard !recipients.isEmpty || topic != nil else {
            throw ValidationError("name a recipient with -u USER (repeatable), --topic KEY, or set HERALD_NOTIFSIM_USER")
        }
        if dryRun { guard count == 1, topic == nil else { throw ValidationError("--dry-run sends one notification to users (-u), not --count or --topic") } }
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
        guard (1...1024).contains(concurrency) else { throw ValidationError("--concurrency must be 1-1024") }
        // Below one a day the first wait would outlast any run; the interval is computed from it.
        if let rate {
            guard rate.isFinite, rate >= 1.0 / 86_400 else { throw ValidationError("--rate must be a number of requests a second, at least 1/86400") }
        }
        for entry in data where !entry.contains("=") { throw ValidationError("--data takes key=value, got '\(entry)'") }
        if let problem = HTTPURL.problem(url) { throw ValidationError("--url \(problem), such as http://127.0.0.1:8080") }
    }

    func run() async throws {
        guard let apiKey = key ?? ProcessInfo.processInfo.environment["HERALD_API_KEY"], !apiKey.isEmpty else {
            throw ValidationError("give an API key with --key or HERALD_API_KEY (create one with: herald keys create --role backend)")
        }
        let client = HeraldClient(baseURL: url, apiKey: apiKey)
        defer { client.shutdown() }
        if dryRun {
            try await dryRunOne(client)
        } else if count == 1 {
            try await sendOne(client)
        } else {
            do {
                try await LoadRun(count: count, concurrency: concurrency, rate: rate, retries: { client.retries }).run { index in
                    try await client.send(payload(index: index))
                }
            } catch is LoadRun.Failed {
                throw ExitCode.failure
            }
        }
    }

    private func sendOne(_ client: HeraldClient) async throws {
        let receipt: HeraldClient.Receipt
        do {
            receipt = try await client.send(payload(index: nil))
        } catch let error as HeraldClient.Failure {
            StandardStream.error.write("notifsim: error: \(error.description)\n")
            throw ExitCode.failure
        }
        print(receipt.id)
        // Where did it go? Ask Herald for the deliveries once the workers had a moment.
        var summary: [String: [String: Int]] = [:]
        for _ in 0..<20 {
            try await Task.sleep(for: .milliseconds(100))
            guard let status = try? await client.status(of: receipt.id) else { break }
            summary = status
            if !status.values.contains(where: { $0["pending"] != nil }) { break }
        }
        print("recipients: \(receipt.recipients)")
        for (sink, states) in summary.sorted(by: { $0.key < $1.key }) {
            let text = states.sorted(by: { $0.key < $1.key }).map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            print("  \(sink): \(text)")
        }
    }

    private func dryRunOne(_ client: HeraldClient) async throws {
        let answer: [String: Any]
        do {
            answer = try await client.dryRun(payload(index: nil))
        } catch let error as HeraldClient.Failure {
            StandardStream.error.write("notifsim: error: \(error.description)\n")
            throw ExitCode.failure
        }
        print("dry run: nothing was stored or sent")
        print("recipients: \(answer["recipients"] as? Int ?? 0)")
        for delivery in answer["deliveries"] as? [[String: Any]] ?? [] {
            let recipient = delivery["recipient"] as? [String: Any] ?? [:]
            let device = (recipient["device_id"] as? String).map { " device \($0)" } ?? ""
            let distribution = (delivery["payload"] as? [String: Any])?["distribution"] as? String ?? ""
            print("  \(delivery["sink"] as? String ?? "?"): \(recipient["user_id"] as? String ?? "")\(device) (\(distribution))")
        }
        var invalid = false
        for answer in answer["provider"] as? [[String: Any]] ?? [] {
            let sink = answer["sink"] as? String ?? "?"
            switch answer["valid"] as? Bool {
            case true?: print("  \(sink) provider: valid")
            case false?:
                invalid = true
                print("  \(sink) provider: invalid: \(answer["error"] as? String ?? "")")
            case nil: print("  \(sink) provider: not asked (\(answer["error"] as? String ?? "unsupported"))")
            }
        }
        if invalid { throw ExitCode.failure }
    }

    func payload(index: Int?) -> [String: Any] {
        var body: [String: Any] = ["type": type, "title": title, "body": self.body]
        if let resource = resolvedResource { body["url"] = resource == "null" ? NSNull() : resource }
        if let distribution { body["distribution"] = distribution }
        if !data.isEmpty {
            body["data"] = Dictionary(
                data.map { entry in
                    let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
                }
            ) { _, last in last }
        }
        if let topic { body["topic"] = topic } else { body["user_ids"] = recipients }
        if let idempotencyKey { body["idempotency_key"] = index.map { "\(idempotencyKey)-\($0)" } ?? idempotencyKey }
        return body
    }
}
