#!/usr/bin/env python3
"""Prepares benchmark data through the API: a tenant with N contacts (bulk, 1000 per request)
and prints shell assignments (token, id range) for benchmarks/run. Stdlib only."""
import http.client
import json
import random
import sys

FIRST = ["Anna", "Marie", "Jonas", "Lukas", "Sofia", "Mia", "Leon", "Noah", "Emma", "Paul",
         "Hannah", "Ben", "Lea", "Finn", "Clara", "Tom", "Kim", "Maria", "Johann", "Rita"]
LAST = ["Smith", "Müller", "Nguyen", "Lee", "Berg", "Johansson", "Schmidt", "Kim", "Garcia",
        "Rossi", "Novak", "Andersson", "Meyer", "Wagner", "Becker", "Hoffmann", "Klein"]


def call(conn, method, path, body=None, token=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    if resp.status >= 300:
        sys.exit(f"{method} {path}: HTTP {resp.status} {data[:300]!r}")
    return json.loads(data) if data else None


def main():
    host, port = sys.argv[1].split(":")
    email, password, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
    tag = sys.argv[5] if len(sys.argv) > 5 else "t"
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    token = call(conn, "POST", "/api/v1/auth/login", {"email": email, "password": password})[
        "access_token"]
    rnd = random.Random(42)
    ids = []
    for start in range(0, count, 1000):
        batch = []
        for i in range(start, min(count, start + 1000)):
            batch.append({
                "first_name": rnd.choice(FIRST), "last_name": rnd.choice(LAST),
                "email": f"c{i:06d}.{tag}@example.org",
                "phone": f"+4930{i:07d}",
                "status": rnd.choice(["active", "inactive", "qualified", "unqualified"]),
                "source": rnd.choice(["website", "referral", "ads", "manual"]),
                "tags": rnd.sample(["vip", "new", "cardio", "lab", "follow-up"], 2),
            })
        res = call(conn, "POST", "/api/v1/contacts/bulk", {"contacts": batch}, token)
        for r in res["results"]:
            if "id" not in r:
                sys.exit(f"bulk item failed: {r}")
            ids.append(r["id"])
    print(f"BENCH_TOKEN={token}")
    print(f"BENCH_FIRST_ID={min(ids) if ids else 1}")
    print(f"BENCH_LAST_ID={max(ids) if ids else 1}")


if __name__ == "__main__":
    main()
