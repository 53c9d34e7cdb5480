import Foundation

/// A URL as Herald shows it to anyone (delivery errors readable by every backend key, logs, the
/// portal, `herald sinks`): scheme, host, port and path only. User info and the query, where
/// incoming-webhook URLs carry their credentials, never appear.
public enum RedactedURL {
    /// `url` as scheme, host, port and path, with `?…` where it had a query; text that is not a
    /// URL is shown as `(an unparseable URL)`, never whole.
    public static func describe(_ url: String) -> String {
        guard let components = URLComponents(string: url), let scheme = components.scheme, let host = components.host else {
            return "(an unparseable URL)"
        }
        let port = components.port.map { ":\($0)" } ?? ""
        let query = components.query == nil ? "" : "?…"
        return "\(scheme)://\(host)\(port)\(components.path)\(query)"
    }
}
