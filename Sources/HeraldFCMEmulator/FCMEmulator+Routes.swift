import Foundation
import HTTPTypes
import HeraldEmulatorSupport
import Hummingbird
import JWTKit
import NIOCore
import Synchronization

extension FCMEmulator {
    struct Assertion: JWTPayload {
        var iss: IssuerClaim
        var scope: String
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws { try exp.verifyNotExpired() }
    }

    /// The OAuth 2.0 token endpoint: JWT-bearer grant with an RS256 assertion.
    func token(_ request: Request, context: EmulatorRequestContext) async throws -> Response {
        var request = request
        let body = String(buffer: try await request.collectBody(upTo: 64 * 1024))
        var form: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            if parts.count == 2 { form[parts[0]] = parts[1] }
        }
        let down = state.withLock { state -> Bool in
            state.tokenRequests += 1
            return state.tokenEndpointDown
        }
        if down {
            return (try? json(["error": "temporarily_unavailable", "error_description": "the emulator's token endpoint is down"], status: .serviceUnavailable))
                ?? Response(status: .serviceUnavailable)
        }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return oauthError("unsupported_grant_type", "grant_type must be urn:ietf:params:oauth:grant-type:jwt-bearer")
        }
        guard let assertion = form["assertion"] else { return oauthError("invalid_request", "assertion is missing") }
        // `iat` and `exp` as whole seconds, as Google's clients send them: a fraction is refused.
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .integerSecondsSince1970
        let keys = JWTKeyCollection()
        await keys.add(rsa: privateKey.publicKey, digestAlgorithm: .sha256, parser: DefaultJWTParser(jsonDecoder: decoder))
        let claims: Assertion
        do {
            claims = try await keys.verify(assertion, as: Assertion.self)
        } catch {
            return oauthError(
                "invalid_grant", "the assertion is not signed by this service account, has expired, or has an iat or exp that is not whole seconds: \(error)")
        }
        guard claims.iss.value == configuration.clientEmail else { return oauthError("invalid_grant", "iss is not the service account's client_email") }
        guard claims.aud.value.contains("\(baseURL)/token") else { return oauthError("invalid_grant", "aud must be the token_uri") }
        guard claims.scope.split(separator: " ").contains("https://www.googleapis.com/auth/firebase.messaging") else {
            return oauthError("invalid_scope", "scope must include https://www.googleapis.com/auth/firebase.messaging")
        }
        guard claims.exp.value.timeIntervalSince(claims.iat.value) <= 3600 else {
            return oauthError("invalid_grant", "exp may be at most one hour after iat")
        }
        let token = "ya29.emulator-" + UUID().uuidString.lowercased()
        state.withLock { _ = $0.issuedTokens.insert(token) }
        return try json(["access_token": token, "expires_in": configuration.tokenLifetime, "token_type": "Bearer"], status: .ok)
    }

    /// `messages:send`: checks the bearer token and the message, then answers per token prefix.
    func send(_ request: Request, context: EmulatorRequestContext) async throws -> Response {
        var request = request
        let bearer = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        guard let bearer, state.withLock({ $0.issuedTokens.contains(bearer) }) else {
            return fcmError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.", errorCode: nil)
        }
        guard context.parameters.get("project") == configuration.projectID else {
            return fcmError(
                403, "PERMISSION_DENIED", "Permission denied for project \(context.parameters.get("project") ?? "?")", errorCode: "SENDER_ID_MISMATCH")
        }
        let data = Data(try await request.collectBody(upTo: 1 << 20).readableBytesView)
        let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        let checkOnly = (root?["validate_only"] as? Bool) ?? false
        if !checkOnly, let fault = try await injector.next() {
            switch fault {
            case .drop:
                // No answer at all: the connection goes, as a provider that is down or resetting.
                state.withLock { $0.record(Received(status: 0, body: data, at: Date(), validateOnly: false, httpVersion: context.httpVersion)) }
                context.requestChannel.close(promise: nil)
                throw CancellationError()
            case .unavailable:
                let response = fcmError(503, "UNAVAILABLE", "The service is currently unavailable.", errorCode: "UNAVAILABLE")
                state.withLock { $0.record(Received(status: 503, body: data, at: Date(), validateOnly: false, httpVersion: context.httpVersion)) }
                return response
            case .rateLimited:
                var response = fcmError(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", errorCode: "QUOTA_EXCEEDED")
                response.headers[HTTPField.Name("Retry-After")!] = String(configuration.quotaRetryAfter)
                state.withLock { $0.record(Received(status: 429, body: data, at: Date(), validateOnly: false, httpVersion: context.httpVersion)) }
                return response
            }
        }
        state.withLock { state in
            state.sendsInFlight += 1
            state.peakSendsInFlight = max(state.peakSendsInFlight, state.sendsInFlight)
        }
        let (response, validateOnly) = await answer(root, body: data)
        let message = root?["message"] as? [String: Any]
        let topic = message?["topic"] as? String
        let messageKey = Self.key(of: message)
        state.withLock { state in
            state.record(
                Received(status: Int(response.status.code), body: data, at: Date(), validateOnly: validateOnly, httpVersion: context.httpVersion))
            state.sendConnections.insert(context.connection)
            state.sendsInFlight -= 1
            if response.status == .ok && !validateOnly {
                state.delivered += 1
                state.accepted(messageKey)
                // A topic message reaches the topic's members, and nobody else.
                if let topic {
                    state.topicMessages[topic, default: 0] += 1
                    state.topicDeliveries[topic, default: 0] += state.topicMembers[topic]?.count ?? 0
                }
            }
        }
        return response
    }

    /// What tells one message from another: its token (or topic) and the notification id in its
    /// data, so a retry of it is the same message (`--fail-first`, `accepted_twice`).
    static func key(of message: [String: Any]?) -> String {
        "\((message?["token"] as? String) ?? (message?["topic"] as? String) ?? "")|\((message?["data"] as? [String: Any])?["id"] as? String ?? "")"
    }

    /// The Instance ID API's `batchAdd`/`batchRemove`: `{"to": "/topics/T", "registration_tokens":
    /// [...]}` (1-1000 tokens) with the OAuth token and `access_token_auth: true`; one result per
    /// token (`{}` or `{"error": "NOT_FOUND"}` for `dead-` tokens, `INVALID_ARGUMENT` for
    /// `invalid-` ones).
    func membership(_ request: Request, add: Bool) async throws -> Response {
        var request = request
        let bearer = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        guard let bearer, state.withLock({ $0.issuedTokens.contains(bearer) }), request.headers[HTTPField.Name("access_token_auth")!] == "true" else {
            return try json(["error": "Unauthorized: an OAuth access token with 'access_token_auth: true' is required"], status: .unauthorized)
        }
        let data = Data(try await request.collectBody(upTo: 1 << 22).readableBytesView)
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let to = root["to"] as? String, to.hasPrefix("/topics/"),
            let tokens = root["registration_tokens"] as? [String], (1...1_000).contains(tokens.count)
        else {
            return try json(["error": "InvalidParameters: 'to' must be /topics/NAME and 'registration_tokens' 1-1000 strings"], status: .badRequest)
        }
        let topic = String(to.dropFirst("/topics/".count))
        guard !topic.isEmpty, topic.range(of: "^[a-zA-Z0-9-_.~%]+$", options: .regularExpression) != nil else {
            return try json(["error": "InvalidParameters: invalid topic name"], status: .badRequest)
        }
        let results: [[String: String]] = state.withLock { state in
            state.membershipRequests += 1
            return tokens.map { token in
                if token.hasPrefix("dead-") { return ["error": "NOT_FOUND"] }
                if token.hasPrefix("invalid-") { return ["error": "INVALID_ARGUMENT"] }
                if add {
                    state.topicMembers[topic, default: []].insert(token)
                } else {
                    guard state.topicMembers[topic]?.remove(token) != nil else { return ["error": "NOT_FOUND"] }
                    if state.topicMembers[topic]?.isEmpty == true { state.topicMembers[topic] = nil }
                }
                return [:]
            }
        }
        print("fcm-emulator: \(add ? "batchAdd" : "batchRemove") \(topic): \(tokens.count) tokens")
        return try json(["results": results], status: .ok)
    }

    /// Per topic: members, messages accepted, devices reached.
    func topics() throws -> Response {
        let topics = state.withLock { state in
            Set(state.topicMembers.keys).union(state.topicMessages.keys).sorted().map { topic -> (String, [String: Any]) in
                (
                    topic,
                    [
                        "members": (state.topicMembers[topic] ?? []).sorted(), "messages": state.topicMessages[topic] ?? 0,
                        "deliveries": state.topicDeliveries[topic] ?? 0,
                    ]
                )
            }
        }
        return try json(["topics": Dictionary(uniqueKeysWithValues: topics)], status: .ok)
    }

    private func answer(_ root: [String: Any]?, body data: Data) async -> (Response, Bool) {
        guard let root, let message = root["message"] as? [String: Any] else {
            return (badRequest("message", "the body must be {\"message\":{…}}"), false)
        }
        let validateOnly = root["validate_only"] as? Bool ?? false
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard targets.count == 1 else { return (badRequest("message", "exactly one of token, topic or condition is required"), validateOnly) }
        if let values = message["data"] {
            guard let data = values as? [String: Any] else { return (badRequest("message.data", "data must be an object"), validateOnly) }
            for (key, value) in data.sorted(by: { $0.key < $1.key }) {
                guard value is String else { return (badRequest("message.data.\(key)", "data values must be strings"), validateOnly) }
                let lower = key.lowercased()
                if lower == "from" || lower == "gcm" || lower.hasPrefix("google") || lower == "message_type" {
                    return (badRequest("message.data.\(key)", "'\(key)' is a reserved key"), validateOnly)
                }
            }
        }
        var payload: [String: Any] = [:]
        payload["notification"] = message["notification"]
        payload["data"] = message["data"]
        let limit = message["topic"] != nil ? 2048 : 4096
        if let size = oversizedPayload(payload, requestBytes: data.count, limit: limit) {
            return (badRequest("message", "payload of \(size) bytes exceeds \(limit)"), validateOnly)
        }

        let target = (message["token"] as? String) ?? (message["topic"] as? String) ?? ""
        let attempt = state.withLock { state -> Int in
            state.attemptsByToken[target, default: 0] += 1
            return state.attemptsByToken[target] ?? 1
        }
        print(
            "fcm-emulator: \(validateOnly ? "validated" : "message") #\(attempt) to \(message["token"] != nil ? "token" : "topic") \(target): \(String(decoding: data, as: UTF8.self))"
        )
        if target.hasPrefix("dead-") {
            return (fcmError(404, "NOT_FOUND", "Requested entity was not found.", errorCode: "UNREGISTERED"), validateOnly)
        }
        if target.hasPrefix("invalid-") {
            return (
                fcmError(400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token", errorCode: "INVALID_ARGUMENT"), validateOnly
            )
        }
        if target.hasPrefix("mismatch-") {
            return (fcmError(403, "PERMISSION_DENIED", "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH"), validateOnly)
        }
        if configuration.failFirst > 0, !validateOnly {
            let key = Self.key(of: message)
            let messageAttempt = state.withLock { state -> Int in
                state.attemptsByMessage[key, default: 0] += 1
                return state.attemptsByMessage[key] ?? 1
            }
            if messageAttempt <= configuration.failFirst {
                return (fcmError(503, "UNAVAILABLE", "The service is currently unavailable.", errorCode: "UNAVAILABLE"), validateOnly)
            }
        }
        if target.hasPrefix("flaky-") && attempt <= 2 {
            return (fcmError(503, "UNAVAILABLE", "The service is currently unavailable.", errorCode: "UNAVAILABLE"), validateOnly)
        }
        if target.hasPrefix("quota-") && attempt == 1 {
            var response = fcmError(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", errorCode: "QUOTA_EXCEEDED")
            response.headers[HTTPField.Name("Retry-After")!] = String(configuration.quotaRetryAfter)
            return (response, validateOnly)
        }
        if target.hasPrefix("slow-") {
            if let threshold = configuration.releaseSlowSendsAt {
                let deadline = ContinuousClock.now + configuration.slowLatency
                while ContinuousClock.now < deadline, !Task.isCancelled {
                    let released = state.withLock { state in
                        if state.sendsInFlight >= threshold { state.slowSendsReleased = true }
                        return state.slowSendsReleased
                    }
                    if released { break }
                    // Not finer: a hundred held sends polling every few milliseconds kept the
                    // test process's two threads busy enough to starve other tests' timers.
                    try? await Task.sleep(for: .milliseconds(100))
                }
            } else {
                try? await Task.sleep(for: configuration.slowLatency)
            }
        }
        let name = "projects/\(configuration.projectID)/messages/\(UInt64.random(in: 1..<UInt64.max))"
        guard name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else {
            return ((try? json(["name": name], status: .ok)) ?? Response(status: .ok), validateOnly)
        }
        // The common answer written directly: JSONSerialization was a third of the emulator's
        // CPU, which it takes from Herald when both share a machine in a load test.
        let body = ByteBuffer(string: "{\"name\":\"\(name)\"}")
        return (Response(status: .ok, headers: [.contentType: "application/json; charset=UTF-8"], body: .init(byteBuffer: body)), validateOnly)
    }

    /// The payload's size as FCM counts it (its JSON) if it exceeds `limit`. It is written out
    /// only when it could: JSON writes a string's byte as at most six (`\u00XX`), so a payload of
    /// strings that came in a request of at most a sixth of the limit is within it.
    private func oversizedPayload(_ payload: [String: Any], requestBytes: Int, limit: Int) -> Int? {
        let onlyStrings = payload.values.allSatisfy { part in (part as? [String: Any])?.values.allSatisfy { $0 is String } ?? false }
        if onlyStrings && requestBytes <= limit / 6 { return nil }
        let size = (try? JSONSerialization.data(withJSONObject: payload).count) ?? 0
        return size > limit ? size : nil
    }

    func inspection() throws -> Response {
        let items: [[String: Any]] = received.map { item in
            var entry: [String: Any] = ["status": item.status, "at": item.at.timeIntervalSince1970, "validate_only": item.validateOnly]
            entry["request"] = try? JSONSerialization.jsonObject(with: item.body)
            return entry
        }
        return try json(["token_requests": tokenRequests, "requests": items], status: .ok)
    }

    /// Counts only, kept as messages arrive: cheap to poll during a load test however many
    /// messages there have been (a million-push benchmark polls it every few milliseconds, and
    /// counting then held the lock every send needs).
    func stats() throws -> Response {
        var body: [String: Any] = [:]
        state.withLock { state in
            var topics: [String: [String: Int]] = [:]
            for topic in Set(state.topicMembers.keys).union(state.topicMessages.keys) {
                topics[topic] = [
                    "members": state.topicMembers[topic]?.count ?? 0, "messages": state.topicMessages[topic] ?? 0,
                    "deliveries": state.topicDeliveries[topic] ?? 0,
                ]
            }
            body = [
                "delivered": state.delivered, "requests": state.received.count, "token_requests": state.tokenRequests, "topics": topics,
                "send_connections": state.sendConnections.count, "peak_sends_in_flight": state.peakSendsInFlight,
                "requests_by_http_version": state.requestsByHTTPVersion,
                // Messages (by token or topic, and the notification id in their data) accepted
                // more than once: what a fault bench counts as sent twice.
                "accepted_twice": state.acceptedTwice,
                // When each of those was first accepted (seconds since 1970, at most 10 000), so
                // a bench can tell a push sent again after a process was killed between the
                // provider's accept and its record (at-least-once) from one sent twice otherwise.
                "accepted_twice_first_at": state.acceptedTwiceFirstAt,
            ]
        }
        return try json(body, status: .ok)
    }

    func json(_ value: Any, status: HTTPResponse.Status) throws -> Response {
        let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])
        return Response(status: status, headers: [.contentType: "application/json; charset=UTF-8"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    private func oauthError(_ error: String, _ description: String) -> Response {
        (try? json(["error": error, "error_description": description], status: .badRequest)) ?? Response(status: .badRequest)
    }

    /// An error in FCM v1's shape, with an `FcmError` detail when `errorCode` is given.
    func fcmError(_ code: Int, _ status: String, _ message: String, errorCode: String?) -> Response {
        var error: [String: Any] = ["code": code, "message": message, "status": status]
        if let errorCode {
            error["details"] = [["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode]]
        }
        return (try? json(["error": error], status: .init(code: code))) ?? Response(status: .init(code: code))
    }

    /// A payload fault: 400 INVALID_ARGUMENT with a `google.rpc.BadRequest` field violation.
    private func badRequest(_ field: String, _ description: String) -> Response {
        let error: [String: Any] = [
            "code": 400, "message": "Invalid JSON payload received. \(description)", "status": "INVALID_ARGUMENT",
            "details": [
                ["@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [["field": field, "description": description]]],
                ["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "INVALID_ARGUMENT"],
            ],
        ]
        return (try? json(["error": error], status: .badRequest)) ?? Response(status: .badRequest)
    }
}
