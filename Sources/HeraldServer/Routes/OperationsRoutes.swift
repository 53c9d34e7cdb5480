import Foundation
import HeraldCore
import HeraldHTTP
import Hummingbird
import Logging
import Prometheus

/// Health probes, metrics and the OpenAPI document.
struct OperationsRoutes {
    let store: any HeraldStorage
    let sinks: SinkRegistry
    let circuits: CircuitBreakers
    let metricsRegistry: PrometheusCollectorRegistry
    let metrics: HeraldMetrics
    let metricsPublic: Bool

    func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .get, "/health/live", live)
        table.add(router, .get, "/health/ready", ready)
        table.add(router, .get, "/health/sinks", sinkHealth)
        table.add(router, .get, "/openapi.yaml", openAPI)
        table.add(router, .get, "/metrics", exportMetrics)
    }

    /// Prometheus text format. The queue gauges are sampled from storage on each scrape.
    @Sendable func exportMetrics(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        if !metricsPublic { _ = try context.requireKey([.admin]) }
        let stats = try await store.queueStats()
        metrics.queue(pending: stats.pending, oldestAge: stats.oldestPendingSince.map { max(Date().timeIntervalSince($0), 0) } ?? 0)
        for report in await SinkHealthReport.collect(sinks, circuits: circuits) {
            metrics.sinkHealth(sink: report.name, ok: report.status == "ok")
            metrics.circuit(sink: report.name, open: report.circuitOpen)
        }
        var bytes: [UInt8] = []
        metricsRegistry.emit(into: &bytes)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(bytes: bytes))
        )
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

    /// Each sink instance's health. Always 200: a degraded sink is an operator's task, never a
    /// reason to pull the replica (that is `/health/ready`, about storage only).
    /// Reasons can name endpoints, so it is as private as `/metrics`.
    @Sendable func sinkHealth(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        if !metricsPublic { _ = try context.requireKey([.admin]) }
        let reports = await SinkHealthReport.collect(sinks, circuits: circuits, queue: store)
        struct Body: Encodable {
            var status: String
            var sinks: [SinkHealthReport]
        }
        return try JSONBody.response(Body(status: reports.allSatisfy { $0.status == "ok" } ? "ok" : "degraded", sinks: reports))
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
