import Foundation
import Testing

@testable import HeraldCore
@testable import HeraldServer

/// The status page's hour of each sink: bars per minute over the circuit's open periods, drawn
/// on the server; text from configuration and providers never becomes markup.
@Suite struct TimelineChartTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aFaultAndItsRecoveryAreDrawn() {
        let minutes = [
            DeliveryTimeline.Minute(start: now.addingTimeInterval(-600), delivered: 40),
            DeliveryTimeline.Minute(start: now.addingTimeInterval(-540), retried: 30, failed: 2),
            DeliveryTimeline.Minute(start: now.addingTimeInterval(-120), delivered: 55),
        ]
        let changes = [
            DeliveryTimeline.CircuitChange(at: now.addingTimeInterval(-530), opened: true, reason: "0 of its last 20 deliveries got through <script>"),
            DeliveryTimeline.CircuitChange(at: now.addingTimeInterval(-300), opened: false, reason: nil),
        ]
        let svg = TimelineChart.svg(sink: "webhook:<b>", minutes: minutes, changes: changes, now: now)
        #expect(svg.hasPrefix("<svg class=\"timeline\""))
        #expect(svg.components(separatedBy: "class=\"delivered\"").count - 1 == 2)
        #expect(svg.components(separatedBy: "class=\"retried\"").count - 1 == 1 && svg.contains("class=\"failed\""))
        #expect(svg.components(separatedBy: "class=\"circuit-open\"").count - 1 == 1, "one open period")
        #expect(svg.contains("circuit-opened") && svg.contains("circuit-closed"))
        #expect(!svg.contains("<script>") && !svg.contains("<b>") && svg.contains("&lt;script&gt;"), "escaped")
        #expect(svg.contains(">55<"), "the peak labels the axis")
    }

    /// A circuit open for the whole hour, and still open, shades the whole hour.
    @Test func aCircuitStillOpenReachesNow() {
        let changes = [DeliveryTimeline.CircuitChange(at: now.addingTimeInterval(-7_200), opened: true, reason: "down")]
        let svg = TimelineChart.svg(sink: "fcm", minutes: [], changes: changes, now: now)
        #expect(svg.contains("class=\"circuit-open\" x=\"44.0\""), "from the chart's start")
        #expect(svg.contains("width=\"668.0\""), "to now")
    }

    @Test func theTimelineKeepsAnHourPerSinkInOrder() {
        let timeline = DeliveryTimeline()
        timeline.record(sink: "fcm", outcome: "delivered", at: now.addingTimeInterval(-4_000))
        timeline.record(sink: "fcm", outcome: "retry", at: now.addingTimeInterval(-30))
        // A late answer for the minute before.
        timeline.record(sink: "fcm", outcome: "delivered", at: now)
        timeline.record(sink: "fcm", outcome: "dead", at: now.addingTimeInterval(-61))
        let history = timeline.history(of: "fcm", now: now)
        #expect(history.minutes.map(\.start) == history.minutes.map(\.start).sorted())
        #expect(history.minutes.reduce(0) { $0 + $1.delivered } == 1, "the delivery over an hour ago is gone")
        #expect(history.minutes.reduce(0) { $0 + $1.retried } == 1 && history.minutes.reduce(0) { $0 + $1.failed } == 1)
        #expect(timeline.history(of: "apns", now: now).minutes.isEmpty)
    }
}
