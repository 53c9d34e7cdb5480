public import Foundation

/// An address Herald will send HTTP requests to, checked where it enters (a configuration
/// value, a Web Push subscription, a command-line option): AsyncHTTPClient hands a URL's port to
/// NIO as 16 bits, and a port past 65535 trapped the process when the request was made
/// (`https://93.184.216.34:99999/x` as a subscription endpoint crashed the server at its first
/// push, and again after each restart while the push was due).
public enum HTTPURL {
    /// What is wrong with `text` as an absolute URL of one of `schemes` with a host and a port
    /// in 1-65535 (or none), or nil.
    public static func problem(_ text: String, schemes: Set<String> = ["http", "https"]) -> String? {
        guard let url = URL(string: text) else { return "must be an absolute \(schemes.sorted().joined(separator: " or ")) URL" }
        return problem(url, schemes: schemes)
    }

    /// The authority of a URL written `http://` or `https://` (either case), as written: after
    /// the `//` up to the path, query or fragment, with what follows it; nil for another
    /// beginning. For checks on the text itself, before a parser has normalized it.
    public static func httpAuthority(of text: String) -> (authority: Substring, rest: Substring)? {
        let scheme = text.prefix(8).lowercased()
        let length = scheme.hasPrefix("https://") ? 8 : scheme.hasPrefix("http://") ? 7 : 0
        guard length > 0 else { return nil }
        let afterScheme = text.dropFirst(length)
        let end = afterScheme.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? afterScheme.endIndex
        return (afterScheme[..<end], afterScheme[end...])
    }

    /// ``problem(_:schemes:)`` for a URL already parsed (a Web Push subscription's, checked at
    /// every send).
    public static func problem(_ url: URL, schemes: Set<String> = ["http", "https"]) -> String? {
        guard let scheme = url.scheme?.lowercased(), schemes.contains(scheme) else {
            return "must be an absolute \(schemes.sorted().joined(separator: " or ")) URL"
        }
        guard let host = url.host, !host.isEmpty else { return "must name a host" }
        if let port = url.port, !(1...65_535).contains(port) { return "has port \(port); a port is 1-65535" }
        return nil
    }
}
