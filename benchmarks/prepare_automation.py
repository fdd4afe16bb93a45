#!/usr/bin/env python3
"""Prepares the automation paths of benchmarks/automation through the API and prints shell
assignments. Stdlib only.

  prepare_automation.py HOST:PORT channels EMAIL PASSWORD SECRET
      an api channel with webhook secret SECRET: BENCH_CHANNEL=<id>
  prepare_automation.py HOST:PORT whatsapp EMAIL PASSWORD PHONE_NUMBER_ID APP_SECRET
      a WhatsApp channel of that number and app secret: BENCH_CHANNEL=<id>
  prepare_automation.py HOST:PORT subscription EMAIL PASSWORD URL
      a webhook subscription to contact.created at URL: BENCH_TOKEN=...
  prepare_automation.py HOST:PORT workflow EMAIL PASSWORD
      an active workflow contact.created -> add_tag: BENCH_TOKEN=...
"""
import sys

from prepare import call
import http.client


def main():
    host, port = sys.argv[1].split(":")
    what, email, password = sys.argv[2], sys.argv[3], sys.argv[4]
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    token = call(conn, "POST", "/api/v1/auth/login", {"email": email, "password": password})[
        "access_token"]
    if what == "channels":
        ch = call(conn, "POST", "/api/v1/channels",
                  {"name": "Portal", "type": "api", "webhook_secret": sys.argv[5]}, token)
        print(f"BENCH_CHANNEL={ch['id']}")
    elif what == "whatsapp":
        ch = call(conn, "POST", "/api/v1/channels",
                  {"name": "WhatsApp", "type": "whatsapp",
                   "config": {"phone_number_id": sys.argv[5], "access_token": "EAAG-bench",
                              "app_secret": sys.argv[6], "verify_token": "bench-verify"}}, token)
        print(f"BENCH_CHANNEL={ch['id']}")
    elif what == "subscription":
        call(conn, "POST", "/api/v1/webhook-subscriptions",
             {"url": sys.argv[5], "events": ["contact.created"]}, token)
    elif what == "workflow":
        call(conn, "POST", "/api/v1/workflows",
             {"name": "Tag new contacts", "trigger_type": "contact.created",
              "actions": [{"type": "add_tag", "params": {"tag": "welcomed"}}],
              "is_active": True}, token)
    else:
        sys.exit(f"unknown preparation {what}")
    print(f"BENCH_TOKEN={token}")


if __name__ == "__main__":
    main()
