// Verify a Herald webhook (Standard Webhooks signature) with Node's standard library.
// Usage as a script: node verify.mjs SECRET ID TIMESTAMP SIGNATURE BODY_FILE  (exit 0 when valid)
import { createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";

const TOLERANCE_SECONDS = 300;

function signingKey(secret) {
  return secret.startsWith("whsec_") ? Buffer.from(secret.slice(6), "base64") : Buffer.from(secret, "utf8");
}

export function verify(secret, headers, body, now = Date.now() / 1000) {
  const id = headers["webhook-id"];
  const timestamp = headers["webhook-timestamp"];
  if (Math.abs(now - Number(timestamp)) > TOLERANCE_SECONDS) return false;
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`, "utf8"), body]);
  const expected = createHmac("sha256", signingKey(secret)).update(signed).digest();
  return headers["webhook-signature"].split(" ").some((candidate) => {
    const [version, signature] = candidate.split(",");
    if (version !== "v1" || !signature) return false;
    const given = Buffer.from(signature, "base64");
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split("/").pop())) {
  const [secret, id, timestamp, signature, bodyFile] = process.argv.slice(2);
  const valid = verify(secret, { "webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": signature }, readFileSync(bodyFile));
  process.exit(valid ? 0 : 1);
}
