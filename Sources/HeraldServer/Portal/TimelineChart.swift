import Foundation
import HeraldCore

/// A sink's last hour as an SVG drawn on the server (no script library): delivered, retried and
/// failed deliveries per minute, stacked, over the periods its circuit was open, so an operator
/// sees a fault and its recovery at a glance.
enum TimelineChart {
    static let width = 720
    static let height = 150
    private static let left = 44.0
    private static let right = 712.0
    private static let top = 12.0
    private static let bottom = 112.0

    static func svg(sink: String, minutes: [DeliveryTimeline.Minute], changes: [DeliveryTimeline.CircuitChange], now: Date) -> String {
        let end = now
        let start = end.addingTimeInterval(-Double(DeliveryTimeline.minutes * 60))
        let slot = (right - left) / Double(DeliveryTimeline.minutes)
        func x(_ date: Date) -> Double {
            left + (right - left) * min(max(date.timeIntervalSince(start) / end.timeIntervalSince(start), 0), 1)
        }
        let peak = max(1, minutes.map { $0.delivered + $0.retried + $0.failed }.max() ?? 1)
        func height(_ count: Int) -> Double { (bottom - top) * Double(count) / Double(peak) }
        var parts: [String] = []
        parts.append(
            ##"<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \##(width) \##(height)" width="\##(width)" height="\##(height)" role="img" aria-labelledby="timeline-\##(escape(sink))-title">"##
        )
        parts.append(##"<title id="timeline-\##(escape(sink))-title">Deliveries of \##(escape(sink)) per minute over the last hour</title>"##)
        // The circuit's open periods, behind the bars.
        var openSince: DeliveryTimeline.CircuitChange?
        for change in changes + [DeliveryTimeline.CircuitChange(at: end, opened: false, reason: nil)] {
            if change.opened {
                if openSince == nil { openSince = change }
            } else if let opened = openSince {
                let from = x(opened.at)
                let to = max(x(change.at), from + 1)
                parts.append(
                    ##"<rect class="circuit-open" x="\##(format(from))" y="\##(format(top))" width="\##(format(to - from))" height="\##(format(bottom - top))" fill="#c62828" fill-opacity="0.12"><title>circuit open from \##(Timestamp.format(opened.at))\##(opened.reason.map { ": " + escape($0) } ?? "")</title></rect>"##
                )
                openSince = nil
            }
        }
        for change in changes where change.at >= start {
            let at = format(x(change.at))
            parts.append(
                ##"<line class="circuit-\##(change.opened ? "opened" : "closed")" x1="\##(at)" x2="\##(at)" y1="\##(format(top))" y2="\##(format(bottom))" stroke="\##(change.opened ? "#c62828" : "#2e7d32")" stroke-dasharray="3 2"/>"##
            )
        }
        for minute in minutes {
            let barLeft = format(x(minute.start) + 1)
            let barWidth = format(max(slot - 2, 1))
            var y = bottom
            for (count, color, label) in [
                (minute.delivered, "#2e7d32", "delivered"), (minute.retried, "#f9a825", "retried"), (minute.failed, "#c62828", "failed"),
            ]
            where count > 0 {
                let h = height(count)
                y -= h
                parts.append(
                    ##"<rect class="\##(label)" x="\##(barLeft)" y="\##(format(y))" width="\##(barWidth)" height="\##(format(h))" fill="\##(color)"><title>\##(Timestamp.format(minute.start)): \##(count) \##(label)</title></rect>"##
                )
            }
        }
        // Axes and legend.
        parts.append(##"<line x1="\##(format(left))" x2="\##(format(right))" y1="\##(format(bottom))" y2="\##(format(bottom))" stroke="#555"/>"##)
        parts.append(##"<text x="\##(format(left))" y="\##(format(bottom + 14))" font-size="11" fill="#555">−60 min</text>"##)
        parts.append(##"<text x="\##(format(right))" y="\##(format(bottom + 14))" font-size="11" fill="#555" text-anchor="end">now</text>"##)
        parts.append(##"<text x="\##(format(left - 4))" y="\##(format(top + 10))" font-size="11" fill="#555" text-anchor="end">\##(peak)</text>"##)
        parts.append(##"<text x="\##(format(left - 4))" y="\##(format(bottom))" font-size="11" fill="#555" text-anchor="end">0</text>"##)
        var legendX = left
        for (label, color) in [("delivered", "#2e7d32"), ("retried", "#f9a825"), ("failed", "#c62828"), ("circuit open", "#f4c7c7")] {
            parts.append(##"<rect x="\##(format(legendX))" y="\##(format(bottom + 24))" width="10" height="10" fill="\##(color)"/>"##)
            parts.append(##"<text x="\##(format(legendX + 14))" y="\##(format(bottom + 33))" font-size="11" fill="#333">\##(label)</text>"##)
            legendX += 100
        }
        parts.append("</svg>")
        return parts.joined(separator: "\n")
    }

    private static func format(_ value: Double) -> String {
        String(format: "%.1f", value.isFinite ? value : 0)
    }

    /// Text for an SVG element or attribute: sink names and circuit reasons come from
    /// configuration and providers.
    static func escape(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
