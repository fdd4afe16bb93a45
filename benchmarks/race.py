#!/usr/bin/env python3
"""64 clients race for the same 10 slots (issue 33): each of ROUNDS rounds takes 10 fresh slots
on one calendar, and 64 threads, released together, each book one of them (client i takes slot
i mod 10). Prints "<201s> <409s> <others>" summed over the rounds; exactly 10 a round may win.

  race.py HOST:PORT TOKEN SERVICE CALENDAR CONTACT BASE_EPOCH ROUNDS"""
import datetime as dt
import http.client
import json
import sys
import threading

host, port = sys.argv[1].split(":")
token, service, calendar, contact = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
base, rounds = int(sys.argv[6]), int(sys.argv[7])
CLIENTS, SLOTS = 64, 10
counts = {"won": 0, "refused": 0, "other": 0}
lock = threading.Lock()


def client(i, barrier, starts):
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    body = json.dumps({"contact_id": int(contact), "service_id": int(service),
                       "calendar_id": int(calendar), "start": starts[i % SLOTS]})
    barrier.wait()
    conn.request("POST", "/api/v1/appointments", body=body, headers={
        "Content-Type": "application/json", "Authorization": "Bearer " + token})
    status = conn.getresponse().status
    with lock:
        counts["won" if status == 201 else "refused" if status == 409 else "other"] += 1


for r in range(rounds):
    first = base + r * SLOTS * 300
    starts = [dt.datetime.fromtimestamp(first + s * 300, dt.timezone.utc)
              .strftime("%Y-%m-%dT%H:%M:%SZ") for s in range(SLOTS)]
    barrier = threading.Barrier(CLIENTS)
    threads = [threading.Thread(target=client, args=(i, barrier, starts)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
print(counts["won"], counts["refused"], counts["other"])
