#!/usr/bin/env python3
"""Verify a Herald webhook (Standard Webhooks signature), using only the standard library.

    verify(secret, headers, body) -> bool

`secret` is the sink's configured secret: `whsec_<base64>` is base64-decoded, anything else is
used as its UTF-8 bytes. Reject messages whose timestamp is more than 5 minutes away from now,
and remember `webhook-id`s you have processed: a retried delivery keeps its id.
"""
import base64
import hashlib
import hmac
import sys
import time

TOLERANCE_SECONDS = 300


def signing_key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        return base64.b64decode(secret[len("whsec_"):])
    return secret.encode("utf-8")


def verify(secret: str, headers: dict, body: bytes, now: float | None = None) -> bool:
    msg_id = headers["webhook-id"]
    timestamp = headers["webhook-timestamp"]
    now = time.time() if now is None else now
    if abs(now - int(timestamp)) > TOLERANCE_SECONDS:
        return False
    signed = f"{msg_id}.{timestamp}.".encode("utf-8") + body
    expected = base64.b64encode(hmac.new(signing_key(secret), signed, hashlib.sha256).digest()).decode()
    # The header may carry several space-separated signatures (during secret rotation).
    for candidate in headers["webhook-signature"].split(" "):
        version, _, signature = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(signature, expected):
            return True
    return False


if __name__ == "__main__":
    # verify.py SECRET ID TIMESTAMP SIGNATURE BODY_FILE -> exit 0 when valid
    secret, msg_id, timestamp, signature, body_file = sys.argv[1:6]
    with open(body_file, "rb") as f:
        body = f.read()
    headers = {"webhook-id": msg_id, "webhook-timestamp": timestamp, "webhook-signature": signature}
    sys.exit(0 if verify(secret, headers, body) else 1)
