import ArgumentParser
import Foundation
import HeraldKit
import NIOCore
import OpenAPIAsyncHTTPClient

/// A device on the command line: signs in, registers, shows the feed message it may show,
/// swipes cards (offline too), uploads what it queued, and prints pushes from the live stream.
@main
struct HeraldPhone: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald-phone", abstract: "Acts as a phone against a running Herald, through HeraldKit.")

    @Option(help: "Herald's URL.") var server = "http://127.0.0.1:8080"
    @Option(help: "The folder for the device's database and secret (kept across runs).") var state = ".herald-phone"
    @Option(help: "An FCM token to register.") var fcmToken: String?
    @Option(help: "The device's region, for the feed (never sent).") var region: String?
    @Option(help: "The app's version, for the feed (never sent).") var appVersion: String?
    @Option(help: "How many cards to swipe.") var swipes = 3
    @Option(help: "How long to print pushes from the live stream, in seconds (0: not at all).") var listen = 10

    func run() async throws {
        guard let url = URL(string: server), url.scheme != nil else { throw ValidationError("--server must be a URL such as http://127.0.0.1:8080") }
        guard swipes >= 0, listen >= 0 else { throw ValidationError("--swipes and --listen must be 0 or more") }
        let folder = URL(fileURLWithPath: state)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let herald = Herald(
            serverURL: url, transport: AsyncHTTPClientTransport(configuration: .init(timeout: .seconds(10))),
            database: try LocalDatabase(url: folder.appendingPathComponent("herald.sqlite")),
            secrets: FileSecretStore(url: folder.appendingPathComponent("device-secret")),
            app: AppIdentity(platform: "linux", version: appVersion, region: region))

        do {
            try await connect(herald)
        } catch {
            guard error.isTransient else { throw error }
            say("offline (\(error)); working from the last state")
        }

        if let message = try herald.nextFeedMessage() {
            say("feed: \(message.title) — \(message.body)")
            try herald.markFeedMessageRead(message.id)
        } else {
            say("feed: nothing to show")
        }

        for _ in 0..<swipes {
            guard let seen = try herald.promote() else {
                say("cards: the pool is empty")
                break
            }
            try herald.react(.tfu, card: seen.card.id)
            say("swiped card \(seen.card.id)")
        }
        let report = try await herald.upload()
        say("uploaded \(report.uploaded), waiting \(report.waiting), refused \(report.refused)")
        say("badge: \(try herald.badge())")

        guard listen > 0 else { return }
        say("listening for \(listen) s")
        let stream = Task { await Self.printLiveUpdates(of: herald) }
        try await Task.sleep(for: .seconds(listen))
        stream.cancel()
    }

    /// Signs in (up, the first time), registers, and fetches the feed and the cards.
    private func connect(_ herald: Herald) async throws(HeraldKitError) {
        let signedIn = try await herald.signUp()
        say("signed in as \(signedIn.userID) until \(signedIn.expiresAt)")
        if let fcmToken {
            try await herald.register(.fcm(token: fcmToken))
            say("registered FCM token \(fcmToken)")
        }
        try await herald.refreshFeed()
        try await herald.refreshCards()
    }

    private static func printLiveUpdates(of herald: Herald) async {
        for await event in herald.liveUpdates() {
            switch event {
            case .connected: say("stream: connected")
            case .notification(let item): say("push: \(item.notification.title) \(item.notification.body)")
            case .inbox(let counts): say("inbox: \(counts.unread) unread")
            case .feedChanged: say("feed changed; next: \((try? herald.nextFeedMessage())?.title ?? "nothing")")
            case .contentChanged: say("content changed")
            case .disconnected(let error, let wait): say("stream: \(error); again in \(wait)")
            }
        }
    }
}

/// Writes a line at once (not through stdout's buffer), so whoever reads a pipe (a test, `tee`)
/// sees pushes as they come.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
