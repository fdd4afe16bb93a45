"""The audit trail's loss window under a crash (benchmarks/audit).

  audit_loss.py HOST:PORT TOKEN FIRST_ID LAST_ID PID SECONDS
      16 clients read contacts by id, each read with its own X-Request-Id, for SECONDS; then
      carecrm (PID) gets SIGKILL while they read. Prints the path of a JSON file with every
      answered read (request id, time answered) and the time of the kill.
  audit_loss.py --count DATABASE_URL FILE
      After carecrm is started again: how many answered reads have no audit row, and how long
      before the kill the oldest of those was answered.
"""
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time


def load(hostport, token, first, last, pid, seconds):
    host, port = hostport.rsplit(":", 1)
    answered = []
    lock = threading.Lock()
    stop = threading.Event()

    def reader(n):
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        i = 0
        while not stop.is_set():
            rid = f"loss-{n}-{i}"
            i += 1
            try:
                conn.request("GET", f"/api/v1/contacts/{random.randint(first, last)}",
                             headers={"Authorization": f"Bearer {token}", "X-Request-Id": rid})
                resp = conn.getresponse()
                resp.read()
                if resp.status == 200:
                    with lock:
                        answered.append((rid, time.time()))
            except (OSError, http.client.HTTPException):
                return

    threads = [threading.Thread(target=reader, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    killed_at = time.time()
    os.kill(pid, signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join()
    fd, path = tempfile.mkstemp(prefix="audit-loss-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"killed_at": killed_at, "answered": answered}, f)
    print(path)


def count(database_url, path):
    with open(path) as f:
        data = json.load(f)
    os.unlink(path)
    out = subprocess.run(["psql", "-tA", database_url, "-c",
                          "SELECT request_id FROM audit_log WHERE request_id LIKE 'loss-%'"],
                         capture_output=True, text=True, check=True).stdout
    present = set(out.split())
    answered = data["answered"]
    lost = [(rid, at) for rid, at in answered if rid not in present]
    if not lost:
        print(f"{len(answered)} reads answered, every one has its audit row")
        return
    oldest = min(at for _, at in lost)
    print(f"{len(answered)} reads answered, {len(lost)} without an audit row "
          f"({100.0 * len(lost) / len(answered):.2f} %), the oldest answered "
          f"{1000 * (data['killed_at'] - oldest):.0f} ms before the kill")


if __name__ == "__main__":
    if sys.argv[1] == "--count":
        count(sys.argv[2], sys.argv[3])
    else:
        load(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
             float(sys.argv[6]))
