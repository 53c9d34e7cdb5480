import Foundation
public import HeraldCore
public import HeraldHTTP
public import Hummingbird

/// The Message Hub hierarchy paths, kept verbatim: channels, areas, subjects (openapi.yaml).
public struct TopicRoutes: Sendable {
    let store: any TopicStore
    let ids: ObjectIDGenerator
    /// `topics.public_read`: apps load the subject tree before anyone signs in.
    var publicRead = false

    public init(store: any TopicStore, ids: ObjectIDGenerator, publicRead: Bool = false) {
        (self.store, self.ids, self.publicRead) = (store, ids, publicRead)
    }

    static let maxNameLength = 200
    static let maxDescLength = 2_000

    public func register(on router: Router<HeraldRequestContext>, table: RouteTable) {
        table.add(router, .get, "/channel", listChannels)
        table.add(router, .post, "/channel", createChannel)
        table.add(router, .post, "/area/{channelID}", createArea)
        table.add(router, .put, "/area/{channelID}/{areaID}", updateArea)
        table.add(router, .delete, "/area/{channelID}/{areaID}", deleteArea)
        table.add(router, .post, "/subject/{channelID}/{areaID}", createSubject)
        table.add(router, .put, "/subject/{channelID}/{areaID}/{subjectID}", updateSubject)
        table.add(router, .delete, "/subject/{channelID}/{areaID}/{subjectID}", deleteSubject)
    }

    /// `{"name","desc","opt":{"level","distribution"}}`; which fields are required depends on the route.
    /// The portal's forms are read as this body too, so both refuse the same input alike.
    public struct Body: Decodable, Sendable {
        public struct Options: Decodable, Sendable {
            var level: String?
            var distribution: String?

            public init(level: String?, distribution: String?) {
                (self.level, self.distribution) = (level, distribution)
            }
        }
        var name: String?
        var desc: String?
        var opt: Options?

        public init(name: String?, desc: String?, opt: Options?) {
            (self.name, self.desc, self.opt) = (name, desc, opt)
        }

        static let fields: Set<String> = ["name", "desc", "opt"]

        /// The fields to store. - Throws: 422 naming the field that is missing, too long or not
        /// one of its values; `current` is the subject's options a partial `opt` keeps.
        public func fields(creating: Bool, withOptions: Bool, current: SubjectOptions? = nil) throws -> HierarchyFields {
            if creating, name == nil { throw HeraldError.missingField("name") }
            if let name {
                guard !name.trimmingCharacters(in: .whitespaces).isEmpty else { throw HeraldError.invalidField("name", "must not be empty") }
                guard name.unicodeScalars.count <= TopicRoutes.maxNameLength else {
                    throw HeraldError.invalidField("name", "must be at most \(TopicRoutes.maxNameLength) characters")
                }
            }
            if let desc, desc.unicodeScalars.count > TopicRoutes.maxDescLength {
                throw HeraldError.invalidField("desc", "must be at most \(TopicRoutes.maxDescLength) characters")
            }
            var options: SubjectOptions?
            if withOptions, creating || opt != nil {
                var value = current ?? SubjectOptions()
                if let level = opt?.level {
                    guard let parsed = SubscriptionLevel(rawValue: level) else {
                        throw HeraldError.invalidField("opt.level", "must be \"Forced\", \"Recommended\" or \"\"")
                    }
                    value.level = parsed
                }
                if let distribution = opt?.distribution {
                    guard let parsed = TopicDistribution(rawValue: distribution) else {
                        throw HeraldError.invalidField("opt.distribution", "must be \"Alert\" or \"Information\"")
                    }
                    value.distribution = parsed
                }
                options = value
            } else if opt != nil {
                throw HeraldError(.unprocessable, code: "unknown_field", "unknown field 'opt'; areas have name and desc")
            }
            if !creating, name == nil, desc == nil, options == nil {
                throw HeraldError(.unprocessable, code: "missing_field", "give at least one of: name, desc\(withOptions ? ", opt" : "")")
            }
            return HierarchyFields(name: name, desc: desc, opt: options)
        }
    }

    @Sendable func listChannels(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        guard context.caller != nil || publicRead else {
            throw HeraldError(.unauthorized, code: "missing_credentials", "send 'Authorization: Bearer <api key or user token>' (or set topics.public_read)")
        }
        return try JSONBody.response(try await store.channels())
    }

    @Sendable func createChannel(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        let fields = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: ["name", "desc"]).fields(
            creating: true, withOptions: false)
        let channel = Channel(id: ids.next(), name: fields.name ?? "", desc: fields.desc ?? "")
        try await store.createChannel(channel)
        return try JSONBody.response(channel, status: .created)
    }

    @Sendable func createArea(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        let channelID = try Self.id(context, "channelID", "channel")
        let fields = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: ["name", "desc"]).fields(
            creating: true, withOptions: false)
        let area = Area(id: ids.next(), name: fields.name ?? "", desc: fields.desc ?? "")
        guard try await store.createArea(area, channelID: channelID) else { throw HeraldError.notFound("channel '\(channelID)'") }
        return try JSONBody.response(area, status: .created)
    }

    @Sendable func updateArea(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        let channelID = try Self.id(context, "channelID", "channel")
        let areaID = try Self.id(context, "areaID", "area")
        let fields = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: ["name", "desc"]).fields(
            creating: false, withOptions: false)
        guard let area = try await store.updateArea(channelID: channelID, areaID: areaID, fields) else {
            throw HeraldError.notFound("area '\(areaID)' in channel '\(channelID)'")
        }
        return try JSONBody.response(area)
    }

    @Sendable func deleteArea(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        let channelID = try Self.id(context, "channelID", "channel")
        let areaID = try Self.id(context, "areaID", "area")
        guard try await store.deleteArea(channelID: channelID, areaID: areaID) else {
            throw HeraldError.notFound("area '\(areaID)' in channel '\(channelID)'")
        }
        return Response(status: .noContent)
    }

    @Sendable func createSubject(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        let channelID = try Self.id(context, "channelID", "channel")
        let areaID = try Self.id(context, "areaID", "area")
        let fields = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: Body.fields).fields(creating: true, withOptions: true)
        let subjectID = ids.next()
        let subject = Subject(
            id: subjectID, name: fields.name ?? "", desc: fields.desc ?? "",
            topicKey: TopicKey(channelID: channelID, areaID: areaID, subjectID: subjectID).description, opt: fields.opt ?? SubjectOptions()
        )
        guard try await store.createSubject(subject, channelID: channelID, areaID: areaID) else {
            throw HeraldError.notFound("area '\(areaID)' in channel '\(channelID)'")
        }
        return try JSONBody.response(subject, status: .created)
    }

    @Sendable func updateSubject(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        let key = TopicKey(
            channelID: try Self.id(context, "channelID", "channel"), areaID: try Self.id(context, "areaID", "area"),
            subjectID: try Self.id(context, "subjectID", "subject")
        )
        let body = try await JSONBody.decode(Body.self, from: request, context: context, knownFields: Body.fields)
        // PUT replaces the given fields: a partial opt keeps the subject's other option.
        let current = try await store.subject(topicKey: key.description)?.subject.opt
        let fields = try body.fields(creating: false, withOptions: true, current: current)
        guard let subject = try await store.updateSubject(channelID: key.channelID, areaID: key.areaID, subjectID: key.subjectID, fields) else {
            throw HeraldError.notFound("subject '\(key.subjectID)' in area '\(key.areaID)' of channel '\(key.channelID)'")
        }
        return try JSONBody.response(subject)
    }

    @Sendable func deleteSubject(_ request: Request, context: HeraldRequestContext) async throws -> Response {
        _ = try context.requireKey([.admin])
        let channelID = try Self.id(context, "channelID", "channel")
        let areaID = try Self.id(context, "areaID", "area")
        let subjectID = try Self.id(context, "subjectID", "subject")
        guard try await store.deleteSubject(channelID: channelID, areaID: areaID, subjectID: subjectID) else {
            throw HeraldError.notFound("subject '\(subjectID)' in area '\(areaID)' of channel '\(channelID)'")
        }
        return Response(status: .noContent)
    }

    /// A path id; one that is not 24-hex names nothing that exists, so it is a 404.
    static func id(_ context: HeraldRequestContext, _ parameter: String, _ what: String) throws -> ObjectID {
        let text = try context.parameters.require(parameter)
        guard let id = ObjectID(text) else { throw HeraldError.notFound("\(what) '\(text)'") }
        return id
    }
}
