import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// A probe for container runtimes whose images have no curl: exits 0 when Herald answers
/// `GET /health/ready` with 200, 1 otherwise.
struct Healthcheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Exit 0 if the Herald at --url is ready (for container health checks).")

    @Option(help: "Herald's base URL.")
    var url = "http://127.0.0.1:8080"

    @Option(help: "Seconds to wait for an answer.")
    var timeout: Int64 = 3

    func run() async throws {
        do {
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url + "/health/ready"), timeout: .seconds(timeout))
            guard response.status == .ok else {
                FileHandle.standardError.write(Data("herald healthcheck: \(url) answered \(response.status.code)\n".utf8))
                throw ExitCode(1)
            }
            print("ready")
        } catch let error as ExitCode {
            throw error
        } catch {
            FileHandle.standardError.write(Data("herald healthcheck: \(url) is not reachable: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}
