import HeraldCore

/// `{"history":[…],"next":…}` with items in exactly the shape apps parse; the card pull
/// writes its notifications as these items too.
package struct HistoryResponse: Encodable {
    package struct Item: Encodable {
        struct Content: Encodable {
            var title: String
            var body: String
        }
        struct Data: Encodable {
            var id: String
            var timestamp: String
            var type: String
            var url: Nullable<String> // null stays null, never absent
        }
        var notification: Content
        var data: Data
        var read: Bool
        /// The inbox's states (docs/inbox.md), written only when a read names a `state`: without
        /// one, an item is exactly as Pong apps parse it.
        var states: States?
        struct States: Encodable {
            var seen: Bool
            var archived: Bool
            var snoozed_until: Nullable<String>
        }

        package init(_ item: HistoryItem, timestamps: TimestampStyle, states: Bool = false) {
            notification = .init(title: item.title, body: item.body)
            data = .init(id: item.notificationID.hex, timestamp: timestamps.format(item.timestamp), type: item.type, url: Nullable(item.url))
            read = item.read
            if states {
                self.states = States(seen: item.seen, archived: item.archived, snoozed_until: Nullable(item.snoozedUntil.map(timestamps.format)))
            }
        }
    }

    package var history: [Item]
    package var next: Nullable<String>

    package init(_ page: HistoryPage, timestamps: TimestampStyle, states: Bool = false) {
        history = page.items.map { Item($0, timestamps: timestamps, states: states) }
        next = Nullable(page.next)
    }

    /// The page as `JSONBody.encoder()` writes it (keys sorted, slashes unescaped), written
    /// directly: the encoder's boxed tree was a fifth of a history request's CPU.
    package var json: [UInt8] {
        var writer = JSONWriter(capacity: 64 + 256 * history.count)
        writer.object { page in
            page.key("history")
            page.array { list in
                for item in history { item.write(to: &list) }
            }
            page.key("next")
            if let next = next.value { page.string(next) } else { page.null() }
        }
        return writer.bytes
    }
}

extension HistoryResponse.Item {
    package func write(to writer: inout JSONWriter) {
        writer.object { item in
            if let states {
                item.key("archived")
                item.bool(states.archived)
            }
            item.key("data")
            item.object { fields in
                fields.member("id", data.id)
                fields.member("timestamp", data.timestamp)
                fields.member("type", data.type)
                fields.key("url")
                if let url = data.url.value { fields.string(url) } else { fields.null() }
            }
            item.key("notification")
            item.object { content in
                content.member("body", notification.body)
                content.member("title", notification.title)
            }
            item.key("read")
            item.bool(read)
            if let states {
                item.key("seen")
                item.bool(states.seen)
                item.key("snoozed_until")
                if let until = states.snoozed_until.value { item.string(until) } else { item.null() }
            }
        }
    }
}
