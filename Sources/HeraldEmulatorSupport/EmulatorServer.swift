import Foundation
public import HTTPTypes
import HeraldCore
public import Hummingbird
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL

/// What every provider emulator does around its routes: serve them on loopback (HTTP/1.1, or
/// HTTP/2 over TLS with a minted certificate), report the bound port, answer JSON.
public enum EmulatorServer {
    /// Serves `router` until cancelled, then stops gracefully (``runUntilCancelled(_:grace:logger:)``);
    /// `onRunning` gets the bound port.
    /// - Parameter certificate: when given, TLS with HTTP/2 (ALPN), as APNs serves.
    public static func run<Context: RequestContext>(
        _ router: Router<Context>, name: String, host: String, port: Int, certificate: SelfSignedCertificate? = nil,
        onRunning: @escaping @Sendable (Int) async -> Void
    ) async throws where Context.Source == ApplicationRequestContextSource {
        var logger = Logger(label: name, factory: DeferredMetadataLogHandler.standardError)
        logger.logLevel = .warning
        let configuration = ApplicationConfiguration(address: .hostname(host, port: port), serverName: name)
        let running: @Sendable (any NIOCore.Channel) async -> Void = { channel in await onRunning(channel.localAddress?.port ?? port) }
        if let certificate {
            let tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(certificate.certificatePEM.utf8), format: .pem))],
                privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(certificate.privateKeyPEM.utf8), format: .pem))
            )
            let app = Application(
                router: router, server: try .http2Upgrade(tlsConfiguration: tls), configuration: configuration, onServerRunning: running, logger: logger)
            try await runUntilCancelled(app, logger: logger)
        } else {
            let app = Application(router: router, configuration: configuration, onServerRunning: running, logger: logger)
            try await runUntilCancelled(app, logger: logger)
        }
    }

    /// A JSON response of a `JSONSerialization` value, keys sorted.
    public static func json(_ value: Any, status: HTTPResponse.Status = .ok) throws -> Response {
        let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
