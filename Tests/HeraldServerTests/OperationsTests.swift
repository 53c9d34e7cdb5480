import Foundation
import HTTPTypes
import HeraldCore
import HeraldHTTP
import HeraldTestSupport
import HummingbirdTesting
import JWTKit
import NIOCore
import Testing

@testable import HeraldServer

@Suite(.cleansUp) struct OperationsTests {
    @Test func healthProbes() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let live = try await client.call(.get, "/health/live")
            #expect(live.status == .ok)
            let ready = try await client.call(.get, "/health/ready")
            #expect(ready.status == .ok)
            #expect(ready.object["status"] as? String == "ready")
        }
    }

    @Test func unknownRoutesAndMethodsGetTheJSONErrorShape() async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let missing = try await client.call(.get, "/nope")
            #expect(missing.status == .notFound)
            #expect(missing.errorCode == "not_found")
            let method = try await client.call(.put, "/health/live")
            #expect(method.status == .methodNotAllowed)
            #expect(method.errorCode == "method_not_allowed")
        }
    }

    /// A served path asked with another method is 405 with `Allow` listing what the route that
    /// path reaches serves (HEAD wherever GET); the most literal route wins, as in the router.
    @Test(arguments: [
        ("TRACE", "/metrics", "GET, HEAD"),
        ("POST", "/health/live", "GET, HEAD"),
        ("GET", "/api/notifications/register", "DELETE, POST"),
        ("PATCH", "/api/cards/c1", "DELETE, PUT"),
        ("POST", "/api/notifications/history", "GET, HEAD"),
        ("DELETE", "/channel", "GET, HEAD, POST"),
        ("GET", "/api/notifications/read", "POST"),
        ("PUT", "/portal/login", "GET, HEAD, POST"),
    ])
    func otherMethodsOnAServedPathAre405WithAllow(_ method: String, _ path: String, _ allow: String) async throws {
        let herald = try await TestHerald.make()
        try await herald.test { client in
            let response = try await client.call(HTTPRequest.Method(method) ?? .get, path, headers(herald.admin, user: "u", contentType: nil))
            #expect(response.status == .methodNotAllowed, "\(method) \(path): \(String(buffer: response.body))")
            #expect(response.headers[.allow] == allow)
            #expect(response.errorCode == "method_not_allowed")
            let unknown = try await client.call(HTTPRequest.Method(method) ?? .get, path + "/not/a/route", headers(herald.admin, user: "u", contentType: nil))
            #expect(unknown.status == .notFound)
            #expect(unknown.headers[.allow] == nil)
        }
    }

    /// Every route the router serves is in openapi.yaml, and openapi.yaml names no route that
    /// is not served.
    @Test func openAPIDocumentsEveryRoute() async throws {
        let herald = try await TestHerald.make()
        let served = Set(herald.server.routes.map { "\($0.method.lowercased()) \($0.path)" })
        #expect(served.count >= 12)
        let document = try OpenAPIDocument.text()
        #expect(document.hasPrefix("openapi: 3.1"))
        var documented = Set<String>()
        var currentPath: String?
        for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), let path = currentPath {
                let key = line.trimmingCharacters(in: .whitespaces).dropLast()
                if ["get", "put", "post", "delete", "patch"].contains(String(key)) { documented.insert("\(key) \(path)") }
            } else if !line.hasPrefix(" ") && !line.isEmpty {
                currentPath = nil
            }
        }
        #expect(served.subtracting(documented).isEmpty, "served but undocumented: \(served.subtracting(documented).sorted())")
        #expect(documented.subtracting(served).isEmpty, "documented but not served: \(documented.subtracting(served).sorted())")
        try await herald.test { client in
            let response = try await client.call(.get, "/openapi.yaml")
            #expect(response.status == .ok)
            #expect(String(buffer: response.body) == document)
        }
    }
}

@Suite(.cleansUp) struct ConfigurationTests {
    @Test func environmentOverridesFileAndCommandLineOverridesBoth() async throws {
        let file = try TestResources.temporaryDirectory("herald-config").appendingPathComponent("herald.yaml")
        try """
        port: 9000
        public_base_url: https://file.example
        delivery:
          max_attempts: 4
        types:
          extra: [digest, weekly]
        routing:
          - "type=violation => +console"
        sinks:
          console:
            enabled: true
        """.write(to: file, atomically: true, encoding: .utf8)
        let reader = try await HeraldConfiguration.reader(
            configFile: file.path, overrides: ["port": "9100"],
            environment: ["HERALD_PORT": "9050", "HERALD_PUBLIC_BASE_URL": "https://env.example", "HERALD_DELIVERY_BACKOFF": "0.5"]
        )
        let configuration = try HeraldConfiguration(reader: reader)
        #expect(configuration.port == 9100)
        #expect(configuration.publicBaseURL == "https://env.example")
        #expect(configuration.delivery.retry.maxAttempts == 4)
        #expect(configuration.delivery.retry.baseDelay == .milliseconds(500))
        #expect(configuration.extraTypes == ["digest", "weekly"])
        #expect(configuration.routing == ["type=violation => +console"])
        #expect(configuration.sinks.map(\.name) == ["console"])
        #expect(configuration.host == "127.0.0.1")
    }

    @Test func defaultsRunOnAFreshMachine() async throws {
        let configuration = try HeraldConfiguration(reader: try await HeraldConfiguration.reader(configFile: nil, environment: [:]))
        #expect(configuration.database == "sqlite:herald.sqlite")
        #expect(configuration.port == 8080)
        #expect(configuration.resolvedPublicBaseURL == "http://127.0.0.1:8080")
    }

    @Test(arguments: [
        ["HERALD_PORT": "eighty"], ["HERALD_PORT": "70000"], ["HERALD_DELIVERY_MAX_ATTEMPTS": "0"], ["HERALD_SINKS_CONSOLE_ENABLED": "maybe"],
        ["HERALD_SHUTDOWN_TIMEOUT": "0"], ["HERALD_DELIVERY_BATCH_SIZE": "0"], ["HERALD_METRICS_PUBLIC": "maybe"],
    ])
    func badValuesAreRefusedNamingTheKey(_ environment: [String: String]) async throws {
        let reader = try await HeraldConfiguration.reader(configFile: nil, environment: environment)
        #expect(throws: HeraldError.self) { try HeraldConfiguration(reader: reader) }
    }

    @Test func theShippedExampleConfigurationLoads() async throws {
        let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Deploy/herald.example.yaml")
        // The sample webhook's secret comes from the environment only: a copy of the file
        // never signs with a secret anyone can read.
        let secret = ["HERALD_SINKS_MODERATION_SECRET": "a-secret-of-the-operator-s-own"]
        let configuration = try await HeraldConfiguration.load(configFile: example.path, environment: secret)
        #expect(configuration.extraTypes == ["digest"])
        #expect(configuration.sinks.map(\.name) == ["console", "moderation"])
        #expect(configuration.sinks.map(\.type) == ["console", "webhook"])
        #expect(try configuration.sinks.last?.settings.stringList("match.types") == ["violation"])
        #expect(configuration.routing == ["type=digest => -console"])
        #expect(configuration.publicBaseURL == "https://app.example.com")
        // The example's rules must name sinks the example enables.
        let directory = try TestResources.temporaryDirectory("herald-example")
        var runnable = configuration
        runnable.database = "sqlite:" + directory.appendingPathComponent("h.sqlite").path
        let server = try await HeraldServer.start(runnable)
        #expect(server.sinks.names == ["history", "feed", "console", "webhook:moderation"])
        await server.close()
        var unset = try await HeraldConfiguration.load(configFile: example.path, environment: [:])
        unset.database = runnable.database
        do {
            await (try await HeraldServer.start(unset)).close()
            Issue.record("the example started with no secret for its webhook")
        } catch let error as HeraldError {
            #expect(error.code == "invalid_config" && error.message.hasPrefix("sinks.moderation.secret "), "\(error)")
        }
    }

    @Test func webhookSinksFromTheFileAndTheEnvironment() async throws {
        let file = try TestResources.temporaryDirectory("herald-config").appendingPathComponent("herald.yaml")
        try """
        sinks:
          console:
            enabled: false
          moderation:
            type: webhook
            url: https://mod.example/hook
            secret: moderation-secret-123
            match:
              types: [violation]
              distributions: [alert]
        """.write(to: file, atomically: true, encoding: .utf8)
        let configuration = try await HeraldConfiguration.load(
            configFile: file.path,
            environment: [
                "HERALD_SINKS_MODERATION_SECRET": "rotated-secret-456789", "HERALD_SINKS_WEBHOOKS": "audit",
                "HERALD_SINKS_AUDIT_URL": "http://127.0.0.1:9/audit", "HERALD_SINKS_AUDIT_SECRET": "audit-secret-0123456",
            ]
        )
        #expect(configuration.sinks.map(\.name) == ["moderation", "audit"], "console is listed but not enabled")
        let server = try await HeraldServer.start(Self.inMemory(configuration))
        #expect(server.sinks.names == ["history", "feed", "webhook:moderation", "webhook:audit"])
        // The file's match rule routes violations (alerts) to moderation; audit gets everything.
        let rules = server.service.router.rules
        #expect(rules.contains(RoutingRule(types: ["violation"], distribution: .alert, add: ["webhook:moderation"])))
        #expect(rules.contains(RoutingRule(add: ["webhook:audit"])))
        await server.close()
    }

    static func inMemory(_ configuration: HeraldConfiguration) -> HeraldConfiguration {
        var copy = configuration
        copy.database = "sqlite::memory:"
        return copy
    }

    /// Each bad value is refused when the server starts, with the full key path named.
    @Test(arguments: [
        (["HERALD_SINKS_WEBHOOKS": "x", "HERALD_SINKS_X_SECRET": "long-enough-secret"], "sinks.x.url"),
        (["HERALD_SINKS_WEBHOOKS": "x", "HERALD_SINKS_X_URL": "ftp://x", "HERALD_SINKS_X_SECRET": "long-enough-secret"], "sinks.x.url"),
        (["HERALD_SINKS_WEBHOOKS": "x", "HERALD_SINKS_X_URL": "http://x", "HERALD_SINKS_X_SECRET": "short"], "sinks.x.secret"),
        (
            [
                "HERALD_SINKS_WEBHOOKS": "x", "HERALD_SINKS_X_URL": "http://x", "HERALD_SINKS_X_SECRET": "long-enough-secret",
                "HERALD_SINKS_X_MATCH_DISTRIBUTIONS": "loud",
            ],
            "sinks.x.match.distributions"
        ),
        (["HERALD_SINKS_WEBHOOKS": "Bad Name"], "sinks.Bad Name"),
        (["HERALD_SINKS_INSTANCES": "pager"], "sinks.pager.type"),
        (["HERALD_SINKS_INSTANCES": "pager", "HERALD_SINKS_PAGER_TYPE": "carrier-pigeon"], "sinks.pager.type"),
        (["HERALD_SINKS_INSTANCES": "history", "HERALD_SINKS_HISTORY_TYPE": "console"], "sinks.history"),
        (["HERALD_FCM_CREDENTIALS": "/nonexistent/account.json"], "sinks.fcm.credentials"),
        (["HERALD_SINKS_INSTANCES": "fcm2", "HERALD_SINKS_FCM2_TYPE": "fcm"], "sinks.fcm2.credentials"),
        (["HERALD_FCM_CREDENTIALS": "/x.json", "HERALD_FCM_MAX_CONCURRENCY": "0"], "sinks.fcm.max_concurrency"),
        (["HERALD_FCM_CREDENTIALS": "/x.json", "HERALD_FCM_CONNECTIONS": "0"], "sinks.fcm.connections"),
        (["HERALD_FCM_CREDENTIALS": "/x.json", "HERALD_FCM_CONNECTIONS": "65"], "sinks.fcm.connections"),
        (["HERALD_FCM_CREDENTIALS": "/x.json", "HERALD_FCM_CONNECTIONS": "many"], "fcm.connections"),
        (["HERALD_FCM_CREDENTIALS": "/x.json", "HERALD_FCM_IID_ENDPOINT": "ftp://iid.example"], "sinks.fcm.iid_endpoint"),
        (["HERALD_FCM_CREDENTIALS": "/x.json", "HERALD_FCM_CA_FILE": "/nonexistent/ca.pem"], "sinks.fcm.ca_file"),
        (["HERALD_FANOUT_INLINE_LIMIT": "-1"], "fanout.inline_limit"),
        // A port past 16 bits trapped the process at the first request (AsyncHTTPClient hands it
        // to NIO as a UInt16).
        (["HERALD_SINKS_WEBHOOKS": "x", "HERALD_SINKS_X_URL": "http://127.0.0.1:70000/x", "HERALD_SINKS_X_SECRET": "long-enough-secret"], "sinks.x.url"),
        (["HERALD_SINKS_WEBHOOKS": "x", "HERALD_SINKS_X_URL": "http:///x", "HERALD_SINKS_X_SECRET": "long-enough-secret"], "sinks.x.url"),
        (["HERALD_FCM_CREDENTIALS": "/x.json", "HERALD_FCM_ENDPOINT": "http://127.0.0.1:99999"], "sinks.fcm.endpoint"),
        (["HERALD_FCM_CREDENTIALS": "/x.json", "HERALD_FCM_IID_ENDPOINT": "https://127.0.0.1:0"], "sinks.fcm.iid_endpoint"),
        (["HERALD_FCM_CREDENTIALS": "/x.json", "HERALD_FCM_CA_FILE": "/etc/passwd"], "sinks.fcm.ca_file"),
    ])
    func badSinkSettingsAreRefusedNamingTheKey(_ environment: [String: String], _ key: String) async throws {
        do {
            let configuration = try await HeraldConfiguration.load(configFile: nil, environment: environment)
            let server = try await HeraldServer.start(Self.inMemory(configuration))
            await server.close()
            Issue.record("\(environment) was accepted")
        } catch let error as HeraldError {
            #expect(error.code == "invalid_config")
            #expect(error.message.hasPrefix(key), "\(error.message)")
        }
    }

    /// An APNs sink's `ca_file` must name a readable PEM certificate: a missing file or another
    /// kind of file is refused at start, naming the key, instead of failing every handshake later.
    @Test(arguments: ["/nonexistent/ca.pem", "/etc/passwd"])
    func anAPNsCAFileThatIsNoCertificateIsRefused(_ caFile: String) async throws {
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("apns-\(UUID().uuidString).p8")
        try ES256PrivateKey().pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: keyFile) }
        let settings = [
            "HERALD_SINKS_INSTANCES": "ios", "HERALD_SINKS_IOS_TYPE": "apns", "HERALD_SINKS_IOS_KEY_FILE": keyFile.path,
            "HERALD_SINKS_IOS_KEY_ID": "KEY1234567",
            "HERALD_SINKS_IOS_TEAM_ID": "TEAM123456", "HERALD_SINKS_IOS_TOPIC": "com.example.app",
        ]
        // The same settings without the file start a sink: the refusal is the file's.
        let valid = try await HeraldServer.start(Self.inMemory(try await HeraldConfiguration.load(configFile: nil, environment: settings)))
        await valid.close()
        do {
            let configuration = try await HeraldConfiguration.load(configFile: nil, environment: settings.merging(["HERALD_SINKS_IOS_CA_FILE": caFile]) { $1 })
            let server = try await HeraldServer.start(Self.inMemory(configuration))
            await server.close()
            Issue.record("ca_file \(caFile) was accepted")
        } catch let error as HeraldError {
            #expect(error.code == "invalid_config")
            #expect(error.message.hasPrefix("sinks.ios.ca_file"), "\(error.message)")
        }
    }

    /// Every Google client reads its service account from GOOGLE_APPLICATION_CREDENTIALS; Herald
    /// does too, below its own keys.
    @Test func googleApplicationCredentialsEnablesTheFCMSinkUnlessHeraldsOwnKeyIsSet() async throws {
        let google = try await HeraldConfiguration.load(configFile: nil, environment: ["GOOGLE_APPLICATION_CREDENTIALS": "/keys/google.json"])
        let fcm = try #require(google.sinks.first { $0.name == "fcm" })
        #expect(fcm.type == "fcm")
        #expect(try fcm.settings.string("credentials") == "/keys/google.json")
        let both = try await HeraldConfiguration.load(
            configFile: nil, environment: ["GOOGLE_APPLICATION_CREDENTIALS": "/keys/google.json", "HERALD_FCM_CREDENTIALS": "/keys/herald.json"]
        )
        #expect(try both.sinks.first { $0.name == "fcm" }?.settings.string("credentials") == "/keys/herald.json")
        #expect(try await HeraldConfiguration.load(configFile: nil, environment: [:]).sinks.contains { $0.name == "fcm" } == false)
    }

    /// A key in the file that Herald never reads is refused, naming it: a misspelt key, or a
    /// section given a value, was ignored and the default stayed in force. Sinks' sections are
    /// their types' own (a plugin's included) and are not checked here.
    /// A section written as a value is named as one, the sinks' sections too (they configured
    /// no sink, and the sink checks never saw them).
    @Test(arguments: [
        ("delivery:\n  wrokers: 8\n", "delivery.wrokers", "is not a setting Herald has"),
        ("delivery: 5\n", "delivery", "is a section, not a value: its settings go under it (such as delivery."),
        ("port: 8080\nlogLevel: debug\n", "logLevel", "is not a setting Herald has"),
        ("server:\n  idle_timeout: 30\n  max_conections: 10\n", "server.max_conections", "is not a setting Herald has"),
        ("sinks: 5\n", "sinks", "is a section, not a value: one section per sink instance"),
        ("sinks: [console, fcm]\n", "sinks", "is a section, not a value: one section per sink instance"),
        ("sinks:\n  console: true\n", "sinks.console", "is a section, not a value: the sink's settings go under it (such as sinks.console.enabled"),
        ("fcm: /etc/herald/google.json\n", "fcm", "is a section, not a value: the fcm sink's settings go under it (such as fcm.credentials)"),
    ])
    func keysHeraldDoesNotReadAreRefusedNamingTheKey(_ yaml: String, _ key: String, _ problem: String) async throws {
        let directory = try TestResources.temporaryDirectory("herald-unknown-key")
        let file = directory.appendingPathComponent("herald.yaml")
        try Data(yaml.utf8).write(to: file)
        do {
            _ = try await HeraldConfiguration.load(configFile: file.path, environment: [:])
            Issue.record("\(yaml) was accepted")
        } catch let error as HeraldError {
            #expect(error.code == "invalid_config")
            #expect(error.message.hasPrefix("\(key) in \(file.path) \(problem)"), "\(error.message)")
        }
        let known = "delivery:\n  workers: 3\nrouting: []\ntypes:\n  extra: [digest]\nsinks:\n  console:\n    enabled: true\n    own_key: 1\n  unset:\n"
        try Data(known.utf8).write(to: file)
        let configuration = try await HeraldConfiguration.load(configFile: file.path, environment: [:])
        #expect(configuration.delivery.workers == 3 && configuration.extraTypes == ["digest"])
    }

    /// A key in a built sink's section that its factory does not read is refused when the
    /// server starts, naming it; a disabled instance's section is not checked.
    @Test(arguments: [
        ("sinks:\n  console:\n    enabled: true\n    colour: true\n", "sinks.console.colour"),
        (
            "sinks:\n  hook:\n    type: webhook\n    url: http://127.0.0.1:9/x\n    secret: long-enough-secret\n    match:\n      typs: [violation]\n",
            "sinks.hook.match.typs"
        ),
        ("sinks:\n  console:\n    enabled: false\n    colour: true\n", nil),
    ])
    func sinkKeysNoFactoryReadsAreRefusedNamingTheKey(_ yaml: String, _ key: String?) async throws {
        let directory = try TestResources.temporaryDirectory("herald-sink-key")
        let file = directory.appendingPathComponent("herald.yaml")
        try Data(yaml.utf8).write(to: file)
        let configuration = try await HeraldConfiguration.load(configFile: file.path, environment: [:])
        do {
            let server = try await HeraldServer.start(Self.inMemory(configuration))
            await server.close()
            #expect(key == nil, "\(yaml) was accepted")
        } catch let error as HeraldError {
            #expect(key.map { error.message.hasPrefix("\($0) in \(file.path) is not a setting of its sink's type") } == true, "\(error.message)")
        }
    }

    /// A `HERALD_*` variable that no setting reads is named in a warning at start (the environment
    /// is shared, so not refused); the tools' own variables, and a sink's that is not built, are not.
    @Test func environmentVariablesNoSettingReadsAreNamed() async throws {
        let environment = [
            "HERALD_DELIVERY_WROKERS": "3", "HERALD_DELIVERY_WORKERS": "3", "HERALD_API_KEY": "hk_x", "HERALD_CONFIG": "x.yaml",
            "HERALD_SINKS_CONSOLE_ENABLED": "true", "HERALD_SINKS_CONSOLE_COLOUR": "red", "HERALD_SINKS_PAGER_URL": "http://x",
            "HERALD_FCM_ENDPOINT": "http://x",
        ]
        let configuration = try await HeraldConfiguration.load(configFile: nil, environment: environment)
        #expect(configuration.delivery.workers == 3)
        let server = try await HeraldServer.start(Self.inMemory(configuration))
        await server.close()
        let named = configuration.unread?.environmentVariables(among: configuration.sinks.map(\.name))
        #expect(named == ["HERALD_DELIVERY_WROKERS", "HERALD_SINKS_CONSOLE_COLOUR"])
    }

    /// A few lines of aliases that expand to millions of keys are refused at once.
    @Test(.timeLimit(.minutes(1))) func aFileOfAliasesThatExpandsBeyondTheLimitIsRefused() async throws {
        let directory = try TestResources.temporaryDirectory("herald-aliases")
        var lines = ["a: &a {k0: 1, k1: 1, k2: 1, k3: 1, k4: 1, k5: 1, k6: 1, k7: 1, k8: 1}"]
        for (level, name) in ["b", "c", "d", "e", "f", "g", "h"].enumerated() {
            let previous = level == 0 ? "a" : ["b", "c", "d", "e", "f", "g"][level - 1]
            lines.append("\(name): &\(name) {" + (0..<9).map { "k\($0): *\(previous)" }.joined(separator: ", ") + "}")
        }
        let file = directory.appendingPathComponent("herald.yaml")
        try lines.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        do {
            _ = try await HeraldConfiguration.load(configFile: file.path, environment: [:])
            Issue.record("a file that expands to 43 million keys was read")
        } catch let error as HeraldError {
            #expect(error.code == "invalid_config" && error.message.contains("aliases"), "\(error)")
        }
        // Aliases within the limit are read as before.
        let small = directory.appendingPathComponent("small.yaml")
        try "delivery:\n  workers: &n 5\n  max_attempts: *n\n".write(to: small, atomically: true, encoding: .utf8)
        let read = try await HeraldConfiguration.load(configFile: small.path, environment: [:])
        #expect(read.delivery.workers == 5 && read.delivery.retry.maxAttempts == 5)
    }

    @Test func missingConfigFileIsAClearError() async throws {
        await #expect(throws: HeraldError.self) { _ = try await HeraldConfiguration.reader(configFile: "/nonexistent/herald.yaml", environment: [:]) }
    }

    /// A SQLite file that cannot be opened is refused with what the file system says of it, not
    /// only SQLite's "unable to open database file".
    @Test func sqliteFilesThatCannotBeOpenedAreNamedWithTheReason() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-open-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cases = [
            ("sqlite:\(directory)/missing/herald.sqlite", "its directory \(directory)/missing does not exist"),
            ("sqlite:\(directory)", "it is a directory"),
        ]
        for (url, problem) in cases {
            do {
                _ = try StorageLocation.open(url)
                Issue.record("\(url) was opened")
            } catch let error as HeraldError {
                #expect(error.message.contains(problem) && error.message.contains("unable to open"), "\(error.message)")
            }
        }
    }

    /// Database URLs that cannot work are refused at start with one line that names the
    /// problem and never echoes a password.
    @Test(arguments: [
        ("mysql://u:p@h/db", "sqlite:PATH or postgres://"),
        ("postgres://", "no host"),
        ("postgres://127.0.0.1/herald", "no user name"),
        ("postgres://herald:s3cret@127.0.0.1:5432", "no database name"),
        ("postgres://herald:s3cret@127.0.0.1/herald?sslmode=sometimes", "sslmode 'sometimes'"),
        ("postgres://herald:s3cret@127.0.0.1:99999/herald", "port 99999 is not 1-65535"),
    ])
    func unusableDatabaseURLsAreRefused(_ url: String, _ problem: String) throws {
        do {
            _ = try StorageLocation.open(url)
            Issue.record("\(url) was accepted")
        } catch let error as HeraldError {
            #expect(error.message.contains(problem), "\(error.message)")
            #expect(!error.message.contains("s3cret"))
        }
    }
}
