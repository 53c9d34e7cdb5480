import Crypto
import Foundation

/// What an app's backend does to vouch for a user: an HS256 user token with Herald's
/// `user_token_secret` (docs/security.md), here with the secret the test servers run with.
enum BackendProof {
    static func mint(userID: String, expires: Date, secret: String = HeraldProcess.userTokenSecret) -> String {
        func base64URL(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let header = base64URL(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let now = Int(Date().timeIntervalSince1970)
        let claims = base64URL(Data(#"{"sub":"\#(userID)","exp":\#(Int(expires.timeIntervalSince1970)),"iat":\#(now)}"#.utf8))
        let signature = HMAC<SHA256>.authenticationCode(for: Data("\(header).\(claims)".utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return "\(header).\(claims).\(base64URL(Data(signature)))"
    }
}
