import Foundation

/// The benchmark's rows: printed as a table, written as JSON.
struct Report {
    struct Row: Encodable {
        var name: String
        var value: Double
        var unit: String
        var ratio: Double?
        var target: String?
        var met: Bool?
    }

    var concurrency: Int
    var rows: [Row] = []

    mutating func add(_ name: String, _ value: Double, unit: String, ratio: Double? = nil, target: String? = nil, met: Bool? = nil) {
        rows.append(Row(name: name, value: value, unit: unit, ratio: ratio, target: target, met: met))
    }

    func table() -> String {
        let width = rows.map(\.name.count).max() ?? 10
        var lines = ["herald-bench (\(concurrency) connections, \(ProcessInfo.processInfo.activeProcessorCount) cores)", ""]
        lines.append("\("measure".padding(toLength: width, withPad: " ", startingAt: 0))  \("value".leftPadded(12))  ratio   target")
        for row in rows {
            let value = row.value >= 100 ? String(format: "%.0f", row.value) : String(format: "%.2f", row.value)
            let ratio = row.ratio.map { String(format: "%.2f", $0) } ?? ""
            let verdict = row.met.map { $0 ? "met" : "MISSED" } ?? ""
            let name = row.name.padding(toLength: width, withPad: " ", startingAt: 0)
            let target = row.target.map { "\($0) \(verdict)" } ?? ""
            lines.append("\(name)  \((value + " " + row.unit).leftPadded(12))  \(ratio.padding(toLength: 6, withPad: " ", startingAt: 0))  \(target)")
        }
        return lines.joined(separator: "\n")
    }

    func write(to path: String) throws {
        struct Document: Encodable {
            var date: String
            var cores: Int
            var concurrency: Int
            var rows: [Row]
        }
        let url = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let document = Document(
            date: ISO8601DateFormatter().string(from: Date()), cores: ProcessInfo.processInfo.activeProcessorCount, concurrency: concurrency, rows: rows
        )
        try encoder.encode(document).write(to: url)
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
