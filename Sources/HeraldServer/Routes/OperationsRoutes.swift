import Foundation
import Hummingbird
import HeraldCore
import Logging

/// Health probes and the OpenAPI document.
struct OperationsRoutes {
    let store: any HeraldStorage

    func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .get, "/health/live", live)
        table.add(router, .get, "/health/ready", ready)
        table.add(router, .get, "/openapi.yaml", openAPI)
    }

    @Sendable func live(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        try JSONBody.response(["status": "ok"])
    }

    @Sendable func ready(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        do {
            try await store.ping()
        } catch {
            context.logger.warning("readiness check failed: \(error)")
            throw HeraldError(.unavailable, code: "storage_unavailable", "storage is not reachable")
        }
        return try JSONBody.response(["status": "ready"])
    }

    @Sendable func openAPI(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/yaml; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: try OpenAPIDocument.text()))
        )
    }
}

/// The hand-written OpenAPI 3.1 description shipped as a resource of this module.
public enum OpenAPIDocument {
    public static func text() throws -> String {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml") else {
            throw HeraldError(.internal, code: "missing_resource", "openapi.yaml is missing from the build")
        }
        return try String(contentsOf: url, encoding: .utf8)
    }
}
