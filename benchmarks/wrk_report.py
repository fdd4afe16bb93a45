#!/usr/bin/env python3
"""Reads the figures wrk/harness.lua wrote (one file, or several: consecutive slices of one
load are added up, their latency histograms merged) and prints shell assignments for the
benchmark scripts:

  W_REQUESTS W_SECONDS W_RPS  answers, seconds of wrk, answers per second
  W_P50 W_P99 W_MAX           latency in ms (from wrk's histogram, as wrk's own percentiles)
  W_2XX W_429 W_503 W_5XX     answers by status (W_5XX: 5xx other than 503)
  W_OTHER                     other answers (1xx, 3xx, 4xx but 429)
  W_2XX_RPS                   2xx answers per second
  W_SOCKET                    socket errors (connect, read, write, timeout)
  W_ERRORS                    every answer that is not 2xx, plus the socket errors
  W_CODES                     answers by status, e.g. "200:9512 201:480 204:470"

Stdlib only.   benchmarks/wrk_report.py REPORT...
"""
import collections
import math
import sys


def main():
    requests = duration_us = sockets = 0
    status = collections.Counter()
    latency = collections.Counter()
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            for line in f:
                key, *values = line.split()
                if key == "requests":
                    requests += int(values[0])
                elif key == "duration_us":
                    duration_us += int(values[0])
                elif key == "socket":
                    sockets += int(values[1])
                elif key == "status":
                    status[int(values[0])] += int(values[1])
                elif key == "latency":
                    latency[int(values[0])] += int(values[1])

    def percentile(p):
        total = sum(latency.values())
        if total == 0:
            return 0.0
        rank, seen = max(1, math.ceil(p / 100 * total)), 0
        for us in sorted(latency):
            seen += latency[us]
            if seen >= rank:
                return us / 1000
        return max(latency) / 1000

    ok = sum(n for code, n in status.items() if 200 <= code < 300)
    s5xx = sum(n for code, n in status.items() if code >= 500 and code != 503)
    answered = sum(status.values())
    seconds = duration_us / 1e6
    rate = (lambda n: n / seconds if seconds > 0 else 0.0)
    figures = {
        "W_REQUESTS": requests,
        "W_SECONDS": f"{seconds:.1f}",
        "W_RPS": f"{rate(requests):.1f}",
        "W_P50": f"{percentile(50):.2f}",
        "W_P99": f"{percentile(99):.2f}",
        "W_MAX": f"{(max(latency) if latency else 0) / 1000:.2f}",
        "W_2XX": ok,
        "W_429": status[429],
        "W_503": status[503],
        "W_5XX": s5xx,
        "W_OTHER": answered - ok - status[429] - status[503] - s5xx,
        "W_2XX_RPS": f"{rate(ok):.1f}",
        "W_SOCKET": sockets,
        "W_ERRORS": answered - ok + sockets,
        "W_CODES": '"' + " ".join(f"{code}:{n}" for code, n in sorted(status.items())) + '"',
    }
    for key, value in figures.items():
        print(f"{key}={value}")


if __name__ == "__main__":
    main()
