import ArgumentParser
import HeraldCore
import HeraldEmulatorSupport

/// The emulators' fault modes on the command line (docs/durability.md, "A provider that fails
/// part of the time").
struct FaultOptions: ParsableArguments {
    @Option(name: .customLong("fail-rate"), parsing: .unconditional, help: "Share of sends (0-1) answered 503.")
    var failRate = 0.0

    @Option(name: .customLong("rate-limit-rate"), parsing: .unconditional, help: "Share of sends (0-1) answered 429 with Retry-After.")
    var rateLimitRate = 0.0

    @Option(name: .customLong("reset-rate"), parsing: .unconditional, help: "Share of sends (0-1) whose connection is dropped with no answer.")
    var resetRate = 0.0

    @Option(parsing: .unconditional, help: "Seconds added before a send's answer (every send's, unless --latency-rate says otherwise).")
    var latency = 0.0

    @Option(
        name: .customLong("latency-rate"), parsing: .unconditional,
        help: "Share of sends (0-1) whose answer --latency delays: spikes rather than a slow provider.")
    var latencyRate = 1.0

    @Option(name: .customLong("outage-for"), parsing: .unconditional, help: "Seconds, from the first send, during which every send is dropped with no answer.")
    var outageFor = 0.0

    func validate() throws {
        for (name, rate) in [("--fail-rate", failRate), ("--rate-limit-rate", rateLimitRate), ("--reset-rate", resetRate), ("--latency-rate", latencyRate)] {
            guard rate.isFinite, (0...1).contains(rate) else { throw ValidationError("\(name) must be a share between 0 and 1") }
        }
        guard failRate + rateLimitRate + resetRate <= 1 else { throw ValidationError("--fail-rate, --rate-limit-rate and --reset-rate add up to more than 1") }
        guard latency.isFinite, (0...300).contains(latency) else { throw ValidationError("--latency must be 0-300 seconds") }
        guard outageFor.isFinite, (0...3_600).contains(outageFor) else { throw ValidationError("--outage-for must be 0-3600 seconds") }
    }

    var modes: FaultModes {
        var modes = FaultModes()
        (modes.failRate, modes.rateLimitRate, modes.resetRate) = (failRate, rateLimitRate, resetRate)
        modes.latency = .saturating(seconds: latency)
        modes.latencyRate = latencyRate
        modes.outageFor = .saturating(seconds: outageFor)
        return modes
    }
}
