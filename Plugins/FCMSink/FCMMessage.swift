import Foundation
public import HeraldCore

/// The body of `POST /v1/projects/{project}/messages:send`.
public struct FCMSendRequest: Codable, Sendable, Equatable {
    /// The message to send.
    public var message: FCMMessage
    /// FCM's dry run: validated, never delivered.
    public var validateOnly: Bool?

    enum CodingKeys: String, CodingKey {
        case message
        case validateOnly = "validate_only"
    }
}

/// One FCM HTTP v1 message, with exactly the fields Herald uses.
public struct FCMMessage: Codable, Sendable, Equatable {
    /// What a visible notification shows, on both platforms.
    public struct Notification: Codable, Sendable, Equatable {
        /// Its title.
        public var title: String
        /// Its text.
        public var body: String
    }

    /// Android's part of the message.
    public struct Android: Codable, Sendable, Equatable {
        /// What an Android device does with a notification message when it shows it.
        public struct Notification: Codable, Sendable, Equatable {
            /// The sound to play (`default`).
            public var sound: String?
            /// The count on the app's icon (the user's badge).
            public var notificationCount: Int?

            /// Android's notification options.
            public init(sound: String? = nil, notificationCount: Int? = nil) {
                self.sound = sound
                self.notificationCount = notificationCount
            }

            enum CodingKeys: String, CodingKey {
                case sound
                case notificationCount = "notification_count"
            }
        }

        /// `high` wakes the device at once.
        public var priority: String
        /// Messages with the same key replace each other while waiting.
        public var collapseKey: String?
        /// How a visible notification is shown.
        public var notification: Notification?

        enum CodingKeys: String, CodingKey {
            case priority
            case collapseKey = "collapse_key"
            case notification
        }
    }

    /// iOS's part of the message, passed on to APNs.
    public struct APNs: Codable, Sendable, Equatable {
        /// The APNs payload.
        public struct Payload: Codable, Sendable, Equatable {
            /// Apple's dictionary.
            public var aps: APS
        }

        /// Apple's `aps` dictionary.
        public struct APS: Codable, Sendable, Equatable {
            /// What a visible notification shows; absent for a background push.
            public var alert: Notification?
            /// The sound to play.
            public var sound: String?
            /// 1 for a background push.
            public var contentAvailable: Int?
            /// The count on the app's icon (the user's badge).
            public var badge: Int?

            /// An `aps` dictionary.
            public init(alert: Notification? = nil, sound: String? = nil, contentAvailable: Int? = nil, badge: Int? = nil) {
                self.alert = alert
                self.sound = sound
                self.contentAvailable = contentAvailable
                self.badge = badge
            }

            enum CodingKeys: String, CodingKey {
                case alert, sound, badge
                case contentAvailable = "content-available"
            }
        }

        /// APNs headers (`apns-priority`, `apns-push-type`, `apns-collapse-id`).
        public var headers: [String: String]?
        /// The payload.
        public var payload: Payload
    }

    /// The device's registration token, for a message to one device.
    public var token: String?
    /// The FCM topic, for a topic message.
    public var topic: String?
    /// The visible notification; absent for silent data.
    public var notification: Notification?
    /// The data map apps read (every value a string).
    public var data: [String: String]?
    /// Android's options.
    public var android: Android?
    /// iOS's options.
    public var apns: APNs?
}

extension FCMSendRequest {
    /// The request as JSON, written by HeraldCore's `JSONWriter`: through `JSONEncoder` it was about 5 % of
    /// the server's CPU under load. The `Codable` shape and this text agree (a test decodes one
    /// into the other).
    public var json: Data {
        var writer = JSONWriter()
        writer.object { body in
            body.key("message")
            message.write(to: &body)
            if let validateOnly {
                body.key("validate_only")
                body.bool(validateOnly)
            }
        }
        return Data(writer.bytes)
    }
}

extension FCMMessage {
    func write(to writer: inout JSONWriter) {
        writer.object { m in
            m.member("token", ifPresent: token)
            m.member("topic", ifPresent: topic)
            writeNotification(to: &m)
            writeData(to: &m)
            if let android {
                m.key("android")
                m.object { a in
                    a.member("priority", android.priority)
                    a.member("collapse_key", ifPresent: android.collapseKey)
                    if let notification = android.notification {
                        a.key("notification")
                        a.object { shown in
                            shown.member("sound", ifPresent: notification.sound)
                            if let count = notification.notificationCount {
                                shown.key("notification_count")
                                shown.integer(count)
                            }
                        }
                    }
                }
            }
            if let apns {
                m.key("apns")
                m.object { a in
                    if let headers = apns.headers {
                        a.key("headers")
                        a.stringMap(headers)
                    }
                    a.key("payload")
                    a.object { payload in
                        payload.key("aps")
                        payload.object { aps in
                            if let alert = apns.payload.aps.alert {
                                aps.key("alert")
                                Self.write(alert, to: &aps)
                            }
                            aps.member("sound", ifPresent: apns.payload.aps.sound)
                            if let available = apns.payload.aps.contentAvailable {
                                aps.key("content-available")
                                aps.integer(available)
                            }
                            if let badge = apns.payload.aps.badge {
                                aps.key("badge")
                                aps.integer(badge)
                            }
                        }
                    }
                }
            }
        }
    }

    /// `"notification":{…}` when there is one: part of the payload FCM's limits count.
    func writeNotification(to writer: inout JSONWriter) {
        guard let notification else { return }
        writer.key("notification")
        Self.write(notification, to: &writer)
    }

    /// `"data":{…}` when there is a map: the other part FCM's limits count.
    func writeData(to writer: inout JSONWriter) {
        guard let data else { return }
        writer.key("data")
        writer.stringMap(data)
    }

    static func write(_ notification: Notification, to writer: inout JSONWriter) {
        writer.object {
            $0.member("title", notification.title)
            $0.member("body", notification.body)
        }
    }
}

/// A Message Hub message as sent to an FCM topic (docs/topics.md): one or two components.
public struct FCMTopicMessage: Sendable, Equatable {
    /// The message's id (24 hex).
    public var msiKey: String
    /// The subject's topic, which is the FCM topic.
    public var topicKey: String
    /// Alert (notification and data) or information (data only).
    public var distribution: Distribution
    /// The notification's title.
    public var title: String
    /// The notification's text.
    public var desc: String
    /// The message's full text, in the data.
    public var message: String
    /// Milliseconds since the epoch.
    public var timestamp: Int64

    /// A topic message as the Message Hub route builds it.
    public init(msiKey: String, topicKey: String, distribution: Distribution, title: String, desc: String, message: String, timestamp: Int64) {
        self.msiKey = msiKey
        self.topicKey = topicKey
        self.distribution = distribution
        self.title = title
        self.desc = desc
        self.message = message
        self.timestamp = timestamp
    }
}

/// Maps Herald's notifications onto FCM messages and checks FCM's limits.
public enum FCMMessageBuilder {
    /// FCM's payload limits, in bytes of the `notification` and `data` parts.
    public static let tokenPayloadLimit = 4096
    /// The smaller limit FCM documents for topic messages.
    public static let topicPayloadLimit = 2048
    /// Keys Herald writes into `data` itself.
    public static let heraldDataKeys: Set<String> = ["id", "timestamp", "type", "url", "title", "body"]

    /// One message for one device: an alert shows a notification; information is silent data.
    public static func tokenMessage(for delivery: Delivery, token: String, timestamps: TimestampStyle = .pong) -> FCMMessage {
        let n = delivery.notification
        var data = n.data
        data["id"] = n.id.hex
        data["timestamp"] = timestamps.format(n.timestamp)
        data["type"] = n.type
        if let url = n.url { data["url"] = url }
        var android = FCMMessage.Android(priority: "high", collapseKey: n.collapseKey)
        switch delivery.distribution {
        case .alert:
            let content = FCMMessage.Notification(title: n.title, body: n.body)
            var headers = ["apns-priority": "10"]
            if let collapse = n.collapseKey { headers["apns-collapse-id"] = collapse }
            // The user's badge, when a module keeps one, on both platforms' icons.
            if let badge = delivery.badge { android.notification = .init(notificationCount: badge) }
            return FCMMessage(
                token: token, notification: content, data: data, android: android,
                apns: .init(headers: headers, payload: .init(aps: .init(alert: content, sound: "default", badge: delivery.badge)))
            )
        case .information:
            // Silent: the app stores it in-app, so the content travels as data.
            data["title"] = n.title
            data["body"] = n.body
            return FCMMessage(token: token, data: data, android: android, apns: silentAPNs)
        }
    }

    /// The components of a topic send: an alert is (a) a visible notification plus (b) the
    /// data component; information is (b) only.
    public static func topicMessages(_ m: FCMTopicMessage) -> [FCMMessage] {
        m.distribution == .alert ? [topicNotification(m), topicData(m)] : [topicData(m)]
    }

    /// Component (a): the visible notification, `{title, body: desc}` plus `data {msi_key}`,
    /// with the Message Hub contract's `priority: high` and `sound: default` mapped onto both
    /// platforms, so it alerts at once: without them iOS shows it silently and Android may
    /// hold it back.
    public static func topicNotification(_ m: FCMTopicMessage) -> FCMMessage {
        let content = FCMMessage.Notification(title: m.title, body: m.desc)
        return FCMMessage(
            topic: m.topicKey, notification: content, data: ["msi_key": m.msiKey],
            android: .init(priority: "HIGH", notification: .init(sound: "default")),
            apns: .init(headers: ["apns-priority": "10"], payload: .init(aps: .init(alert: content, sound: "default")))
        )
    }

    /// Component (b): silent data with every field of the message.
    public static func topicData(_ m: FCMTopicMessage) -> FCMMessage {
        FCMMessage(
            topic: m.topicKey,
            data: [
                "msi_key": m.msiKey, "topic_key": m.topicKey, "dist": m.distribution == .alert ? "Alert" : "Information",
                "title": m.title, "desc": m.desc, "message": m.message, "timestamp": String(m.timestamp),
            ],
            android: .init(priority: "high"), apns: silentAPNs
        )
    }

    static let silentAPNs = FCMMessage.APNs(
        headers: ["apns-push-type": "background", "apns-priority": "5"], payload: .init(aps: .init(contentAvailable: 1))
    )

    /// Bytes of the `notification` and `data` parts, which FCM's limits apply to.
    /// The payload size when it could exceed `limit`, nil when it surely does not. Almost every
    /// message is far below the limits: bounded from its lengths, it is encoded only when the
    /// bound is too much (encoding every accept's probes was 6 % of an accept's CPU).
    static func payloadSize(_ message: FCMMessage, ifOver limit: Int) -> Int? {
        guard payloadUpperBound(message) > limit else { return nil }
        let size = payloadSize(message)
        return size > limit ? size : nil
    }

    /// At least the encoded size of `message`'s payload: six bytes per byte of every string
    /// (keys too), plus quotes, separators and the fixed keys.
    static func payloadUpperBound(_ message: FCMMessage) -> Int {
        var bound = 64
        if let notification = message.notification { bound += 6 * (notification.title.utf8.count + notification.body.utf8.count) + 48 }
        for (key, value) in message.data ?? [:] { bound += 6 * (key.utf8.count + value.utf8.count) + 8 }
        return bound
    }

    /// The size of `{"notification":…,"data":…}` as the sink writes them.
    public static func payloadSize(_ message: FCMMessage) -> Int {
        var writer = JSONWriter()
        writer.object { payload in
            message.writeNotification(to: &payload)
            message.writeData(to: &payload)
        }
        return writer.bytes.count
    }

    /// Refuses a notification FCM would refuse: reserved data keys, or a payload over 4096 bytes.
    public static func validate(_ notification: HeraldNotification) throws {
        for key in notification.data.keys.sorted() {
            let lower = key.lowercased()
            if lower == "from" || lower == "gcm" || lower.hasPrefix("google") || lower == "message_type" {
                throw HeraldError.invalidField("data.\(key)", "is reserved by FCM")
            }
            if heraldDataKeys.contains(key) {
                throw HeraldError.invalidField("data.\(key)", "is reserved: Herald sets \(heraldDataKeys.sorted().joined(separator: ", ")) itself")
            }
        }
        // Both shapes: information carries title and body as data as well.
        for distribution in Distribution.allCases {
            let probe = Delivery(id: 0, sink: "fcm", notification: notification, recipient: .init(userID: ""), distribution: distribution, attempt: 1)
            if let size = payloadSize(tokenMessage(for: probe, token: ""), ifOver: tokenPayloadLimit) {
                throw HeraldError(
                    .unprocessable, code: "payload_too_large_for_fcm",
                    "the push payload would be \(size) bytes; FCM allows \(tokenPayloadLimit) (shorten title, body or data)")
            }
        }
    }

    /// Refuses a topic message over FCM's 2048-byte topic limit.
    public static func validate(_ message: FCMTopicMessage) throws {
        for component in topicMessages(message) {
            if let size = payloadSize(component, ifOver: topicPayloadLimit) {
                throw HeraldError(
                    .unprocessable, code: "payload_too_large_for_fcm",
                    "the topic payload would be \(size) bytes; FCM allows \(topicPayloadLimit) for topic messages")
            }
        }
    }
}
