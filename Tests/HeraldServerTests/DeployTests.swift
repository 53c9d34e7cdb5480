import Foundation
import HeraldCore
import HeraldTestSupport
import HeraldServer
import Testing
import Yams

/// Checks what can be checked here of Deploy/ (no container engine or cluster on this
/// machine): every YAML parses, the manifests agree with the server (probe paths, ports,
/// grace periods longer than shutdown_timeout), the image runs as non-root with a health check,
/// and systemd accepts the unit.
@Suite struct DeployTests {
    static let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Deploy")

    func text(_ path: String) throws -> String {
        try String(contentsOf: Self.deploy.appendingPathComponent(path), encoding: .utf8)
    }

    func yaml(_ path: String) throws -> [String: Any] {
        try #require(try Yams.load(yaml: try text(path)) as? [String: Any], "\(path) is a YAML mapping")
    }

    @Test func dockerfileBuildsInOneStageAndRunsAsNonRootInAnother() throws {
        let lines = try text("Dockerfile").split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let stages = lines.filter { $0.hasPrefix("FROM ") }
        #expect(stages.count == 2)
        #expect(stages.first?.hasSuffix(" AS build") == true)
        #expect(lines.contains { $0.hasPrefix("COPY --from=build ") })
        let user = try #require(lines.last { $0.hasPrefix("USER ") })
        #expect(!["USER root", "USER 0"].contains(user))
        #expect(lines.contains { $0.hasPrefix("HEALTHCHECK ") && $0.contains("herald\", \"healthcheck") })
        #expect(lines.contains("STOPSIGNAL SIGTERM"))
    }

    @Test func composeRunsHeraldAfterAHealthyPostgresWithAVolume() throws {
        let compose = try yaml("compose.yaml")
        let services = try #require(compose["services"] as? [String: Any])
        let postgres = try #require(services["postgres"] as? [String: Any])
        let herald = try #require(services["herald"] as? [String: Any])
        #expect((postgres["volumes"] as? [String])?.contains { $0.hasSuffix(":/var/lib/postgresql/data") } == true)
        #expect(postgres["healthcheck"] != nil)
        let dependsOn = try #require(herald["depends_on"] as? [String: Any])
        #expect((dependsOn["postgres"] as? [String: Any])?["condition"] as? String == "service_healthy")
        let environment = try #require(herald["environment"] as? [String: Any])
        #expect((environment["HERALD_DATABASE"] as? String)?.hasPrefix("postgres://") == true)
        #expect((compose["volumes"] as? [String: Any])?.keys.contains("pgdata") == true)
    }

    @Test func kubernetesManifestsAgreeWithTheServer() async throws {
        let kinds = try ["configmap", "secret", "deployment", "service", "pdb"].map { try yaml("k8s/\($0).yaml") }
        #expect(kinds.compactMap { $0["kind"] as? String } == ["ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget"])

        // The ConfigMap's herald.yaml is a configuration Herald accepts.
        let configText = try #require((kinds[0]["data"] as? [String: Any])?["herald.yaml"] as? String)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("herald-k8s-\(UUID().uuidString).yaml")
        try configText.write(to: file, atomically: true, encoding: .utf8)
        let configuration = try await HeraldConfiguration.load(configFile: file.path, environment: [:])

        let pod = try #require(((kinds[2]["spec"] as? [String: Any])?["template"] as? [String: Any])?["spec"] as? [String: Any])
        let container = try #require((pod["containers"] as? [[String: Any]])?.first)
        let liveness = try #require((container["livenessProbe"] as? [String: Any])?["httpGet"] as? [String: Any])
        let readiness = try #require((container["readinessProbe"] as? [String: Any])?["httpGet"] as? [String: Any])
        let herald = try await TestHerald.make()
        let served = Set(herald.server.routes.filter { $0.method == "GET" }.map(\.path))
        #expect(served.contains(try #require(liveness["path"] as? String)))
        #expect(served.contains(try #require(readiness["path"] as? String)))
        let port = try #require((container["ports"] as? [[String: Any]])?.first?["containerPort"] as? Int)
        #expect(port == configuration.port)
        let grace = try #require(pod["terminationGracePeriodSeconds"] as? Int)
        #expect(Double(grace) > configuration.shutdownTimeout.seconds, "SIGKILL must not come before the drain ends")
        #expect((pod["securityContext"] as? [String: Any])?["runAsNonRoot"] as? Bool == true)

        let service = try #require(kinds[3]["spec"] as? [String: Any])
        #expect((service["ports"] as? [[String: Any]])?.first?["targetPort"] as? String == "http")
        #expect((kinds[4]["spec"] as? [String: Any])?["minAvailable"] as? Int == 1)
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), "systemd-analyze is not installed"))
    func systemdAcceptsTheUnit() throws {
        // verify insists that ExecStart exists: point it at the binary this build made.
        let herald = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug/herald").path
        let built = FileManager.default.isExecutableFile(atPath: herald) ? herald : "/bin/true"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-unit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let unit = directory.appendingPathComponent("herald.service")
        let original = try text("systemd/herald.service")
        #expect(original.contains("ExecStart=/usr/local/bin/herald serve"))
        #expect(original.contains("NoNewPrivileges=yes") && original.contains("ProtectSystem=strict") && original.contains("DynamicUser=yes"))
        try original.replacingOccurrences(of: "/usr/local/bin/herald", with: built).write(to: unit, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-analyze")
        process.arguments = ["verify", unit.path]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = errors
        try process.run()
        process.waitUntilExit()
        let output = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 0, "systemd-analyze verify: \(output)")
    }
}
