#!/usr/bin/env python3
"""Prepares benchmarks/appointments through the API and prints shell assignments. Stdlib only.

  prepare_appointments.py HOST:PORT EMAIL PASSWORD BOOKED
      "read": a calendar open 08:00-18:00 every day in São Paulo (15-minute grid), a 30-minute
      service with a 10-minute buffer, and BOOKED appointments on it, every 90 minutes from
      08:00 from tomorrow on: BENCH_TOKEN, BENCH_SERVICE, BENCH_CALENDAR, BENCH_FROM, BENCH_TO
      (the 7 days from tomorrow), BENCH_FIRST_ID/BENCH_LAST_ID (the appointments).
  prepare_appointments.py HOST:PORT EMAIL PASSWORD write CALENDARS
      "write": CALENDARS calendars open all day (UTC, 5-minute grid), a 5-minute service they
      all perform, a patient: BENCH_TOKEN, BENCH_SERVICE, BENCH_CALENDARS (comma-separated),
      BENCH_CONTACT, BENCH_BASE (epoch seconds of a day in a week, on the grid).
"""
import datetime as dt
import http.client
import sys

from prepare import call


def every_day(spans):
    return {d: spans for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")}


def main():
    host, port = sys.argv[1].split(":")
    email, password = sys.argv[2], sys.argv[3]
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    token = call(conn, "POST", "/api/v1/auth/login", {"email": email, "password": password})[
        "access_token"]
    contact = call(conn, "POST", "/api/v1/contacts",
                   {"first_name": "Bench", "last_name": "Patient"}, token)["id"]
    if sys.argv[4] == "write":
        n = int(sys.argv[5])
        cals = [call(conn, "POST", "/api/v1/calendars", {
            "name": f"Room {i}", "kind": "room", "time_zone": "UTC", "slot_step_minutes": 5,
            "working_hours": every_day([["00:00", "24:00"]])}, token)["id"] for i in range(n)]
        svc = call(conn, "POST", "/api/v1/services", {
            "name": "Quick", "duration_minutes": 5, "calendar_ids": cals}, token)["id"]
        base = dt.datetime.now(dt.timezone.utc).replace(hour=0, minute=0, second=0,
                                                        microsecond=0) + dt.timedelta(days=7)
        print(f"BENCH_SERVICE={svc}")
        print(f"BENCH_CALENDARS={','.join(map(str, cals))}")
        print(f"BENCH_CONTACT={contact}")
        print(f"BENCH_BASE={int(base.timestamp())}")
        print(f"BENCH_TOKEN={token}")
        return
    booked = int(sys.argv[4])
    cal = call(conn, "POST", "/api/v1/calendars", {
        "name": "Dra. Ana", "time_zone": "America/Sao_Paulo", "slot_step_minutes": 15,
        "working_hours": every_day([["08:00", "18:00"]])}, token)["id"]
    svc = call(conn, "POST", "/api/v1/services", {
        "name": "Check-up", "duration_minutes": 30, "buffer_minutes": 10,
        "calendar_ids": [cal]}, token)["id"]
    zone = dt.timezone(dt.timedelta(hours=-3))  # São Paulo keeps no daylight saving now
    day0 = dt.datetime.now(zone).replace(hour=0, minute=0, second=0,
                                         microsecond=0) + dt.timedelta(days=1)
    ids, day = [], 0
    while len(ids) < booked:
        for minute in range(8 * 60, 18 * 60 - 40 + 1, 90):
            if len(ids) == booked:
                break
            start = (day0 + dt.timedelta(days=day, minutes=minute)).astimezone(dt.timezone.utc)
            ids.append(call(conn, "POST", "/api/v1/appointments", {
                "contact_id": contact, "service_id": svc, "calendar_id": cal,
                "start": start.strftime("%Y-%m-%dT%H:%M:%SZ")}, token)["id"])
        day += 1
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    print(f"BENCH_SERVICE={svc}")
    print(f"BENCH_CALENDAR={cal}")
    print(f"BENCH_FROM={day0.astimezone(dt.timezone.utc).strftime(fmt)}")
    print(f"BENCH_TO={(day0 + dt.timedelta(days=7)).astimezone(dt.timezone.utc).strftime(fmt)}")
    print(f"BENCH_FIRST_ID={min(ids)}")
    print(f"BENCH_LAST_ID={max(ids)}")
    print(f"BENCH_TOKEN={token}")


if __name__ == "__main__":
    main()
