import ArgumentParser
import Foundation
import HeraldCore
import Hummingbird
import Logging

/// The HTTP stack's ceiling: the same Hummingbird server Herald runs, with one route that
/// decodes a notification-shaped JSON body and answers 202, and one that answers a GET. Herald's
/// accepted/s and feed requests/s are reported as ratios of these.
struct EchoServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "echo-server", abstract: "Serve the minimal JSON routes the harness uses as its ceiling.")

    @Option var port = 0

    struct Submission: Decodable {
        var type: String
        var title: String
        var body: String?
        var user_ids: [String]
    }

    struct Receipt: Encodable {
        var id: String
        var recipients: Int
    }

    func run() async throws {
        let router = Router()
        router.post("/echo") { request, context -> Response in
            let submission = try await request.decode(as: Submission.self, context: context)
            let data = try JSONEncoder().encode(Receipt(id: UUID().uuidString, recipients: submission.user_ids.count))
            return Response(status: .accepted, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
        router.get("/ping") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: "{\"status\":\"ok\"}")))
        }
        // The same log handler as Herald's server, so the ceiling is the stack Herald runs on.
        var logger = Logger(label: "echo", factory: DeferredMetadataLogHandler.standardError)
        logger.logLevel = .warning
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in
                StandardStream.output.write("echo listening on http://127.0.0.1:\(channel.localAddress?.port ?? 0)\n")
            },
            logger: logger
        )
        try await app.runService()
    }
}
