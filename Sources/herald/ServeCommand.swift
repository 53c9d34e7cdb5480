import ArgumentParser
import Foundation
import HeraldCore
import HeraldProcessTuning
import HeraldServer
import HeraldStore
import Synchronization

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the HTTP server and the delivery workers (the default).")

    @OptionGroup var common: CommonOptions

    @Option(help: "Address to listen on (default 127.0.0.1).")
    var host: String?

    @Option(parsing: .unconditional, help: "Port to listen on (default 8080; 0 picks a free port).")
    var port: Int?

    @Option(name: .customLong("public-base-url"), help: "Prefix for resource paths in delivered URLs.")
    var publicBaseURL: String?

    @Option(name: .customLong("database-read-url"), help: "A streaming replica of the PostgreSQL database, for history pages.")
    var databaseReadURL: String?

    func run() async throws {
        var extra: [String: String] = [:]
        if let host { extra["host"] = host }
        if let port { extra["port"] = String(port) }
        if let publicBaseURL { extra["public_base_url"] = publicBaseURL }
        if let databaseReadURL { extra["database_read_url"] = databaseReadURL }
        let configuration = try await reportingErrors { try await common.load(extra: extra) }
        // Before the server's event loops and workers exist: heaps one per core, files up to the hard limit.
        ProcessTuning.applyForServer()
        let server = try await reportingErrors { try await HeraldServer.start(configuration) }
        let host = configuration.host
        let listening = Atomic(false)
        do {
            try await server.run { port in
                listening.store(true, ordering: .relaxed)
                // Scripts and tests read this line to learn the port (with --port 0); written
                // unbuffered so a pipe sees it at once.
                StandardStream.output.write("Herald listening on http://\(host):\(port)\n")
            }
        } catch  where !listening.load(ordering: .relaxed) {
            // A port in use or a host that is not this machine's: say which setting, not NIO's
            // `bind(descriptor:ptr:bytes:)`.
            StandardStream.error.line(
                "herald: error: cannot listen on \(host) port \(configuration.port) (host, port; HERALD_HOST, HERALD_PORT; --host, --port): \(error)")
            throw ExitCode.failure
        }
    }
}
