public import HeraldCore

extension SinkFactory {
    /// `sinks.<name>.type: webhook`, delivering as the sink `webhook:<name>`: `url` (http or
    /// https, required), `secret` (at least 16 bytes, required), `match.types` and
    /// `match.distributions` (which notifications it gets; empty means all), `timeout` (seconds,
    /// default 10), `max_concurrency` (1-256, default 8), `forward_events` (default false).
    public static let webhook = SinkFactory(type: "webhook") { context in
        let settings = context.settings
        guard let url = try settings.string("url") else { throw settings.invalid("url", "is required for a webhook sink") }
        if let problem = HTTPURL.problem(url) { throw settings.invalid("url", problem) }
        guard let secret = try settings.string("secret", isSecret: true), secret.utf8.count >= 16 else {
            throw settings.invalid("secret", "is required and must be at least 16 bytes")
        }
        var configuration = WebhookSink.Configuration(name: context.name, url: url, secret: secret)
        configuration.types = try settings.stringList("match.types") ?? []
        configuration.distributions = try (settings.stringList("match.distributions") ?? []).map { text in
            guard let value = Distribution(rawValue: text.lowercased()) else {
                throw settings.invalid("match.distributions", "must list alert and/or information")
            }
            return value
        }
        let timeout = try settings.double("timeout") ?? 10
        guard timeout >= 0.1, timeout <= 300 else { throw settings.invalid("timeout", "must be a number of seconds, 0.1-300") }
        configuration.timeout = .saturating(seconds: timeout)
        configuration.maxConcurrency = try settings.int("max_concurrency", default: configuration.maxConcurrency, in: 1...256)
        configuration.forwardsEvents = try settings.bool("forward_events") ?? false
        return WebhookSink(configuration: configuration, logger: context.logger)
    }
}
