// An app imports HeraldKit alone: the generated types its answers are made of (HeraldAPI),
// the runtime's JSON containers and transports' protocol (OpenAPIRuntime), and the feed's
// versions and ranges (HeraldFeedRules) come with it.
@_exported public import HeraldAPI
@_exported public import HeraldFeedRules
@_exported public import OpenAPIRuntime
