import HeraldAPNsSink
import HeraldConsoleSink
// The composition root for sinks: the one file of Herald's own code that names sink modules.
// A new built-in sink is its folder under Plugins/, a target in Package.swift, and one entry
// in the list below.
public import HeraldCore
import HeraldFCMSink
import HeraldFeedSink
import HeraldHistorySink
import HeraldWebPushSink
import HeraldWebhookSink

extension SinkFactory {
    /// Every sink type Herald ships. An operator's own package passes
    /// `SinkFactory.builtIn + [.mySink]` to ``HeraldServer/start(_:factories:extraSinks:logger:)``.
    public static let builtIn: [SinkFactory] = [.history, .feed, .console, .fcm, .apns, .webhook, .webpush]
}
