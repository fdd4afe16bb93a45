"""Calendars, services and appointments (contract §10, docs/appointments.md): a clinic's day,
booked without a double booking. Managers set up calendars (with their own time zones and
working hours) and services; agents book, move and cancel; every role reads. Free slots follow the
calendar's clock across daylight-saving changes; two bookings racing for one slot give exactly
one 201; Postgres refuses an overlap whoever writes it; appointments are audited as touches of
the patient's record and go with the patient."""
import datetime as dt

import crm

MONDAY = "2030-01-07"  # far enough ahead that every slot is in the future


def ts(local: str) -> str:
    """'2030-01-07T08:00' → the API's timestamp form."""
    return f"{local}:00.000000Z"


def clinic(client, sess, **service_fields):
    """A UTC calendar open 08:00-12:00 every day, a 30-minute service it performs, a contact."""
    manager = sess.tokens["manager"]
    cal = crm.create_calendar(client, manager)
    svc = crm.create_service(client, manager, [cal["id"]], **service_fields)
    contact = crm.create_contact(client, sess.admin)["id"]
    return cal, svc, contact


def test_managers_set_up_calendars_and_services_that_everyone_reads(client, sess):
    manager, viewer = sess.tokens["manager"], sess.tokens["viewer"]
    hours = {"mon": [["13:00", "17:00"], ["08:00", "12:00"]], "fri": [["08:00", "24:00"]]}
    cal = crm.create_calendar(client, manager, name="Dr. Ana Souza", kind="practitioner",
                              time_zone="America/Sao_Paulo", working_hours=hours,
                              user_id=sess.users["agent"]["id"], slot_step_minutes=20)
    assert cal["working_hours"] == {"mon": [["08:00", "12:00"], ["13:00", "17:00"]],
                                    "fri": [["08:00", "24:00"]]}, cal
    assert (cal["time_zone"], cal["slot_step_minutes"], cal["is_active"], cal["user_id"]) == (
        "America/Sao_Paulo", 20, True, sess.users["agent"]["id"]), cal
    room = crm.create_calendar(client, manager, kind="room")
    assert room["slot_step_minutes"] == 15 and room["user_id"] is None, room
    assert crm.assert_json_response(client.get(crm.calendar_url(cal["id"]), token=viewer),
                                    200) == cal
    listed = crm.list_all(client, viewer, crm.CALENDARS)
    assert {c["id"] for c in listed} >= {cal["id"], room["id"]}
    changed = crm.assert_json_response(client.patch(crm.calendar_url(room["id"]), {
        "name": "Room 2", "is_active": False}, token=manager), 200)
    assert (changed["name"], changed["is_active"]) == ("Room 2", False), changed
    # An agent or a viewer reads but never writes.
    for role in ("agent", "viewer"):
        crm.assert_error(client.post(crm.CALENDARS, {"name": "x", "time_zone": "UTC",
                                                     "working_hours": {}},
                                     token=sess.tokens[role]), 403, "INSUFFICIENT_PERMISSIONS")

    svc = crm.create_service(client, manager, [cal["id"], room["id"]], name="Check-up",
                             duration_minutes=45, buffer_minutes=10, price="250.00",
                             currency="BRL")
    assert (svc["price"], svc["currency"], svc["buffer_minutes"], svc["calendar_ids"],
            svc["reminders"]) == ("250.00", "BRL", 10, [cal["id"], room["id"]], []), svc
    # PUT replaces: what it leaves out takes its default.
    replaced = crm.assert_json_response(client.put(crm.service_url(svc["id"]), {
        "name": "Check-up", "duration_minutes": 30}, token=manager), 200)
    assert (replaced["price"], replaced["currency"], replaced["buffer_minutes"],
            replaced["calendar_ids"]) == (None, None, 0, []), replaced
    patched = crm.assert_json_response(client.patch(crm.service_url(svc["id"]), {
        "calendar_ids": [cal["id"]], "price": "99.90", "currency": "USD"}, token=manager), 200)
    assert (patched["name"], patched["price"], patched["calendar_ids"]) == (
        "Check-up", "99.90", [cal["id"]]), patched
    assert crm.assert_json_response(client.get(crm.service_url(svc["id"]), token=viewer),
                                    200) == patched
    # A calendar no appointment names may be deleted; the services that named it forget it.
    crm.assert_no_content(client.delete(crm.calendar_url(cal["id"]), token=manager))
    crm.assert_error(client.get(crm.calendar_url(cal["id"]), token=viewer), 404, "NOT_FOUND")
    assert crm.assert_json_response(client.get(crm.service_url(svc["id"]), token=viewer),
                                    200)["calendar_ids"] == []


def test_bad_set_up_is_refused_field_by_field_and_changes_nothing(client, sess, sess_b):
    manager = sess.tokens["manager"]
    cal = crm.create_calendar(client, manager)
    theirs = crm.create_calendar(client, sess_b.admin)
    base = {"name": "x", "time_zone": "UTC", "working_hours": {}}
    for fields, loc in [
        ({"time_zone": "Mars/Olympus_Mons"}, ("body", "time_zone")),
        ({"time_zone": "../../etc/passwd"}, ("body", "time_zone")),
        ({"working_hours": {"mon": [["12:00", "08:00"]]}}, ("body", "working_hours", "mon", 0)),
        ({"working_hours": {"mon": [["08:00", "12:00"], ["11:00", "13:00"]]}},
         ("body", "working_hours", "mon")),
        ({"working_hours": {"monday": [["08:00", "12:00"]]}}, ("body", "working_hours", "monday")),
        ({"working_hours": {"tue": [["08:00", "25:00"]]}}, ("body", "working_hours", "tue", 0)),
        ({"slot_step_minutes": 4}, ("body", "slot_step_minutes")),
        ({"slot_step_minutes": 241}, ("body", "slot_step_minutes")),
        ({"kind": "robot"}, ("body", "kind")),
        ({"user_id": crm.NOWHERE_ID}, ("body", "user_id")),
        ({"id": 5}, ("body", "id")),
    ]:
        crm.assert_validation_locs(client.post(crm.CALENDARS, {**base, **fields}, token=manager),
                                   loc)
    crm.assert_validation_locs(client.patch(crm.calendar_url(cal["id"]), {
        "time_zone": "Nowhere/City"}, token=manager), ("body", "time_zone"))
    assert crm.assert_json_response(client.get(crm.calendar_url(cal["id"]), token=manager),
                                    200)["time_zone"] == "UTC"
    for fields, loc in [
        ({"calendar_ids": [theirs["id"]]}, ("body", "calendar_ids", 0)),
        ({"calendar_ids": [cal["id"], crm.NOWHERE_ID]}, ("body", "calendar_ids", 1)),
        ({"duration_minutes": 4}, ("body", "duration_minutes")),
        ({"duration_minutes": 721}, ("body", "duration_minutes")),
        ({"buffer_minutes": -1}, ("body", "buffer_minutes")),
        ({"price": "12.345", "currency": "BRL"}, ("body", "price")),
        ({"price": "10.00", "currency": "XYZ"}, ("body", "currency")),
        ({"price": "10.00"}, ("body", "currency")),
        ({"reminders": [{"before_minutes": 60, "channel_id": crm.NOWHERE_ID, "text": "hi"}]},
         ("body", "reminders", 0, "channel_id")),
        ({"reminders": [{"before_minutes": 1, "channel_id": 1, "text": "hi"}]},
         ("body", "reminders", 0, "before_minutes")),
        ({"reminders": [{"before_minutes": 60, "channel_id": 1, "text": "hi", "x": 1}]},
         ("body", "reminders", 0, "x")),
    ]:
        crm.assert_validation_locs(client.post(crm.SERVICES, {
            "name": "S", "duration_minutes": 30, **fields}, token=manager), loc)
    # Another tenant's calendar: 403 to read or change, and it stays as it was.
    crm.assert_error(client.get(crm.calendar_url(theirs["id"]), token=manager), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.patch(crm.calendar_url(theirs["id"]), {"name": "mine"},
                                  token=manager), 403, "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.delete(crm.calendar_url(theirs["id"]), token=manager), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.assert_json_response(client.get(crm.calendar_url(theirs["id"]),
                                               token=sess_b.admin), 200) == theirs
    crm.assert_error(client.get(crm.calendar_url(crm.NOWHERE_ID), token=manager), 404,
                     "NOT_FOUND")


def test_a_booking_takes_a_free_slot_and_is_refused_where_none_is(client, sess, sess_b):
    cal, svc, contact = clinic(client, sess)
    agent = sess.tokens["agent"]
    day = (ts(f"{MONDAY}T00:00"), ts(f"{MONDAY}T23:59"))
    slots = crm.free_slots(client, agent, svc["id"], *day)
    assert len(slots) == 15 and slots[0] == (cal["id"], ts(f"{MONDAY}T08:00"),
                                             ts(f"{MONDAY}T08:30")), slots
    assert slots[-1][1] == ts(f"{MONDAY}T11:30"), slots
    appt = crm.booked(client, agent, contact, svc["id"], cal["id"], ts(f"{MONDAY}T09:00"),
                      notes="first visit")
    assert (appt["end"], appt["status"], appt["source"], appt["notes"], appt["cancel_reason"]) == (
        ts(f"{MONDAY}T09:30"), "booked", "staff", "first visit", None), appt
    assert crm.assert_json_response(client.get(crm.appointment_url(appt["id"]),
                                               token=sess.tokens["viewer"]), 200) == appt
    after = crm.free_slots(client, agent, svc["id"], *day)
    assert [s[1] for s in after if s[1] in (ts(f"{MONDAY}T08:45"), ts(f"{MONDAY}T09:00"),
                                            ts(f"{MONDAY}T09:15"))] == [], after
    assert len(after) == 12, after
    other = crm.create_contact(client, sess.admin)["id"]

    def refused(start, expect=409, **fields):
        resp = crm.book(client, agent, other, svc["id"], cal["id"], start, **fields)
        if expect == 409:
            crm.assert_error(resp, 409, "CONFLICT")
        return resp

    assert "taken" in refused(ts(f"{MONDAY}T09:15")).json["detail"]
    assert "outside working hours" in refused(ts(f"{MONDAY}T13:00")).json["detail"]
    assert "after working hours" in refused(ts(f"{MONDAY}T11:45")).json["detail"]
    assert "past" in refused("2020-01-06T09:00:00Z").json["detail"]
    crm.assert_validation_locs(refused(ts(f"{MONDAY}T10:05"), 422), ("body", "start"))
    crm.assert_validation_locs(refused("tomorrow", 422), ("body", "start"))
    crm.assert_validation_locs(refused(ts(f"{MONDAY}T10:00"), 422, status="confirmed"),
                               ("body", "status"))
    # Records the tenant does not hold, in the body: 422 at their field.
    theirs = crm.create_contact(client, sess_b.admin)["id"]
    crm.assert_validation_locs(crm.book(client, agent, theirs, svc["id"], cal["id"],
                                        ts(f"{MONDAY}T10:00")), ("body", "contact_id"))
    crm.assert_validation_locs(crm.book(client, agent, other, crm.NOWHERE_ID, cal["id"],
                                        ts(f"{MONDAY}T10:00")), ("body", "service_id"))
    # A calendar that does not perform the service, or is inactive.
    room = crm.create_calendar(client, sess.tokens["manager"])
    resp = crm.book(client, agent, other, svc["id"], room["id"], ts(f"{MONDAY}T10:00"))
    crm.assert_error(resp, 409, "CONFLICT")
    assert "does not perform" in resp.json["detail"]
    # A viewer may not book.
    crm.assert_error(crm.book(client, sess.tokens["viewer"], other, svc["id"], cal["id"],
                              ts(f"{MONDAY}T10:00")), 403, "INSUFFICIENT_PERMISSIONS")
    # Nothing refused was stored.
    listed = crm.list_all(client, agent, crm.APPOINTMENTS, {"calendar_id": cal["id"]})
    assert [a["id"] for a in listed] == [appt["id"]], listed


def test_availability_checks_its_query(client, sess, sess_b):
    cal, svc, _ = clinic(client, sess)
    t = sess.tokens["viewer"]

    def bad(params, loc):
        crm.assert_validation_locs(client.get(crm.with_query(crm.AVAILABILITY, params), token=t),
                                   loc)

    base = {"service_id": svc["id"], "from": ts(f"{MONDAY}T00:00"), "to": "2030-02-08T00:00:00Z"}
    bad(base, ("query", "to"))  # 32 days
    bad({**base, "to": base["from"]}, ("query", "to"))
    bad({**base, "from": "yesterday"}, ("query", "from"))
    bad({"from": base["from"], "to": "2030-01-08T00:00:00Z"}, ("query", "service_id"))
    theirs = crm.create_service(client, sess_b.admin, [])
    bad({**base, "service_id": theirs["id"], "to": "2030-01-08T00:00:00Z"}, ("query", "service_id"))
    # 31 days is the most.
    slots = crm.free_slots(client, t, svc["id"], ts(f"{MONDAY}T00:00"), "2030-02-07T00:00:00Z",
                           calendar_id=cal["id"])
    assert len(slots) == 31 * 15, len(slots)


def test_racing_bookings_for_one_slot_give_exactly_one_201(server, client, sess):
    cal, svc, _ = clinic(client, sess)
    contacts = [crm.create_contact(client, sess.admin)["id"] for _ in range(12)]
    agent = sess.tokens["agent"]

    def attempt(contact):
        return server.client().post(crm.APPOINTMENTS, {
            "contact_id": contact, "service_id": svc["id"], "calendar_id": cal["id"],
            "start": ts(f"{MONDAY}T10:00")}, token=agent).status

    statuses = crm.run_parallel(attempt, contacts, workers=12)
    assert sorted(statuses) == [201] + [409] * 11, statuses
    live = crm.list_all(client, agent, crm.APPOINTMENTS, {"calendar_id": cal["id"]})
    assert len(live) == 1, live


def test_postgres_refuses_overlapping_live_appointments_whoever_writes_them(client, sess,
                                                                           database):
    cal, svc, contact = clinic(client, sess, buffer_minutes=15)
    appt = crm.booked(client, sess.tokens["agent"], contact, svc["id"], cal["id"],
                      ts(f"{MONDAY}T09:00"))

    def insert(start, end, blocked, status="booked"):
        return database.query(
            "INSERT INTO appointments (tenant_id, contact_id, service_id, calendar_id, starts_at,"
            " ends_at, blocked_until, status, source, created_at, updated_at) VALUES "
            f"({sess.tenant.tenant_id}, {contact}, {svc['id']}, {cal['id']}, '{start}', '{end}',"
            f" '{blocked}', '{status}', 'api', now(), now()) RETURNING id")

    # Inside the first one's buffer (09:30-09:45): refused.
    try:
        insert(ts(f"{MONDAY}T09:40"), ts(f"{MONDAY}T10:10"), ts(f"{MONDAY}T10:10"))
        raise AssertionError("an overlapping appointment was stored")
    except RuntimeError as e:
        assert "appointments_no_double_booking" in str(e), e
    # A cancelled one holds nothing, and a booking right after the buffer fits.
    insert(ts(f"{MONDAY}T09:00"), ts(f"{MONDAY}T09:30"), ts(f"{MONDAY}T09:30"), "cancelled")
    insert(ts(f"{MONDAY}T09:45"), ts(f"{MONDAY}T10:15"), ts(f"{MONDAY}T10:15"))
    held = database.query(
        f"SELECT string_agg(to_char(starts_at AT TIME ZONE 'UTC', 'HH24:MI'), ',' ORDER BY"
        f" starts_at) FROM appointments WHERE calendar_id = {cal['id']} AND status = 'booked'")
    assert held.strip() == "09:00,09:45", held  # the refused 09:40 was never stored
    assert appt["status"] == "booked"


def test_a_slot_another_writer_took_meanwhile_fails_its_booking_alone(server, client, sess,
                                                                     database):
    # A row written behind the schedule actor's back (another node, a restore): the actor's
    # memory does not hold it, so only Postgres can refuse the booking that overlaps it. The
    # bookings committed with it in one batch must not fail with it. Three days, eight
    # bookings racing on each: the first two of a day go in batches of their own (two commit at
    # once), the other six together, so the refused one shares a batch on most days.
    cal, svc, contact = clinic(client, sess)
    agent = sess.tokens["agent"]
    starts = ["08:00", "08:30", "09:00", "09:30", "10:00", "10:30", "11:00", "11:30"]
    monday = dt.date.fromisoformat(MONDAY)
    for offset in range(3):
        day = (monday + dt.timedelta(days=offset)).isoformat()
        database.query(
            "INSERT INTO appointments (tenant_id, contact_id, service_id, calendar_id, starts_at,"
            " ends_at, blocked_until, status, source, created_at, updated_at) VALUES "
            f"({sess.tenant.tenant_id}, {contact}, {svc['id']}, {cal['id']},"
            f" '{ts(f'{day}T11:00')}', '{ts(f'{day}T11:30')}', '{ts(f'{day}T11:30')}',"
            " 'booked', 'api', now(), now())")

        def book(start):
            resp = server.client().post(crm.APPOINTMENTS, {
                "contact_id": contact, "service_id": svc["id"], "calendar_id": cal["id"],
                "start": ts(f"{day}T{start}")}, token=agent)
            if resp.status == 409:
                crm.assert_error(resp, 409, "CONFLICT")
            return resp.status

        statuses = dict(zip(starts, crm.run_parallel(book, starts, workers=len(starts))))
        assert statuses == {s: 409 if s == "11:00" else 201 for s in starts}, (day, statuses)
        held = database.query(
            f"SELECT string_agg(to_char(starts_at AT TIME ZONE 'UTC', 'HH24:MI'), ',' ORDER BY"
            f" starts_at) FROM appointments WHERE calendar_id = {cal['id']} AND status = 'booked'"
            f" AND starts_at::date = '{day}'")
        assert held.strip() == ",".join(starts), (day, held)  # the 11:00 is the other writer's


def test_a_booking_for_a_contact_not_the_tenants_fails_alone_in_its_batch(server, client, sess,
                                                                          sess_b, database):
    # The schedule actor does not know contacts: Postgres's INSERT skips the row of a contact
    # that is not the tenant's (another tenant's, or deleted behind carecrm's back), and only
    # that booking is refused; the bookings staged with it are stored, each audited once as a
    # booking of its patient, and each refused one is audited as a refusal (422) naming nobody.
    cal, svc, contact = clinic(client, sess)
    agent = sess.tokens["agent"]
    foreign = crm.create_contact(client, sess_b.admin)["id"]
    deleted = crm.create_contact(client, sess.admin)["id"]
    database.query(f"DELETE FROM contacts WHERE id = {deleted}")
    who = {"09:00": foreign, "10:30": deleted}
    starts = ["08:00", "08:30", "09:00", "09:30", "10:00", "10:30", "11:00", "11:30"]
    day = "2030-02-04"
    since = database.query("SELECT now()").strip()

    def book(start):
        resp = server.client().post(crm.APPOINTMENTS, {
            "contact_id": who.get(start, contact), "service_id": svc["id"],
            "calendar_id": cal["id"], "start": ts(f"{day}T{start}")}, token=agent)
        if resp.status == 422:
            [item] = crm.validation_items(resp)
            assert (item["loc"], item["msg"]) == (["body", "contact_id"],
                                                  "contact not found in this tenant"), item
        return resp.status

    statuses = dict(zip(starts, crm.run_parallel(book, starts, workers=len(starts))))
    assert statuses == {s: 422 if s in who else 201 for s in starts}, statuses
    held = database.query(
        f"SELECT string_agg(to_char(starts_at AT TIME ZONE 'UTC', 'HH24:MI'), ',' ORDER BY"
        f" starts_at) FROM appointments WHERE calendar_id = {cal['id']}")
    assert held.strip() == ",".join(s for s in starts if s not in who), held
    # The bookings' rows are written with them; the refusals' come through the audit writer.
    rows = ("SELECT string_agg(r, ',') FROM (SELECT coalesce(resource_id::text, '-')"
            " || ' ' || outcome || ' ' || status AS r FROM (SELECT resource_id, outcome, status,"
            " at FROM audit_pending WHERE action = 'book_appointment' AND tenant_id ="
            f" {sess.tenant.tenant_id} UNION ALL SELECT resource_id, outcome, status, at FROM"
            " audit_log WHERE action = 'book_appointment' AND tenant_id ="
            f" {sess.tenant.tenant_id}) x WHERE at >= '{since}') y")
    want = sorted([f"{contact} success 201"] * 6 + ["- failure 422"] * 2)
    crm.wait_until("the refusals audited", lambda: database.query(rows).strip().count(",") >= 7)
    assert sorted(database.query(rows).strip().split(",")) == want


def test_appointments_move_along_their_statuses(client, sess):
    cal, svc, contact = clinic(client, sess)
    agent = sess.tokens["agent"]
    appt = crm.booked(client, agent, contact, svc["id"], cal["id"], ts(f"{MONDAY}T08:00"))
    url = crm.appointment_url(appt["id"])

    def patch(body, status=200):
        resp = client.patch(url, body, token=agent)
        if status == 200:
            return crm.assert_json_response(resp, 200)
        crm.assert_error(resp, status, "CONFLICT")
        return resp.json

    assert patch({"status": "confirmed"})["status"] == "confirmed"
    assert "cannot go from confirmed to booked" in patch({"status": "booked"}, 409)["detail"]
    assert "once its start has passed" in patch({"status": "no_show"}, 409)["detail"]
    # Rescheduled: the old slot is free again, the new one held, and it needs confirming again.
    moved = crm.assert_json_response(client.post(crm.appointment_url(appt["id"], "reschedule"), {
        "start": ts(f"{MONDAY}T11:00")}, token=agent), 200)
    assert (moved["start"], moved["end"], moved["status"]) == (
        ts(f"{MONDAY}T11:00"), ts(f"{MONDAY}T11:30"), "booked"), moved
    other = crm.create_contact(client, sess.admin)["id"]
    crm.booked(client, agent, other, svc["id"], cal["id"], ts(f"{MONDAY}T08:00"))
    crm.assert_error(crm.book(client, agent, other, svc["id"], cal["id"], ts(f"{MONDAY}T11:00")),
                     409, "CONFLICT")
    # A reschedule onto a taken slot changes nothing.
    crm.assert_error(client.post(crm.appointment_url(appt["id"], "reschedule"), {
        "start": ts(f"{MONDAY}T08:00")}, token=agent), 409, "CONFLICT")
    assert patch({"status": "arrived", "notes": "came early"})["notes"] == "came early"
    crm.assert_error(client.post(crm.appointment_url(appt["id"], "reschedule"), {
        "start": ts(f"{MONDAY}T10:00")}, token=agent), 409, "CONFLICT")
    assert patch({"status": "completed"})["status"] == "completed"
    assert "cannot go from completed to cancelled" in patch({"status": "cancelled"}, 409)["detail"]
    crm.assert_error(client.post(crm.appointment_url(appt["id"], "cancel"), {}, token=agent), 409,
                     "CONFLICT")
    # Cancelled with a reason: its slot is free again.
    third = crm.booked(client, agent, other, svc["id"], cal["id"], ts(f"{MONDAY}T10:00"))
    gone = crm.assert_json_response(client.post(crm.appointment_url(third["id"], "cancel"), {
        "reason": "fever"}, token=agent), 200)
    assert (gone["status"], gone["cancel_reason"]) == ("cancelled", "fever"), gone
    crm.booked(client, agent, contact, svc["id"], cal["id"], ts(f"{MONDAY}T10:00"))
    # Lists by status, contact and range, in start order.
    cancelled = crm.list_all(client, agent, crm.APPOINTMENTS, {"status": "cancelled",
                                                               "calendar_id": cal["id"]})
    assert [a["id"] for a in cancelled] == [third["id"]], cancelled
    mine = crm.list_all(client, agent, f"{crm.contact_url(contact)}/appointments")
    assert [a["start"] for a in mine] == [ts(f"{MONDAY}T10:00"), ts(f"{MONDAY}T11:00")], mine
    window = crm.list_all(client, agent, crm.APPOINTMENTS, {
        "calendar_id": cal["id"], "from": ts(f"{MONDAY}T09:00"), "to": ts(f"{MONDAY}T11:00")})
    assert [a["id"] for a in window] == [third["id"], mine[0]["id"]], window
    crm.assert_validation_locs(client.get(crm.with_query(crm.APPOINTMENTS, {"status": "late"}),
                                          token=agent), ("query", "status"))


def test_free_slots_follow_the_calendars_clock_across_a_daylight_saving_week(client, sess):
    manager = sess.tokens["manager"]
    cal = crm.create_calendar(client, manager, time_zone="America/New_York",
                              working_hours=crm.every_day(("09:00", "10:00")),
                              slot_step_minutes=30)
    svc = crm.create_service(client, manager, [cal["id"]], duration_minutes=30)
    # New York moves to daylight time on Sunday 2027-03-14: 09:00 local is 14:00Z before, 13:00Z
    # from that day on.
    slots = crm.free_slots(client, manager, svc["id"], "2027-03-11T00:00:00Z",
                           "2027-03-18T00:00:00Z")
    starts = [s[1][:16] for s in slots]
    assert starts == ["2027-03-11T14:00", "2027-03-11T14:30", "2027-03-12T14:00",
                      "2027-03-12T14:30", "2027-03-13T14:00", "2027-03-13T14:30",
                      "2027-03-14T13:00", "2027-03-14T13:30", "2027-03-15T13:00",
                      "2027-03-15T13:30", "2027-03-16T13:00", "2027-03-16T13:30",
                      "2027-03-17T13:00", "2027-03-17T13:30"], starts
    contact = crm.create_contact(client, sess.admin)["id"]
    # 09:00 local on the Monday after the change is bookable; 09:00 EST (14:00Z) is not.
    crm.booked(client, sess.tokens["agent"], contact, svc["id"], cal["id"], "2027-03-15T13:00:00Z")
    crm.assert_error(crm.book(client, sess.tokens["agent"], contact, svc["id"], cal["id"],
                              "2027-03-15T14:00:00Z"), 409, "CONFLICT")


def test_another_tenants_appointments_are_403_and_unchanged(client, sess, sess_b):
    cal, svc, contact = clinic(client, sess)
    appt = crm.booked(client, sess.tokens["agent"], contact, svc["id"], cal["id"],
                      ts(f"{MONDAY}T08:00"))
    them = sess_b.admin
    crm.assert_error(client.get(crm.appointment_url(appt["id"]), token=them), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.patch(crm.appointment_url(appt["id"]), {"status": "confirmed"},
                                  token=them), 403, "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.post(crm.appointment_url(appt["id"], "cancel"), {}, token=them), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.get(f"{crm.contact_url(contact)}/appointments", token=them), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.list_all(client, them, crm.APPOINTMENTS) == []
    crm.assert_error(client.get(crm.appointment_url(crm.NOWHERE_ID), token=them), 404,
                     "NOT_FOUND")
    assert crm.assert_json_response(client.get(crm.appointment_url(appt["id"]),
                                               token=sess.admin), 200) == appt


def test_appointments_are_audited_on_the_patients_record_and_go_with_it(client, sess, database):
    cal, svc, contact = clinic(client, sess)
    agent = sess.tokens["agent"]
    appt = crm.booked(client, agent, contact, svc["id"], cal["id"], ts(f"{MONDAY}T08:00"),
                      notes="bring the lab results")
    client.get(crm.appointment_url(appt["id"]), token=agent)
    client.get(crm.with_query(crm.APPOINTMENTS, {"calendar_id": cal["id"]}), token=agent)
    crm.assert_json_response(client.patch(crm.appointment_url(appt["id"]),
                                          {"status": "confirmed"}, token=agent), 200)

    def rows():
        return [r for r in crm.audit_rows(client, sess.admin, resource="contact", limit=100)
                if "appointment" in r["action"] and (r["resource_id"] == contact or
                                                      contact in (r.get("ids") or []))]

    assert crm.eventually(lambda: len(rows()) == 4, timeout=5), rows()
    by_action = {r["action"]: r for r in rows()}
    assert set(by_action) == {"book_appointment", "read_appointment", "list_appointments",
                              "update_appointment"}, rows()
    assert by_action["update_appointment"]["fields"] == ["status"], by_action
    for r in rows():
        assert r["user_id"] == sess.users["agent"]["id"] and "lab results" not in str(r), r
    # The patient's export lists who looked (their access log); a deletion takes the
    # appointments with it and frees the slot.
    export = crm.assert_json_response(client.get(f"{crm.contact_url(contact)}/export",
                                                 token=sess.admin), 200)
    assert {"read_appointment", "book_appointment"} <= {a["action"] for a in
                                                        export["access_log"]}, export
    assert [(a["id"], a["service"], a["status"], a["start"], a["notes"])
            for a in export["appointments"]] == [
        (appt["id"], svc["name"], "confirmed", appt["start"], "bring the lab results")], export
    crm.assert_no_content(client.delete(crm.contact_url(contact), token=sess.admin))
    crm.assert_error(client.get(crm.appointment_url(appt["id"]), token=agent), 404, "NOT_FOUND")
    assert database.query(
        f"SELECT count(*) FROM appointments WHERE contact_id = {contact}").strip() == "0"
    other = crm.create_contact(client, sess.admin)["id"]
    crm.booked(client, agent, other, svc["id"], cal["id"], ts(f"{MONDAY}T08:00"))
    # A calendar with appointments cannot be deleted (deactivate it instead).
    crm.assert_error(client.delete(crm.calendar_url(cal["id"]), token=sess.tokens["manager"]),
                     409, "CONFLICT")


def test_the_schedule_is_reloaded_after_its_actor_fails(server, client, sess):
    cal, svc, contact = clinic(client, sess)
    appt = crm.booked(client, sess.tokens["agent"], contact, svc["id"], cal["id"],
                      ts(f"{MONDAY}T08:00"))
    metrics = server.metrics_client()
    crm.assert_json_response(metrics.post(f"/actors/{sess.tenant.tenant_id}/schedule/fail"), 202)

    def reloaded():
        resp = client.get(crm.appointment_url(appt["id"]), token=sess.admin)
        return resp.status != 503 and crm.assert_json_response(resp, 200)

    assert crm.eventually(reloaded, timeout=5) == appt
    # The reloaded schedule still refuses the taken slot.
    crm.assert_error(crm.book(client, sess.tokens["agent"], contact, svc["id"], cal["id"],
                              ts(f"{MONDAY}T08:00")), 409, "CONFLICT")


def test_tenant_create_demo_books_a_patient_on_the_next_weekday(client, cli_env):
    """`carecrm tenant create --demo` (what scripts/run's demo tenant gets): a patient, a
    calendar in São Paulo, a check-up it performs, and the patient booked at 09:00 local on the
    next weekday, all served by the API like any other."""
    import datetime as dt
    from zoneinfo import ZoneInfo
    email, password = crm.unique_email("demo"), crm.new_password()
    out = crm.run_json_cli(["tenant", "create", "--name", "Demo", "--admin-email", email,
                            "--admin-password", password, "--demo"], cli_env)
    demo = out["demo"]
    t = crm.login(client, email, password)["access_token"]
    appt = crm.assert_json_response(client.get(crm.appointment_url(demo["appointment_id"]),
                                               token=t), 200)
    assert (appt["contact_id"], appt["service_id"], appt["calendar_id"], appt["status"]) == (
        demo["contact_id"], demo["service_id"], demo["calendar_id"], "booked"), appt
    start = crm.parse_timestamp(appt["start"]).astimezone(ZoneInfo("America/Sao_Paulo"))
    today = dt.datetime.now(ZoneInfo("America/Sao_Paulo")).date()
    assert (start.hour, start.minute) == (9, 0) and start.isoweekday() <= 5, appt
    assert today < start.date() <= today + dt.timedelta(days=3), appt
    assert crm.get_contact(client, t, demo["contact_id"])["first_name"] == "Maria"
    svc = crm.assert_json_response(client.get(crm.service_url(demo["service_id"]), token=t), 200)
    assert (svc["price"], svc["currency"], svc["calendar_ids"]) == (
        "250.00", "BRL", [demo["calendar_id"]]), svc
    # The booked slot is not offered again.
    day = start.astimezone(dt.timezone.utc)
    slots = crm.free_slots(client, t, demo["service_id"],
                           (day - dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           (day + dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert slots and appt["start"] not in [s[1] for s in slots], slots
