import Crypto
import Foundation
import HeraldCore

/// A pull's cache key: `v1.<user>.<cards clock>.<user seq>.<newest notification>.<digest>`.
///
/// The two counters say which card and pool changes the holder has (both only grow, so "what
/// changed since" is "numbered higher"); the notification id says which history items it has;
/// the digest covers what a pull always sends whole (settings, unread count), so that any
/// change to the answer changes the key and `If-None-Match` is exact. The user part keeps one
/// user's key from being read as another's.
package struct CardCacheKey: Equatable {
    var mark: CardMark
    var newestNotification: String?

    package static func text(userID: String, state: CardState) -> String {
        let digest = Hex.lowercase(SHA256.hash(data: Data("\(state.settingsJSON ?? "")|\(state.unread)".utf8)).prefix(6))
        return "v1.\(userTag(userID)).\(state.mark.cardsClock).\(state.mark.userSeq).\(state.newestNotification ?? "-").\(digest)"
    }

    /// The key's counters, or nil for a key that is malformed, of another version, or another user's.
    static func parse(_ text: String, userID: String) -> CardCacheKey? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0] == "v1", parts[1] == userTag(userID),
            let clock = Int64(parts[2]), let seq = Int64(parts[3]), clock >= 0, seq >= 0
        else { return nil }
        let notification = parts[4] == "-" ? nil : String(parts[4])
        if let notification, ObjectID(notification) == nil { return nil }
        return CardCacheKey(mark: CardMark(cardsClock: clock, userSeq: seq), newestNotification: notification)
    }

    private static func userTag(_ userID: String) -> String {
        Hex.lowercase(SHA256.hash(data: Data("herald-cards-user|\(userID)".utf8)).prefix(4))
    }
}
