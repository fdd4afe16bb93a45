"""The contact's timeline (contract §11, docs/patient-record.md "Timeline"): one newest-first feed
of a patient's notes, tasks, messages, appointments, deals and their stage moves, consents and
merges, each item shaped as its own resource, paged by a cursor that stays stable while new
items arrive. Reading it is a read of the patient's record: audited, and refused across
tenants."""
import secrets

import crm

SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}
SECRET = "timeline-secret-" + secrets.token_hex(8)
ITEM_KEYS = {"type", "at", "summary"}


def timeline_url(contact_id, **params) -> str:
    return crm.with_query(f"{crm.contact_url(contact_id)}/timeline", params or None)


def timeline(client, token, contact_id, **params) -> dict:
    body = crm.assert_json_response(client.get(timeline_url(contact_id, **params), token=token),
                                    200)
    assert set(body) == {"items", "next_cursor"}, body
    for item in body["items"]:
        assert ITEM_KEYS <= set(item) and "id" in item, item
        crm.assert_timestamp(item["at"])
    return body


def whole(client, token, contact_id, limit=7) -> list[dict]:
    items, cursor = [], None
    while True:
        params = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        page = timeline(client, token, contact_id, **params)
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def resource(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in ITEM_KEYS}


def note(client, token, contact_id, body: str) -> dict:
    return crm.assert_json_response(
        client.post(f"{crm.contact_url(contact_id)}/notes", {"body": body}, token=token), 201)


def test_the_timeline_is_one_newest_first_feed_of_the_whole_record(client, sess):
    admin, agent = sess.admin, sess.tokens["agent"]
    with crm.Receiver([200]) as rcv:
        chan = crm.create_channel(client, admin, type="api", webhook_secret=SECRET,
                                  config={"outbound_url": rcv.url("/out")})
        ack = crm.inbound(client, chan["id"], SECRET, {"phone": crm.unique_phone()},
                          "Are my blood test results ready?")
        cid = ack["contact_id"]
        sent = crm.send_message(client, agent, ack["conversation_id"], "Yes, since this morning")
        rcv.wait_for(1, 20)
    n = note(client, agent, cid, "Called about the results\nSecond line is not in the summary")
    task = crm.assert_json_response(client.post("/api/v1/tasks", {
        "title": "Send the results by e-mail", "contact_id": cid}, token=agent), 201)
    pipeline = crm.default_pipeline(client, admin)
    deal = crm.create_deal(client, admin, contact_id=cid, title="Check-up package")
    target = [s for s in pipeline["stages"] if s["id"] != deal["stage_id"]
              and s["kind"] == "open"][0]
    crm.move_deal(client, admin, deal["id"], target["id"])
    consent = crm.assert_json_response(client.post(f"{crm.contact_url(cid)}/consents", {
        "purpose": "marketing", "granted": True, "source": "form"}, token=admin), 201)
    manager = sess.tokens["manager"]
    cal = crm.create_calendar(client, manager)
    svc = crm.create_service(client, manager, [cal["id"]])
    appt = crm.booked(client, agent, cid, svc["id"], cal["id"], "2030-01-07T09:00:00.000000Z")

    items = timeline(client, sess.tokens["viewer"], cid)["items"]
    assert [i["type"] for i in items] == ["appointment", "consent", "deal_move", "deal", "task",
                                          "note", "message", "message"], items
    ats = [i["at"] for i in items]
    assert ats == sorted(ats, reverse=True), ats
    by_type = {}
    for i in items:
        by_type.setdefault(i["type"], []).append(i)
    # Each item is its resource as its own route answers it, plus type, at and summary.
    assert resource(by_type["note"][0]) == n
    assert by_type["note"][0]["summary"] == "Called about the results"
    got_task = crm.assert_json_response(client.get(f"/api/v1/tasks/{task['id']}", token=agent),
                                        200)
    assert resource(by_type["task"][0]) == got_task
    assert by_type["task"][0]["summary"] == "Send the results by e-mail"
    assert resource(by_type["deal"][0]) == crm.get_deal(client, admin, deal["id"])
    [move] = [h for h in crm.deal_history(client, admin, deal["id"])
              if h["kind"] == "stage_changed"]
    # A stage move's time is the item's.
    assert resource(by_type["deal_move"][0]) | {"at": by_type["deal_move"][0]["at"]} == move
    assert target["name"] in by_type["deal_move"][0]["summary"]
    got_consent = crm.assert_json_response(
        client.get(f"{crm.contact_url(cid)}/consents/{consent['id']}", token=admin), 200)
    assert resource(by_type["consent"][0]) == got_consent
    got_appt = crm.assert_json_response(
        client.get(crm.appointment_url(appt["id"]), token=agent), 200)
    assert resource(by_type["appointment"][0]) == got_appt
    listed = {m["id"]: m for m in crm.list_messages(client, agent, ack["conversation_id"])}
    for m in by_type["message"]:
        assert resource(m) == listed[m["id"]], (m, listed)
    assert [m["id"] for m in by_type["message"]][0] == sent["id"]
    assert by_type["message"][1]["summary"] == "Are my blood test results ready?"
    # Nobody else's record is in it.
    other = crm.create_contact(client, admin)["id"]
    note(client, agent, other, "Someone else")
    assert timeline(client, admin, other)["items"][0]["summary"] == "Someone else"
    assert all(i.get("body") != "Someone else" for i in timeline(client, admin, cid)["items"])


def test_paging_is_stable_while_new_items_arrive(client, sess):
    agent = sess.tokens["agent"]
    cid = crm.create_contact(client, sess.admin)["id"]
    first = [note(client, agent, cid, f"note {i}")["id"] for i in range(23)]
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 5} | ({"cursor": cursor} if cursor else {})
        page = timeline(client, agent, cid, **params)
        assert len(page["items"]) <= 5, page
        seen += [i["id"] for i in page["items"]]
        cursor = page["next_cursor"]
        pages += 1
        if pages == 2:  # new notes arrive while a client pages through
            late = [note(client, agent, cid, f"late {i}")["id"] for i in range(4)]
        if cursor is None:
            break
    assert seen == sorted(first, reverse=True), seen  # none twice, none skipped
    assert pages == 5
    newest = timeline(client, agent, cid, limit=4)["items"]
    assert [i["id"] for i in newest] == sorted(late, reverse=True)
    assert [i["id"] for i in whole(client, agent, cid)] == sorted(first + late, reverse=True)


def test_bad_queries_are_422_and_other_records_are_not_shown(client, sess, sess_b):
    agent = sess.tokens["agent"]
    cid = crm.create_contact(client, sess.admin)["id"]
    other = crm.create_contact(client, sess.admin)["id"]
    for i in range(3):
        note(client, agent, cid, f"n{i}")
        note(client, agent, other, f"o{i}")
    cursor = timeline(client, agent, cid, limit=1)["next_cursor"]
    other_cursor = timeline(client, agent, other, limit=1)["next_cursor"]
    assert cursor and other_cursor
    for params, loc in (({"limit": 0}, ("query", "limit")), ({"limit": 101}, ("query", "limit")),
                        ({"limit": "x"}, ("query", "limit")),
                        ({"cursor": "garbage"}, ("query", "cursor")),
                        ({"cursor": cursor + "x"}, ("query", "cursor")),
                        ({"cursor": cursor.replace("note", "nope")}, ("query", "cursor")),
                        ({"cursor": other_cursor}, ("query", "cursor"))):
        crm.assert_validation_locs(client.get(timeline_url(cid, **params), token=agent), loc)
    crm.assert_error(client.get(timeline_url(crm.NOWHERE_ID), token=agent), 404, "NOT_FOUND")
    resp = client.get(timeline_url(cid), token=sess_b.admin)
    assert resp.status in (403, 404), resp.describe()
    assert b"n0" not in resp.body


def test_reading_the_timeline_is_audited_on_the_patients_record(client, sess):
    cid = crm.create_contact(client, sess.admin)["id"]
    note(client, sess.tokens["agent"], cid, "seen")
    timeline(client, sess.tokens["viewer"], cid)

    def read():
        rows = crm.audit_rows(client, sess.admin, action="read_timeline", resource_id=cid)
        return rows if rows else None
    [row] = crm.eventually(read, timeout=5)
    assert (row["resource"], row["user_id"], row["outcome"]) == (
        "contact", sess.users["viewer"]["id"], "success"), row
