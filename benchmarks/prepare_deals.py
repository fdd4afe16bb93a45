#!/usr/bin/env python3
"""Prepares the pipeline benchmark data through the API: N deals (bulk, 1000 per request) spread
over the open stages of the tenant's default pipeline, and prints shell assignments for
benchmarks/run (token, deal id range, pipeline id, open stage ids). Stdlib only."""
import http.client
import json
import random
import sys

from prepare import call


def main():
    host, port = sys.argv[1].split(":")
    email, password, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    token = call(conn, "POST", "/api/v1/auth/login", {"email": email, "password": password})[
        "access_token"]
    pipeline = call(conn, "GET", "/api/v1/pipelines", None, token)["items"][0]
    open_stages = [s["id"] for s in pipeline["stages"] if s["kind"] == "open"]
    rnd = random.Random(7)
    ids = []
    for start in range(0, count, 1000):
        batch = [{"title": f"Treatment plan {i}",
                  "amount": f"{rnd.randint(50, 500000)}.{rnd.randint(0, 99):02d}",
                  "stage_id": rnd.choice(open_stages),
                  "expected_close_date": f"2027-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}"}
                 for i in range(start, min(count, start + 1000))]
        res = call(conn, "POST", "/api/v1/deals/bulk", {"deals": batch}, token)
        for r in res["results"]:
            if "id" not in r:
                sys.exit(f"bulk item failed: {r}")
            ids.append(r["id"])
    print(f"BENCH_TOKEN={token}")
    print(f"BENCH_DEAL_FIRST={min(ids) if ids else 1}")
    print(f"BENCH_DEAL_LAST={max(ids) if ids else 1}")
    print(f"BENCH_PIPELINE={pipeline['id']}")
    print(f"BENCH_STAGES={','.join(map(str, open_stages))}")


if __name__ == "__main__":
    main()
