public import HeraldCore

extension SinkFactory {
    /// `sinks.<name>.type: console` (or, for the instance named `console`, `enabled: true`):
    /// prints pushes instead of sending them. No other settings.
    public static let console = SinkFactory(type: "console") { context in
        ConsoleSink(name: context.name)
    }
}
