import HeraldCore
import Hummingbird

/// `limit` (1-200, default 50) and `before` (a cursor from an earlier page) of the paged lists.
struct PageQuery {
    static let defaultLimit = 50
    static let maxLimit = 200

    var limit = PageQuery.defaultLimit
    var before: String?

    init(_ request: Request) throws {
        if let text = try request.queryText("limit") {
            guard let value = Int(text), (1...Self.maxLimit).contains(value) else {
                throw Request.invalidQuery("limit", "must be an integer from 1 to \(Self.maxLimit)")
            }
            limit = value
        }
        before = try request.nonEmptyQueryText("before")
    }
}
