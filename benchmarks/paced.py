#!/usr/bin/env python3
"""Creates contacts at a steady RATE a second for SECONDS (below saturation), for the
end-to-end latency of benchmarks/automation. Prints the number created; exits 1 if any failed.

  paced.py HOST:PORT TOKEN RATE SECONDS
"""
import http.client
import json
import sys
import threading
import time


def main():
    host, port = sys.argv[1].split(":")
    token, rate, seconds = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    workers = 4
    interval = workers / rate
    created, failed = [0], [0]
    lock = threading.Lock()

    def work(k):
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        start = time.monotonic() + k * interval / workers
        n = 0
        while True:
            due = start + n * interval
            if due - start > seconds:
                break
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            body = json.dumps({"first_name": "Paced", "email": f"p{k}-{n}-{time.time_ns()}@bench.example"})
            conn.request("POST", "/api/v1/contacts", body=body,
                         headers={"Authorization": "Bearer " + token,
                                  "Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            with lock:
                if r.status == 201:
                    created[0] += 1
                else:
                    failed[0] += 1
            n += 1

    threads = [threading.Thread(target=work, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(created[0])
    sys.exit(1 if failed[0] else 0)


if __name__ == "__main__":
    main()
