import HeraldCore
import Hummingbird

/// `limit` (1-200, default 50) and `before` (a cursor from an earlier page) of the paged lists.
struct PageQuery {
    static let defaultLimit = 50
    static let maxLimit = 200

    var limit = PageQuery.defaultLimit
    var before: String?

    init(_ request: Request) throws {
        if let text = request.uri.queryParameters.get("limit") {
            guard let value = Int(text), (1...Self.maxLimit).contains(value) else {
                throw HeraldError(.badRequest, code: "invalid_query", "'limit' must be an integer from 1 to \(Self.maxLimit)")
            }
            limit = value
        }
        before = request.uri.queryParameters.get("before").flatMap { $0.isEmpty ? nil : $0 }
    }
}
