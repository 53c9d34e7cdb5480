import Foundation
import HeraldCore
import Logging
import ServiceLifecycle

/// Building the configured sinks and releasing them.
extension HeraldServer {
    /// Every factory's registration forms, in factory order; two claiming one field, or a form
    /// taking a field every registration has, is the sink author's mistake, refused at start.
    static func registrationForms(of factories: [SinkFactory]) throws -> [RegistrationForm] {
        let reserved: Set<String> = ["provider", "address", "app", "platform", "app_version", "region", "locale"]
        var forms: [RegistrationForm] = []
        var claimed: [String: String] = [:]
        for factory in factories.firstOfEachType {
            for form in factory.registrationForms {
                for field in [form.field] + form.options.map(\.field) {
                    if reserved.contains(field) || claimed[field].map({ $0 != factory.type }) == true {
                        throw HeraldError(
                            .unprocessable, code: "invalid_config",
                            "sink type '\(factory.type)' registers devices with the field '\(field)', which \(claimed[field].map { "sink type '\($0)'" } ?? "every registration") already uses"
                        )
                    }
                    claimed[field] = factory.type
                }
                forms.append(form)
            }
        }
        return forms
    }

    /// The built-in `history` and `feed` sinks, then every configured instance, each built by
    /// the factory of its type, with the channels the configuration sets for instances
    /// (``channelSetting(of:)``). When one cannot be built, those already built are shut down.
    static func buildSinks(
        _ configuration: HeraldConfiguration, factories: [SinkFactory], storage: any HeraldStorage, feedStore: any FeedStore, feed: FeedSnapshot,
        logger: Logger,
        metrics: HeraldMetrics
    ) async throws -> (sinks: [any NotificationSink], channels: [String: SinkChannel]) {
        let byType = Dictionary(uniqueKeysWithValues: factories.firstOfEachType.map { ($0.type, $0) })
        let always = ["history", "feed"].map { SinkInstance(name: $0, type: $0, settings: SinkSettings(name: $0, values: [:])) }
        var built: [any NotificationSink] = []
        var channels: [String: SinkChannel] = [:]
        do {
            for instance in always + configuration.sinks {
                guard let factory = byType[instance.type] else {
                    let known = byType.keys.sorted().joined(separator: ", ")
                    throw instance.settings.invalid("type", "'\(instance.type)' is not a sink type this server knows (known: \(known))")
                }
                let context = SinkContext(
                    name: instance.name, settings: instance.settings, history: storage, feedStore: feedStore, feed: feed, logger: logger, metrics: metrics,
                    timestamps: configuration.timestamps
                )
                let sink = try await factory.makeSink(context)
                built.append(sink)
                if let channel = try channelSetting(of: instance, over: sink.channel) { channels[sink.name] = channel }
            }
            let instances = configuration.sinks.map(\.name)
            if let check = configuration.unread, let file = check.file, let unread = check.firstSinkKey(among: instances) {
                throw HeraldConfiguration.invalid(unread, "in \(file) is not a setting of its sink's type (misspelt?)")
            }
            // A warning, not a refusal: the environment is shared with other programs.
            for name in configuration.unread?.environmentVariables(among: instances) ?? [] {
                logger.warning("\(name) is set, but no setting reads it (misspelt?): ignored")
            }
        } catch {
            await shutDown(built)
            throw error
        }
        return (built, channels)
    }

    /// `sinks.<name>.channel` and `sinks.<name>.user_facing` over the sink's own channel; nil
    /// when neither is set. History stays `in_app`: it is never suppressed.
    static func channelSetting(of instance: SinkInstance, over own: SinkChannel) throws -> SinkChannel? {
        let name = try instance.settings.string("channel")
        let userFacing = try instance.settings.bool("user_facing")
        guard name != nil || userFacing != nil else { return nil }
        if let name {
            guard SinkChannel.isValidName(name) else {
                throw instance.settings.invalid("channel", "must be 1-32 of a-z, 0-9 and '_', starting with a letter (push, chat, email, …)")
            }
            guard name != SinkChannel.inApp.name else {
                throw instance.settings.invalid("channel", "cannot be in_app: history and the live stream are the in-app channel")
            }
        }
        return SinkChannel(name ?? own.name, userFacing: userFacing ?? (name != nil ? true : own.userFacing))
    }

    /// Releases what sinks hold (their `Service` side) without serving: for servers that are
    /// built and never run, and for start-ups that fail half way.
    static func shutDown(_ sinks: [any NotificationSink]) async {
        let services = sinks.compactMap { $0 as? any Service }
        guard !services.isEmpty else { return }
        let group = ServiceGroup(services: services, logger: Logger(label: "herald.shutdown", factory: { _ in SwiftLogNoOpLogHandler() }))
        await group.triggerGracefulShutdown()
        try? await group.run()
    }
}
