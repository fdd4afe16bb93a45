#!/usr/bin/env python3
"""Signed WhatsApp webhook bodies for benchmarks/whatsapp (wrk/whatsapp.lua): one line a
request, "<channel id>\\t<X-Hub-Signature-256>\\t<body>", each a text message with its own
wamid from one of SENDERS numbers spread over the channels.

  whatsapp_bodies.py OUT N SENDERS CHANNEL:PHONE_NUMBER_ID:APP_SECRET...
"""
import hashlib
import hmac
import json
import sys
import time


def main():
    out, n, senders = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    channels = [c.split(":", 2) for c in sys.argv[4:]]
    now = str(int(time.time()))
    with open(out, "w") as f:
        for i in range(n):
            s = i % senders
            cid, number, secret = channels[s % len(channels)]
            wa_id = str(5511900000000 + s)
            body = json.dumps({
                "object": "whatsapp_business_account",
                "entry": [{"id": "WABA", "changes": [{"field": "messages", "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {"display_phone_number": "15550001111",
                                 "phone_number_id": number},
                    "contacts": [{"profile": {"name": f"Sender {s}"}, "wa_id": wa_id}],
                    "messages": [{"from": wa_id, "id": f"wamid.bench.{i}", "timestamp": now,
                                  "type": "text",
                                  "text": {"body": f"Can I book a check-up? ({i})"}}]}}]}]},
                separators=(",", ":"))
            sig = "sha256=" + hmac.new(secret.encode(), body.encode(), hashlib.sha256).hexdigest()
            f.write(f"{cid}\t{sig}\t{body}\n")


if __name__ == "__main__":
    main()
