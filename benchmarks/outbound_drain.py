#!/usr/bin/env python3
"""The pieces of benchmarks/outbound_drain (issue 34: queued messages drain at the provider's
pace, none lost and none sent twice across a kill -9). Stdlib only.

  outbound_drain.py graph PORT LOG GATE WEBHOOK_URL APP_SECRET LATENCY_MS
      Stands in for the Graph API: each send to /{version}/{number}/messages is held until the
      file GATE exists, logged (carecrm's id from biz_opaque_callback_data, one line a send, as
      soon as it is read: the provider has it then, whatever happens to the answer), answered
      after LATENCY_MS with a new wamid, and reported as Meta does: a signed status webhook
      ("sent", with the same biz_opaque_callback_data, BENCH_REPORT_DELAY seconds after the send:
      2) to WEBHOOK_URL, posted again every
      half second until carecrm answers 200 (it may be down).
  outbound_drain.py prepare HOST:PORT EMAIL PASSWORD GRAPH_URL PHONE_NUMBER_ID APP_SECRET N FILE
      A WhatsApp channel on the stand-in, and N conversations opened by signed inbound messages
      of N numbers; their ids go to FILE. Prints BENCH_TOKEN=..., BENCH_CHANNEL=...
  outbound_drain.py queue HOST:PORT TOKEN FILE COUNT
      COUNT messages queued over the conversations of FILE (8 connections); prints how many
      were accepted (201).
"""
import hashlib
import hmac
import http.client
import http.server
import json
import os
import queue
import socket
import sys
import threading
import time
import urllib.parse

from prepare import call


def signed(app_secret, raw: bytes) -> str:
    """X-Hub-Signature-256 of a webhook body, as Meta signs it."""
    return "sha256=" + hmac.new(app_secret.encode(), raw, hashlib.sha256).hexdigest()


def graph(port, log_path, gate, webhook_url, app_secret, latency_ms):
    reports: queue.Queue = queue.Queue()
    log = open(log_path, "a", buffering=1)
    lock = threading.Lock()
    counter = [0]
    target = urllib.parse.urlsplit(webhook_url)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            # http.server writes the headers and the body apart: with Nagle's algorithm on, the
            # body waits for the peer's delayed ACK of the headers (about 40 ms a send), which
            # is this stand-in's cost, not the provider's nor carecrm's.
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            ref = json.loads(body).get("biz_opaque_callback_data", "")
            while not os.path.exists(gate):
                time.sleep(0.05)
            with lock:
                counter[0] += 1
                wamid = f"wamid.{ref}.{counter[0]}"
                log.write(ref + "\n")
            reports.put((ref, wamid, time.monotonic() + REPORT_DELAY))
            time.sleep(latency_ms / 1000)
            out = json.dumps({"messaging_product": "whatsapp",
                              "messages": [{"id": wamid}]}).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
            except OSError:
                pass  # carecrm is gone: the provider has the message all the same

    def reporter():
        carry = []
        while True:
            batch = [carry.pop() if carry else reports.get()]
            time.sleep(max(0.0, batch[0][2] - time.monotonic()))
            while len(batch) < 50:  # and those due by now
                try:
                    item = reports.get_nowait()
                except queue.Empty:
                    break
                if item[2] > time.monotonic():
                    carry.append(item)
                    break
                batch.append(item)
            statuses = [{"id": wamid, "status": "sent", "timestamp": str(int(time.time())),
                         "recipient_id": "0", "biz_opaque_callback_data": ref}
                        for ref, wamid, _ in batch]
            raw = json.dumps({"object": "whatsapp_business_account", "entry": [{
                "id": "WABA", "changes": [{"field": "messages", "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {"display_phone_number": "0",
                                 "phone_number_id": PHONE_NUMBER_ID},
                    "statuses": statuses}}]}]}).encode()
            signature = signed(app_secret, raw)
            while True:
                try:
                    conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
                    conn.request("POST", target.path, raw,
                                 {"Content-Type": "application/json",
                                  "X-Hub-Signature-256": signature})
                    if conn.getresponse().status == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.5)

    threading.Thread(target=reporter, daemon=True).start()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


def prepare(api, email, password, graph_url, number, app_secret, n, path):
    host, port = api.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    token = call(conn, "POST", "/api/v1/auth/login", {"email": email, "password": password})[
        "access_token"]
    ch = call(conn, "POST", "/api/v1/channels",
              {"name": "WhatsApp", "type": "whatsapp",
               "config": {"phone_number_id": number, "access_token": "EAAG-bench",
                          "app_secret": app_secret, "verify_token": "bench-verify",
                          "api_base_url": graph_url}}, token)
    conversations = []
    for i in range(n):
        wa_id = str(5511900000000 + i)
        raw = json.dumps({"object": "whatsapp_business_account", "entry": [{
            "id": "WABA", "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "0", "phone_number_id": number},
                "contacts": [{"profile": {"name": f"Patient {i}"}, "wa_id": wa_id}],
                "messages": [{"from": wa_id, "id": f"wamid.in.{i}",
                              "timestamp": str(int(time.time())), "type": "text",
                              "text": {"body": "Oi"}}]}}]}]}).encode()
        signature = signed(app_secret, raw)
        conn.request("POST", f"/api/v1/channels/{ch['id']}/whatsapp/webhook", raw,
                     {"Content-Type": "application/json", "X-Hub-Signature-256": signature})
        resp = conn.getresponse()
        ack = json.loads(resp.read())
        if resp.status != 200:
            sys.exit(f"inbound {i}: {resp.status} {ack}")
        conversations.append(ack["messages"][0]["conversation_id"])
    with open(path, "w") as f:
        f.write("\n".join(str(c) for c in conversations) + "\n")
    print(f"BENCH_TOKEN={token}")
    print(f"BENCH_CHANNEL={ch['id']}")


def queue_messages(api, token, path, count):
    host, port = api.split(":")
    conversations = [int(x) for x in open(path).read().split()]
    accepted = [0]
    lock = threading.Lock()

    def worker(k):
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        ok = 0
        for i in range(k, count, 8):
            body = json.dumps({"text": f"Lembrete {i}: sua consulta é amanhã."})
            conn.request("POST", f"/api/v1/conversations/{conversations[i % len(conversations)]}"
                         "/messages", body, {"Content-Type": "application/json",
                                             "Authorization": f"Bearer {token}"})
            resp = conn.getresponse()
            resp.read()
            ok += resp.status == 201
        with lock:
            accepted[0] += ok

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(accepted[0])


PHONE_NUMBER_ID = os.environ.get("BENCH_PHONE_NUMBER_ID", "1069001")
# Meta's status webhooks come a second or two after the send's answer.
REPORT_DELAY = float(os.environ.get("BENCH_REPORT_DELAY", "2"))

if __name__ == "__main__":
    what = sys.argv[1]
    if what == "graph":
        graph(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6],
              float(sys.argv[7]))
    elif what == "prepare":
        prepare(*sys.argv[2:8], int(sys.argv[8]), sys.argv[9])
    elif what == "queue":
        queue_messages(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        sys.exit(f"unknown step {what}")
