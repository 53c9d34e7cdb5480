import HeraldCore
import Hummingbird

/// `limit` (1-200, default 50) and `before` (a cursor from an earlier page) of the paged lists.
package struct PageQuery {
    package static let defaultLimit = 50
    package static let maxLimit = 200

    package var limit = PageQuery.defaultLimit
    package var before: String?

    package init(_ request: Request) throws {
        if let text = try request.queryText("limit") {
            guard let value = Int(text), (1...Self.maxLimit).contains(value) else {
                throw Request.invalidQuery("limit", "must be an integer from 1 to \(Self.maxLimit)")
            }
            limit = value
        }
        before = try request.nonEmptyQueryText("before")
    }
}
