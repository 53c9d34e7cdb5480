import AsyncHTTPClient
import Foundation
import HeraldTestSupport
import NIOCore
import NIOHTTP1
import Testing
import Yams

/// Deploy/ checked by behaviour where this machine allows (no container engine or cluster): each
/// manifest is parsed, the built `herald` is run the way it says (its environment, arguments,
/// mounted files), and the routes, health check, ports and stop signal it names are exercised.
/// What only a runtime could check (image layers, the kubelet) is read from the parsed files.
@Suite(.cleansUp) struct DeployManifestTests {
    static let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Deploy")

    static func text(_ path: String) throws -> String {
        try String(contentsOf: deploy.appendingPathComponent(path), encoding: .utf8)
    }

    static func yaml(_ path: String) throws -> [String: Any] {
        try #require(try Yams.load(yaml: try text(path)) as? [String: Any], "\(path) is a YAML mapping")
    }

    /// A bootstrap admin key in the form `herald keys generate` prints.
    static func generatedKey(in directory: URL) async throws -> String {
        let result = try await runCommand(Binaries.path("herald"), ["keys", "generate"], in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(result.stdout.split(whereSeparator: \.isWhitespace).last.map(String.init))
    }

    static func status(_ url: String, key: String? = nil) async throws -> Int {
        try await get(url, key: key).status
    }

    static func get(_ url: String, key: String? = nil) async throws -> (status: Int, json: [String: Any]) {
        var request = HTTPClientRequest(url: url)
        if let key { request.headers.add(name: "Authorization", value: "Bearer \(key)") }
        // Generous: a deadline here is a safety net, not a speed check, and a clean-clone run
        // starts many servers at once on two cores (5 s was exceeded there once).
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        let json = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any]
        return (Int(response.status.code), json ?? [:])
    }

    // MARK: Dockerfile

    @Test func theImageStartsServesAndPassesItsOwnHealthCheck() async throws {
        let dockerfile = try Dockerfile(text: try Self.text("Dockerfile"))
        #expect(dockerfile.stages.count == 2, "a build stage and a runtime stage")
        let build = try #require(dockerfile.stages.first)
        let runtime = try #require(dockerfile.stages.last)
        let alias = try #require(build.alias, "the build stage is named")
        #expect(
            runtime.instructions.contains { $0.keyword == "COPY" && $0.arguments.hasPrefix("--from=\(alias) ") }, "the runtime stage copies the build's output")
        let user = try #require(runtime.last("USER"), "the runtime stage names a user")
        #expect(!["root", "0"].contains(user.split(separator: ":").first.map(String.init) ?? ""), "the image does not run as root: USER \(user)")

        let environment = runtime.environment
        let workdir = try #require(runtime.last("WORKDIR"))
        let exposed = try #require(runtime.last("EXPOSE").flatMap { Int($0.split(separator: "/").first ?? "") })
        #expect(environment["HERALD_PORT"].flatMap(Int.init) == exposed, "the exposed port is the one Herald listens on")
        let entrypoint = try #require(runtime.execForm("ENTRYPOINT"))
        let command = try #require(runtime.execForm("CMD"))
        let healthcheck = try #require(runtime.last("HEALTHCHECK"))
        let probeStart = try #require(healthcheck.range(of: "CMD "), "the health check is a command")
        let probe = try #require(Dockerfile.execArray(String(healthcheck[probeStart.upperBound...])))
        #expect(runtime.last("STOPSIGNAL") == "SIGTERM", "the runtime's stop signal is the one Herald drains on")
        #expect(entrypoint == ["herald"] && probe.first == "herald", "the image runs the herald binary: \(entrypoint), \(probe)")

        // The image's WORKDIR and volume are a fresh folder here; its environment is the image's,
        // except that the port is a free one and the listener stays on loopback.
        let directory = try TestResources.temporaryDirectory("herald-image")
        var env = environment.mapValues { $0.replacingOccurrences(of: workdir, with: directory.path) }
        env["HERALD_HOST"] = "127.0.0.1"
        let herald = try await Self.startOnFreePort(
            Binaries.path(entrypoint[0]), arguments: Array(entrypoint.dropFirst()) + command, environment: &env, in: directory)
        defer { herald.terminate() } // a thrown request must not leave it running
        #expect(env["HERALD_PORT"] == String(herald.port))
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("herald.sqlite").path), "HERALD_DATABASE put SQLite in the volume")
        #expect(try await Self.status("\(herald.url)/openapi.yaml") == 200, "the resource bundle beside the binary is found")

        // The health check, with only the image's environment, finds the port Herald listens on.
        let probeArguments = Array(probe.dropFirst())
        let healthy = try await runCommand(Binaries.path(probe[0]), probeArguments, environment: env, in: directory)
        #expect(healthy.status == 0 && healthy.stdout.contains("ready"), "\(healthy.stdout)\(healthy.stderr)")

        await herald.expectCleanStop(timeout: .seconds(20), "the STOPSIGNAL drains and exits 0")
        let stopped = try await runCommand(Binaries.path(probe[0]), probeArguments, environment: env, in: directory)
        #expect(stopped.status == 1, "the health check fails once Herald is gone: \(stopped.stdout)\(stopped.stderr)")
    }

    // MARK: Compose

    @Test(.enabled(if: PostgresTestDatabase.serverURL != nil, "compose runs Herald on PostgreSQL; no PostgreSQL test server"))
    func composeRunsHeraldOnItsPostgresWithItsSecrets() async throws {
        let compose = try Self.yaml("compose.yaml")
        let services = try #require(compose["services"] as? [String: Any])
        let postgres = try #require(services["postgres"] as? [String: Any])
        let heraldService = try #require(services["herald"] as? [String: Any])
        let dependsOn = try #require(heraldService["depends_on"] as? [String: Any])
        #expect((dependsOn["postgres"] as? [String: Any])?["condition"] as? String == "service_healthy")
        #expect(postgres["healthcheck"] != nil, "service_healthy needs a health check")
        let volumes = try #require(postgres["volumes"] as? [String])
        let named = try #require(volumes.first { $0.hasSuffix(":/var/lib/postgresql/data") }?.split(separator: ":").first.map(String.init))
        #expect((compose["volumes"] as? [String: Any])?.keys.contains(named) == true, "PostgreSQL's data is on the named volume \(named)")

        let directory = try TestResources.temporaryDirectory("herald-compose")
        let secrets = [
            "POSTGRES_PASSWORD": "pw-\(UUID().uuidString.prefix(8))",
            "HERALD_BOOTSTRAP_ADMIN_KEY": try await Self.generatedKey(in: directory),
            "HERALD_USER_TOKEN_SECRET": String(repeating: "ab", count: 32),
        ]
        // Without its secrets compose refuses to start (every one is `${NAME:?...}`).
        let raw = try #require(heraldService["environment"] as? [String: Any]).mapValues { "\($0)" }
        for name in ["HERALD_BOOTSTRAP_ADMIN_KEY", "HERALD_USER_TOKEN_SECRET"] {
            #expect(throws: ComposeInterpolation.Missing.self, "\(name) is required") {
                try ComposeInterpolation.apply(raw, variables: secrets.filter { $0.key != name })
            }
        }
        var env = try ComposeInterpolation.apply(raw, variables: secrets)
        let postgresEnv = try ComposeInterpolation.apply(try #require(postgres["environment"] as? [String: Any]).mapValues { "\($0)" }, variables: secrets)

        // HERALD_DATABASE names the postgres service with its user, password and database.
        let database = try #require(env["HERALD_DATABASE"].flatMap(URLComponents.init(string:)))
        #expect(database.scheme == "postgres" && database.host == "postgres")
        #expect(database.user == postgresEnv["POSTGRES_USER"] && database.password == secrets["POSTGRES_PASSWORD"])
        #expect(database.path == "/" + (postgresEnv["POSTGRES_DB"] ?? ""))
        // The service name resolves only inside compose: here the test server stands in.
        env["HERALD_DATABASE"] = try await PostgresTestDatabase.create()

        // The published port is the image's; the image's environment is under compose's.
        let image = try Dockerfile(text: try Self.text("Dockerfile")).stages.last?.environment ?? [:]
        let published = try #require((heraldService["ports"] as? [String])?.first?.split(separator: ":").last.map(String.init))
        #expect(published == image["HERALD_PORT"], "compose publishes the port the image listens on")
        env = image.merging(env) { _, compose in compose }
        env["HERALD_HOST"] = "127.0.0.1"
        let herald = try await Self.startOnFreePort(Binaries.path("herald"), arguments: ["serve"], environment: &env, in: directory)
        defer { herald.terminate() }
        #expect(try await Self.status("\(herald.url)/health/ready") == 200, "migrated its PostgreSQL database and is ready")
        #expect(
            try await Self.status("\(herald.url)/api/content/pending", key: secrets["HERALD_BOOTSTRAP_ADMIN_KEY"]) == 200, "the bootstrap key is an admin key")
        #expect(try await Self.status("\(herald.url)/api/content/pending", key: "hk_" + String(repeating: "x", count: 40)) == 401)

        let grace = try #require(Self.seconds(heraldService["stop_grace_period"] as? String))
        let drain = try #require(env["HERALD_SHUTDOWN_TIMEOUT"].flatMap(Double.init))
        #expect(grace > drain, "stop_grace_period \(grace) s outlasts the \(drain) s drain")
        await herald.expectCleanStop(timeout: .seconds(grace), "SIGTERM drains within stop_grace_period")
    }

    /// Starts `executable` with `HERALD_PORT` set in `environment` to a free port. A port free a
    /// moment ago may be taken by a parallel test before Herald binds it (it once was): then
    /// another one, up to three.
    static func startOnFreePort(
        _ executable: String, arguments: [String], environment: inout [String: String], in directory: URL
    ) async throws -> RunningHerald {
        var attempts = 1
        while true {
            environment["HERALD_PORT"] = String(try Loopback.freePort())
            do {
                return try await RunningHerald(executable: executable, arguments: arguments, environment: environment, in: directory)
            } catch let error as RunningHerald.StartError where attempts < 3 && error.output.contains("cannot listen on") {
                attempts += 1
            }
        }
    }

    /// `45s`, `1m30s`, `90` as seconds.
    static func seconds(_ text: String?) -> Double? {
        guard let text, !text.isEmpty else { return nil }
        if let plain = Double(text) { return plain }
        var total = 0.0
        var digits = ""
        for character in text {
            if character.isNumber || character == "." {
                digits.append(character)
            } else {
                guard let value = Double(digits) else { return nil }
                switch character {
                case "h": total += value * 3600
                case "m": total += value * 60
                case "s": total += value
                default: return nil
                }
                digits = ""
            }
        }
        return digits.isEmpty ? total : nil
    }

    // MARK: Kubernetes

    @Test func theKubernetesPodServesItsProbesFromItsConfigMapAndSecret() async throws {
        let documents = try ["configmap", "secret", "deployment", "service", "pdb"].map { try Self.yaml("k8s/\($0).yaml") }
        #expect(documents.compactMap { $0["kind"] as? String } == ["ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget"])
        let (configMap, secret, deployment, service, budget) = (documents[0], documents[1], documents[2], documents[3], documents[4])
        let deploymentSpec = try #require(deployment["spec"] as? [String: Any])
        let pod = try #require((deploymentSpec["template"] as? [String: Any])?["spec"] as? [String: Any])
        let container = try #require((pod["containers"] as? [[String: Any]])?.first)
        #expect((pod["securityContext"] as? [String: Any])?["runAsNonRoot"] as? Bool == true)

        // The pod's files, mounted under a folder standing in for the container's root.
        let root = try TestResources.temporaryDirectory("herald-pod")
        func host(_ path: String) -> String { root.path + path }
        let configData = try #require(configMap["data"] as? [String: String])
        let secretData = try #require(secret["stringData"] as? [String: String])
        let volumes = try #require(pod["volumes"] as? [[String: Any]])
        let emulatorDirectory = try TestResources.temporaryDirectory("herald-pod-fcm")
        let account = emulatorDirectory.appendingPathComponent("service-account.json").path
        // The shipped service account is a placeholder: the emulator's stands in for a real one.
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on", arguments: ["--write-service-account", account], in: emulatorDirectory)
        defer { emulator.terminate() }
        let realAccount = try String(contentsOfFile: account, encoding: .utf8)
        for mount in try #require(container["volumeMounts"] as? [[String: Any]]) {
            let name = try #require(mount["name"] as? String)
            let mountPath = try #require(mount["mountPath"] as? String)
            let volume = try #require(volumes.first { $0["name"] as? String == name }, "volume \(name) is declared")
            var files: [String: String] = [:]
            if let map = volume["configMap"] as? [String: Any] {
                #expect(map["name"] as? String == (configMap["metadata"] as? [String: Any])?["name"] as? String)
                files = configData
            } else if let source = volume["secret"] as? [String: Any] {
                #expect(source["secretName"] as? String == (secret["metadata"] as? [String: Any])?["name"] as? String)
                for item in source["items"] as? [[String: String]] ?? [] {
                    let key = try #require(item["key"])
                    #expect(secretData[key] != nil, "the secret has \(key)")
                    files[item["path"] ?? key] = key == "service-account.json" ? realAccount : secretData[key]
                }
            }
            if let subPath = mount["subPath"] as? String {
                let content = try #require(files[subPath], "\(name) has \(subPath)")
                try FileManager.default.createDirectory(atPath: (host(mountPath) as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try content.replacingOccurrences(of: "/etc/herald", with: host("/etc/herald")).write(toFile: host(mountPath), atomically: true, encoding: .utf8)
            } else {
                try FileManager.default.createDirectory(atPath: host(mountPath), withIntermediateDirectories: true)
                for (file, content) in files { try content.write(toFile: host(mountPath) + "/" + file, atomically: true, encoding: .utf8) }
            }
        }

        // envFrom the Secret: every key that is an environment variable name.
        let secretRef = (container["envFrom"] as? [[String: Any]])?.first?["secretRef"] as? [String: Any]
        #expect(secretRef?["name"] as? String == (secret["metadata"] as? [String: Any])?["name"] as? String)
        var env = secretData.filter { $0.key.range(of: "^[A-Z_][A-Z0-9_]*$", options: .regularExpression) != nil }
        let arguments = try #require(container["args"] as? [String]).map { $0.hasPrefix("/etc/herald") ? host($0) : $0 }
        // The database host resolves only in the cluster: SQLite in the pod's /tmp stands in.
        env["HERALD_DATABASE"] = "sqlite:" + host("/tmp/herald.sqlite")
        try FileManager.default.createDirectory(atPath: host("/tmp"), withIntermediateDirectories: true)

        // Applied as shipped, the Secret's placeholders are refused, naming the setting.
        let refused = try await runCommand(Binaries.path("herald"), arguments + ["--port", "0"], environment: env, in: root, timeout: .seconds(20))
        #expect(
            !refused.timedOut && refused.status != 0 && (refused.stderr.contains("bootstrap_admin_key") || refused.stderr.contains("user_token_secret")),
            "placeholders are not usable secrets: \(refused.stderr)")

        env["HERALD_BOOTSTRAP_ADMIN_KEY"] = try await Self.generatedKey(in: root)
        env["HERALD_USER_TOKEN_SECRET"] = String(repeating: "cd", count: 32)
        let configText = try #require(configData["herald.yaml"])
        let configured = try #require(try Yams.load(yaml: configText) as? [String: Any])
        let containerPort = try #require((container["ports"] as? [[String: Any]])?.first { $0["name"] as? String == "http" }?["containerPort"] as? Int)
        #expect(containerPort == configured["port"] as? Int, "the container port is the one herald.yaml listens on")
        env["HERALD_HOST"] = "127.0.0.1"
        env["HERALD_FCM_ENDPOINT"] = emulator.url
        let herald = try await Self.startOnFreePort(Binaries.path("herald"), arguments: arguments, environment: &env, in: root)
        defer { herald.terminate() }
        for probe in ["livenessProbe", "readinessProbe"] {
            let get = try #require((container[probe] as? [String: Any])?["httpGet"] as? [String: Any])
            #expect(get["port"] as? String == "http")
            let path = try #require(get["path"] as? String)
            #expect(try await Self.status("\(herald.url)\(path)") == 200, "\(probe) \(path)")
        }
        // The ConfigMap's FCM section, with the mounted service account, made a healthy sink.
        let sinks = try await Self.get("\(herald.url)/health/sinks", key: env["HERALD_BOOTSTRAP_ADMIN_KEY"])
        let fcm = (sinks.json["sinks"] as? [[String: Any]])?.first { $0["name"] as? String == "fcm" }
        #expect(sinks.status == 200 && fcm?["status"] as? String == "ok", "\(sinks)")

        let servicePorts = try #require((service["spec"] as? [String: Any])?["ports"] as? [[String: Any]])
        #expect(servicePorts.first?["targetPort"] as? String == "http", "the Service targets the named container port")
        let replicas = try #require(deploymentSpec["replicas"] as? Int)
        let minAvailable = try #require((budget["spec"] as? [String: Any])?["minAvailable"] as? Int)
        #expect(minAvailable >= 1 && minAvailable < replicas, "a voluntary disruption can take one pod, never all")
        let grace = try #require(pod["terminationGracePeriodSeconds"] as? Int)
        let drain = try #require(configured["shutdown_timeout"] as? Int)
        #expect(grace > drain, "SIGKILL (\(grace) s) does not come before the drain ends (\(drain) s)")
        await herald.expectCleanStop(timeout: .seconds(grace), "SIGTERM drains within terminationGracePeriodSeconds")
    }

    // MARK: systemd

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), "systemd-analyze is not installed"))
    func systemdAcceptsTheUnitAndItsCommandServes() async throws {
        let unitText = try Self.text("systemd/herald.service")
        let service = SystemdUnit(text: unitText).section("Service")
        let execStart = try #require(service["ExecStart"]?.last).split(separator: " ").map(String.init)
        #expect(execStart.first == "/usr/local/bin/herald", "the unit runs the installed binary")
        #expect(service["NoNewPrivileges"]?.last == "yes" && service["ProtectSystem"]?.last == "strict" && service["DynamicUser"]?.last == "yes")
        #expect(service["KillSignal"]?.last == "SIGTERM")
        let directory = try TestResources.temporaryDirectory("herald-unit")
        // verify insists that ExecStart exists: point it at the binary this build made.
        let unit = directory.appendingPathComponent("herald.service")
        try unitText.replacingOccurrences(of: "/usr/local/bin/herald", with: Binaries.path("herald")).write(to: unit, atomically: true, encoding: .utf8)
        let verified = try await runCommand("/usr/bin/systemd-analyze", ["verify", unit.path], in: directory)
        #expect(verified.status == 0, "systemd-analyze verify: \(verified.stdout)\(verified.stderr)")

        // Its command line, with the state directory and config in a fresh folder, serves under
        // the unit's system-call filter, loaded as systemd loads it: it starts, pushes over
        // HTTP/2 and TLS as it would to FCM, and drains. (A filtered call killed it at start
        // until the unit said SystemCallErrorNumber=.)
        let state = directory.path
        let config = directory.appendingPathComponent("herald.yaml").path
        try "shutdown_timeout: 30\n".write(toFile: config, atomically: true, encoding: .utf8)
        let arguments = execStart.dropFirst().map {
            $0.replacingOccurrences(of: "/var/lib/herald", with: state).replacingOccurrences(of: "/etc/herald/herald.yaml", with: config)
        }
        let filter = try #require(try await SystemdSystemCallFilter(service: service, in: directory), "the unit filters system calls")
        let account = directory.appendingPathComponent("fcm.json").path
        let ca = directory.appendingPathComponent("fcm-ca.pem").path
        let emulator = try await RunningHerald(
            command: "fcm-emulator", banner: "FCM emulator listening on https://", arguments: ["--tls", "--write-ca", ca, "--write-service-account", account],
            in: directory)
        defer { emulator.terminate() }
        let key = try await Self.generatedKey(in: directory)
        let filtered = filter.wrapping(Binaries.path("herald"), arguments + ["--port", "0"])
        let herald = try await RunningHerald(
            executable: filtered.executable, arguments: filtered.arguments,
            environment: [
                "HERALD_BOOTSTRAP_ADMIN_KEY": key, "HERALD_FCM_CREDENTIALS": account, "HERALD_FCM_ENDPOINT": "https://127.0.0.1:\(emulator.port)",
                "HERALD_FCM_CA_FILE": ca,
            ], in: directory)
        defer { herald.terminate() }
        #expect(try await Self.status("\(herald.url)/health/ready") == 200)
        #expect(FileManager.default.fileExists(atPath: state + "/herald.sqlite"), "the database is in the StateDirectory")
        let registered = try await LoadHarness.request(
            .POST, "\(herald.url)/api/notifications/register", key: key, user: "unit-user", body: "{\"fcm_token\":\"unit-token\"}")
        #expect(registered.0 == 200)
        let sent = try await runCommand(
            Binaries.path("notifsim"), ["-u", "unit-user", "-t", "message", "-n", "Sandboxed", "--url", herald.url, "--key", key], in: directory,
            timeout: .seconds(60))
        #expect(sent.status == 0 && sent.stdout.contains("fcm: delivered 1"), "\(sent.stdout)\(sent.stderr)\n\(herald.output.stderr.suffix(4000))")
        let stopAfter = try #require(Self.seconds(service["TimeoutStopSec"]?.last))
        #expect(stopAfter > 30, "TimeoutStopSec outlasts the default 30 s drain")
        await herald.expectCleanStop(timeout: .seconds(stopAfter), "KillSignal drains within TimeoutStopSec")
    }
}

/// A Dockerfile's instructions, split into stages at each FROM.
struct Dockerfile {
    struct Instruction {
        var keyword: String
        var arguments: String
    }

    struct Stage {
        var alias: String?
        var instructions: [Instruction] = []

        func last(_ keyword: String) -> String? { instructions.last { $0.keyword == keyword }?.arguments }

        /// An exec-form (`["a", "b"]`) instruction's words.
        func execForm(_ keyword: String) -> [String]? { last(keyword).flatMap(Dockerfile.execArray) }

        /// Every `ENV` in the stage, `NAME=value` pairs (values without spaces, as Herald's use).
        var environment: [String: String] {
            var values: [String: String] = [:]
            for instruction in instructions where instruction.keyword == "ENV" {
                for pair in instruction.arguments.split(whereSeparator: \.isWhitespace) {
                    guard let equals = pair.firstIndex(of: "=") else { continue }
                    values[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
                }
            }
            return values
        }
    }

    var stages: [Stage] = []

    init(text: String) throws {
        var logical: [String] = []
        var pending = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if pending.isEmpty && (trimmed.isEmpty || trimmed.hasPrefix("#")) { continue }
            if trimmed.hasSuffix("\\") {
                pending += trimmed.dropLast() + " "
            } else {
                logical.append(pending + trimmed)
                pending = ""
            }
        }
        for line in logical {
            let keyword = String(line.prefix { !$0.isWhitespace }).uppercased()
            let arguments = line.dropFirst(keyword.count).trimmingCharacters(in: .whitespaces)
            if keyword == "FROM" {
                let words = arguments.split(separator: " ")
                let alias = words.count >= 3 && words[words.count - 2].uppercased() == "AS" ? String(words[words.count - 1]) : nil
                stages.append(Stage(alias: alias))
            } else if !stages.isEmpty {
                stages[stages.count - 1].instructions.append(Instruction(keyword: keyword, arguments: arguments))
            }
        }
    }

    static func execArray(_ text: String) -> [String]? {
        try? JSONDecoder().decode([String].self, from: Data(text.utf8))
    }
}

/// Compose's variable interpolation for the forms Deploy/compose.yaml uses: `${NAME}`,
/// `${NAME:?message}` (required) and `${NAME:-default}`.
enum ComposeInterpolation {
    struct Missing: Error { var name: String }

    static func apply(_ values: [String: String], variables: [String: String]) throws -> [String: String] {
        try values.mapValues { try apply($0, variables: variables) }
    }

    static func apply(_ text: String, variables: [String: String]) throws -> String {
        var result = ""
        var rest = Substring(text)
        while let start = rest.range(of: "${") {
            result += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else { break }
            let expression = rest[start.upperBound..<end]
            let name = String(expression.prefix { $0.isLetter || $0.isNumber || $0 == "_" })
            let modifier = expression.dropFirst(name.count)
            let value = variables[name].flatMap { $0.isEmpty ? nil : $0 }
            if let value {
                result += value
            } else if modifier.hasPrefix(":?") || modifier.hasPrefix("?") {
                throw Missing(name: name)
            } else if modifier.hasPrefix(":-") {
                result += modifier.dropFirst(2)
            }
            rest = rest[rest.index(after: end)...]
        }
        return result + rest
    }
}

/// A systemd unit's sections, each key with its values in file order.
struct SystemdUnit {
    var sections: [String: [String: [String]]] = [:]

    init(text: String) {
        var current = ""
        for line in text.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed.hasPrefix(";") { continue }
            if trimmed.hasPrefix("[") && trimmed.hasSuffix("]") {
                current = String(trimmed.dropFirst().dropLast())
            } else if let equals = trimmed.firstIndex(of: "=") {
                sections[current, default: [:]][String(trimmed[..<equals]), default: []].append(String(trimmed[trimmed.index(after: equals)...]))
            }
        }
    }

    func section(_ name: String) -> [String: [String]] { sections[name] ?? [:] }
}
