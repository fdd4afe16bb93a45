"""Duplicates and merges (contract §11, docs/patient-record.md "Duplicates and merge"): the
candidate pairs a front desk reviews, and a merge that moves everything about the duplicate to the
contact that stays in one transaction (deals, conversations and the provider ids that find them,
notes, tasks, appointments, consents, tags, custom fields the survivor lacks), deletes the
duplicate, emits contact.merged and is audited. A later GET of the duplicate answers 404 naming
the survivor. Bad merges change nothing; a merge racing writes about either contact loses no
acknowledged write; a withdrawn consent on the duplicate still holds after the merge."""
import secrets

import crm

SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}
SECRET = "merge-secret-" + secrets.token_hex(8)
SEND_TIMEOUT = 20


def merge_url(contact_id) -> str:
    return f"{crm.contact_url(contact_id)}/merge"


def merge(client, token, survivor, duplicate, status=200, **prefer):
    body = {"duplicate_id": duplicate} | ({"prefer": prefer} if prefer else {})
    resp = client.post(merge_url(survivor), body, token=token)
    if status != 200:
        return resp
    return crm.assert_json_response(resp, 200)


def assert_merged_into(resp, survivor) -> None:
    """A GET of a merged contact: 404 NOT_FOUND naming the survivor."""
    body = crm.assert_json_response(resp, 404)
    assert set(body) == {"detail", "code", "merged_into"}, resp.describe()
    assert (body["code"], body["merged_into"]) == ("NOT_FOUND", survivor), resp.describe()


def note(client, token, contact_id, body: str) -> dict:
    return crm.assert_json_response(
        client.post(f"{crm.contact_url(contact_id)}/notes", {"body": body}, token=token), 201)


def notes_of(client, token, contact_id) -> list[str]:
    return [n["body"] for n in crm.list_all(client, token, f"{crm.contact_url(contact_id)}/notes")]


def api_channel(client, token, url):
    return crm.create_channel(client, token, type="api", webhook_secret=SECRET,
                              config={"outbound_url": url})


def test_a_merge_moves_the_whole_record_to_the_survivor(client, sess):
    admin, agent, manager = sess.admin, sess.tokens["agent"], sess.tokens["manager"]
    field = crm.create_field(client, admin, name=crm.field_name("allergy"), field_type="text")
    with crm.Receiver([200] * 4) as rcv:
        hook = crm.create_subscription(client, admin, url=rcv.url("/events"),
                                       events=["contact.merged"])
        chan = api_channel(client, admin, rcv.url("/out"))
        phone = crm.unique_phone()
        ack = crm.inbound(client, chan["id"], SECRET, {"phone": phone, "external_id": "ext-d"},
                          "Hello, it is Rita again")
        dup = ack["contact_id"]
        crm.assert_json_response(client.patch(crm.contact_url(dup), {
            "first_name": "Rita", "last_name": "Lee", "email": crm.unique_email("rita"),
            "tags": ["cardio"], "custom_fields": {field["name"]: "penicillin"}}, token=admin), 200)
        survivor = crm.create_contact(client, admin, first_name="R.", last_name="Lee",
                                      tags=["vip"])["id"]
        n = note(client, agent, dup, "Fasting for the blood test")
        task = crm.assert_json_response(client.post("/api/v1/tasks", {
            "title": "Call back", "contact_id": dup}, token=agent), 201)
        deal = crm.create_deal(client, admin, contact_id=dup)
        consent = crm.assert_json_response(client.post(f"{crm.contact_url(dup)}/consents", {
            "purpose": "marketing", "granted": True, "source": "form"}, token=admin), 201)
        cal = crm.create_calendar(client, manager)
        svc = crm.create_service(client, manager, [cal["id"]])
        appt = crm.booked(client, agent, dup, svc["id"], cal["id"], "2030-01-08T09:00:00.000000Z")
        before_dup = crm.get_contact(client, admin, dup)

        merged = merge(client, manager, survivor, dup, first_name="duplicate")
        # The survivor keeps its id and what it had; takes what it lacked and the names asked.
        assert merged["id"] == survivor
        assert (merged["first_name"], merged["last_name"], merged["email"], merged["phone"]) == (
            "Rita", "Lee", before_dup["email"], phone), merged
        assert merged["tags"] == ["vip", "cardio"], merged
        assert merged["custom_fields"][field["name"]] == "penicillin", merged
        assert crm.get_contact(client, admin, survivor) == merged

        # The duplicate is gone, and says where it went.
        assert_merged_into(client.get(crm.contact_url(dup), token=admin), survivor)
        # Everything about it is the survivor's.
        assert notes_of(client, agent, survivor) == [n["body"]]
        got_task = crm.assert_json_response(client.get(f"/api/v1/tasks/{task['id']}",
                                                        token=agent), 200)
        assert got_task["contact_id"] == survivor, got_task
        assert crm.get_deal(client, admin, deal["id"])["contact_id"] == survivor
        deals = crm.assert_json_response(client.get(crm.contact_deals_url(survivor), token=admin),
                                         200)
        assert [d["id"] for d in deals["items"]] == [deal["id"]], deals
        consents = crm.assert_json_response(
            client.get(f"{crm.contact_url(survivor)}/consents", token=admin), 200)
        assert consent["id"] in [c["id"] for c in consents["items"]], consents
        got_appt = crm.assert_json_response(client.get(crm.appointment_url(appt["id"]),
                                                       token=agent), 200)
        assert got_appt["contact_id"] == survivor, got_appt
        conv = crm.get_conversation(client, agent, ack["conversation_id"])
        assert conv["contact_id"] == survivor, conv
        # The provider's id finds the survivor: the next message lands in the same conversation.
        again = crm.inbound(client, chan["id"], SECRET, {"phone": phone, "external_id": "ext-d"},
                            "Any news?")
        assert (again["contact_id"], again["conversation_id"]) == (survivor,
                                                                  ack["conversation_id"]), again
        # The timeline shows the merge; the export holds the moved record.
        items = crm.assert_json_response(
            client.get(f"{crm.contact_url(survivor)}/timeline", token=agent), 200)["items"]
        [m] = [i for i in items if i["type"] == "merge"]
        assert (m["survivor_id"], m["duplicate_id"], m["merged_by"]) == (
            survivor, dup, sess.users["manager"]["id"]), m
        assert m["moved"]["notes"] == 1 and m["moved"]["deals"] == 1, m
        assert m["moved"]["conversations"] == 1 and m["moved"]["appointments"] == 1, m
        doc = crm.assert_json_response(client.get(f"{crm.contact_url(survivor)}/export",
                                                  token=admin), 200)
        assert [x["id"] for x in doc["notes"]] == [n["id"]], doc["notes"]
        # One event says what happened; the audit trail names both contacts.
        [event] = rcv.wait_for(1, SEND_TIMEOUT, where=lambda r: r.path == "/events")
    assert event.json["type"] == "contact.merged", event.describe()
    data = event.json["data"]
    assert (data["contact_id"], data["duplicate_id"]) == (survivor, dup), data
    assert "first_name" in data["changed"], data
    assert hook["id"]

    def audited():
        rows = crm.audit_rows(client, admin, action="merge", resource_id=survivor)
        return rows or None
    [row] = crm.eventually(audited, timeout=5)
    assert (row["resource"], row["user_id"], row["outcome"]) == (
        "contact", sess.users["manager"]["id"], "success"), row


def test_bad_merges_are_refused_and_change_nothing(client, sess, sess_b):
    admin, manager = sess.admin, sess.tokens["manager"]
    a = crm.create_contact(client, admin, first_name="Ana")
    b = crm.create_contact(client, admin, first_name="Bia")
    theirs = crm.create_contact(client, sess_b.admin, first_name="Theirs")
    before = [crm.get_contact(client, admin, a["id"]), crm.get_contact(client, admin, b["id"])]
    for body, loc in (({}, ("body", "duplicate_id")),
                      ({"duplicate_id": a["id"]}, ("body", "duplicate_id")),
                      ({"duplicate_id": "x"}, ("body", "duplicate_id")),
                      ({"duplicate_id": crm.NOWHERE_ID}, ("body", "duplicate_id")),
                      ({"duplicate_id": theirs["id"]}, ("body", "duplicate_id")),
                      ({"duplicate_id": b["id"], "prefer": {"id": "duplicate"}},
                       ("body", "prefer", "id")),
                      ({"duplicate_id": b["id"], "prefer": {"email": "both"}},
                       ("body", "prefer", "email")),
                      ({"duplicate_id": b["id"], "prefer": ["email"]}, ("body", "prefer")),
                      ({"duplicate_id": b["id"], "extra": 1}, ("body", "extra"))):
        crm.assert_validation_locs(client.post(merge_url(a["id"]), body, token=manager), loc)
    # Someone else's contact as the survivor; an agent, who may not delete.
    resp = client.post(merge_url(theirs["id"]), {"duplicate_id": a["id"]}, token=manager)
    assert resp.status in (403, 404), resp.describe()
    crm.assert_error(client.post(merge_url(a["id"]), {"duplicate_id": b["id"]},
                                 token=sess.tokens["agent"]), 403, "INSUFFICIENT_PERMISSIONS")
    assert [crm.get_contact(client, admin, a["id"]),
            crm.get_contact(client, admin, b["id"])] == before
    assert crm.get_contact(client, sess_b.admin, theirs["id"])["first_name"] == "Theirs"
    # A duplicate merged once cannot be merged again; its survivor can.
    c = crm.create_contact(client, admin, first_name="Cid")["id"]
    merge(client, manager, a["id"], b["id"])
    resp = merge(client, manager, c, b["id"], status=422)
    crm.assert_validation_locs(resp, ("body", "duplicate_id"))
    merged = merge(client, manager, c, a["id"])
    assert merged["id"] == c
    # Merged twice over: the first duplicate now names the last survivor.
    assert_merged_into(client.get(crm.contact_url(b["id"]), token=admin), c)


def test_a_withdrawal_given_on_the_duplicate_still_holds_after_the_merge(client, sess):
    admin, agent = sess.admin, sess.tokens["agent"]
    with crm.Receiver([200] * 3) as rcv:
        chan = api_channel(client, admin, rcv.url("/out"))
        kept = crm.inbound(client, chan["id"], SECRET, {"phone": crm.unique_phone()}, "hi")
        other = crm.inbound(client, chan["id"], SECRET, {"phone": crm.unique_phone()}, "hi")
        survivor, dup = kept["contact_id"], other["contact_id"]
        for cid, granted in ((survivor, True), (dup, False)):  # the withdrawal is the latest
            crm.assert_json_response(client.post(f"{crm.contact_url(cid)}/consents", {
                "purpose": "marketing", "granted": granted, "source": "form"}, token=admin), 201)
        merge(client, sess.tokens["manager"], survivor, dup)
        for conv in (kept["conversation_id"], other["conversation_id"]):
            resp = client.post(crm.messages_url(conv), {"text": "20% off whitening",
                                                        "purpose": "marketing"}, token=agent)
            crm.assert_error(resp, 409, "CONFLICT")
        # Treatment messages still go.
        crm.send_message(client, agent, kept["conversation_id"], "Your results are ready")
        rcv.wait_for(1, SEND_TIMEOUT)
    assert [r.json["data"]["text"] for r in rcv.requests] == ["Your results are ready"]


def test_a_merge_racing_writes_about_both_contacts_loses_no_acknowledged_write(client, sess):
    admin, agent, manager = sess.admin, sess.tokens["agent"], sess.tokens["manager"]
    survivor = crm.create_contact(client, admin, first_name="Stays")["id"]
    dup = crm.create_contact(client, admin, first_name="Goes")["id"]

    def write(job):
        kind, n = job
        if kind == "merge":
            return kind, n, client.post(merge_url(survivor), {"duplicate_id": dup}, token=manager)
        target = survivor if kind.endswith("s") else dup
        if kind.startswith("tag"):
            return kind, n, client.post(f"{crm.contact_url(target)}/tags",
                                        {"tags": [f"{kind}-{n}"]}, token=agent)
        return kind, n, client.post(f"{crm.contact_url(target)}/notes",
                                    {"body": f"{kind}-{n}"}, token=agent)
    jobs = [(kind, n) for n in range(8) for kind in ("tag-s", "tag-d", "note-s", "note-d")]
    jobs.insert(len(jobs) // 2, ("merge", 0))
    results = crm.run_parallel(write, jobs, workers=12)
    [(_, _, merged)] = [r for r in results if r[0] == "merge"]
    assert merged.status == 200, merged.describe()
    final = crm.get_contact(client, admin, survivor)
    notes = notes_of(client, agent, survivor)
    for kind, n, resp in results:
        if kind == "merge":
            continue
        # Never a 5xx the client cannot retry; a write about the duplicate after the merge is
        # a 404 (or a 503 for a note that met the merge mid-way: retried, it is a 404).
        assert resp.status in (200, 201, 404, 503), resp.describe()
        if resp.status in (200, 201):
            if kind.startswith("tag"):
                assert f"{kind}-{n}" in final["tags"], (kind, n, final["tags"])
            else:
                assert f"{kind}-{n}" in notes, (kind, n, notes)
        if kind.endswith("s"):
            assert resp.status in (200, 201), resp.describe()
    assert_merged_into(client.get(crm.contact_url(dup), token=admin), survivor)


def test_duplicates_are_found_by_phone_mailbox_and_close_names(client, cli_env):
    sess = crm.tenant_session(client, cli_env)
    t = sess.admin
    phone = crm.unique_phone()
    company = crm.create_company(client, t, name="Clinica Norte")["id"]
    a = crm.create_contact(client, t, first_name="Ana", phone=phone)["id"]
    b = crm.create_contact(client, t, first_name="Anna", last_name="Souza", phone=phone)["id"]
    box = secrets.token_hex(4)
    c = crm.create_contact(client, t, first_name="C", email=f"marta.{box}+lab@gmail.com")["id"]
    d = crm.create_contact(client, t, first_name="D", email=f"Marta{box}@googlemail.com")["id"]
    e = crm.create_contact(client, t, first_name="Joana", last_name="Ferreira",
                           company_id=company)["id"]
    f = crm.create_contact(client, t, first_name="Joana", last_name="Fereira",
                           company_id=company)["id"]
    crm.create_contact(client, t, first_name="Joana", last_name="Ferreira")  # no company shared
    crm.create_contact(client, t, first_name="Paulo", last_name="Mendes", company_id=company)
    page = crm.assert_json_response(client.get("/api/v1/contacts/duplicates", token=t), 200)
    crm.assert_page(page, total=3, page=1, per_page=20)
    assert page["items"] == [
        {"contact_ids": [a, b], "reasons": ["phone"]},
        {"contact_ids": [c, d], "reasons": ["email"]},
        {"contact_ids": [e, f], "reasons": ["name"]}], page["items"]
    # Paged like every list; merged away, a pair is no longer a candidate.
    second = crm.assert_json_response(
        client.get(crm.with_query("/api/v1/contacts/duplicates", {"page": 2, "per_page": 2}),
                   token=t), 200)
    assert second["items"] == [{"contact_ids": [e, f], "reasons": ["name"]}], second
    merge(client, t, a, b)
    page = crm.assert_json_response(client.get("/api/v1/contacts/duplicates", token=t), 200)
    assert [p["contact_ids"] for p in page["items"]] == [[c, d], [e, f]], page
    # The pairs are kept between requests and found again after any change: a renamed contact
    # leaves its pair, a new one sharing a phone makes one.
    crm.assert_json_response(client.patch(crm.contact_url(f), {"last_name": "Albuquerque"},
                                          token=t), 200)
    g = crm.create_contact(client, t, first_name="Gil", phone=phone)["id"]
    page = crm.assert_json_response(client.get("/api/v1/contacts/duplicates", token=t), 200)
    assert [p["contact_ids"] for p in page["items"]] == [[a, g], [c, d]], page
    crm.assert_validation_locs(client.get(crm.with_query("/api/v1/contacts/duplicates",
                                                         {"per_page": 0}), token=t),
                               ("query", "per_page"))


def test_a_merge_is_remembered_by_a_reloaded_actor_and_goes_with_the_survivor(server, client,
                                                                             sess):
    admin, manager = sess.admin, sess.tokens["manager"]
    survivor = crm.create_contact(client, admin, first_name="Keeps")["id"]
    dup = crm.create_contact(client, admin, first_name="Merged")["id"]
    note(client, sess.tokens["agent"], dup, "kept with the survivor")
    merge(client, manager, survivor, dup)
    # The contacts actor fails and reloads: the merge is read back from Postgres.
    metrics = server.metrics_client()
    crm.assert_json_response(metrics.post(f"/actors/{sess.tenant.tenant_id}/contacts/fail"), 202)

    def reloaded():
        resp = client.get(crm.contact_url(dup), token=admin)
        return resp if resp.status != 503 else None
    assert_merged_into(crm.eventually(reloaded, timeout=5), survivor)
    # Deleting the survivor takes its notes (the duplicate's too) and the record of its merges:
    # the duplicate is then a plain 404.
    crm.assert_no_content(client.delete(crm.contact_url(survivor), token=admin))
    crm.assert_error(client.get(crm.contact_url(dup), token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.get(crm.contact_url(survivor), token=admin), 404, "NOT_FOUND")


def test_a_waiting_workflow_run_about_the_duplicate_goes_on_with_the_survivor(client, cli_env,
                                                                             database):
    """A follow-up waiting on the duplicate (a delay, then a tag) is not lost to the merge: its
    next step acts on the survivor, in memory and in the stored run (a restart resumes it so)."""
    s = crm.tenant_session(client, cli_env)
    t = s.admin
    wf = crm.create_workflow(client, t, trigger_type="contact.created",
                             conditions=[{"field": "first_name", "op": "eq", "value": "Twice"}],
                             actions=[{"type": "delay", "params": {"seconds": 2}},
                                      {"type": "add_tag", "params": {"tag": "followed-up"}}])
    survivor = crm.create_contact(client, t, first_name="Once")["id"]
    dup = crm.create_contact(client, t, first_name="Twice")["id"]
    run = crm.wait_runs(client, t, wf["id"], 1, finished=False)[0]
    crm.wait_run(client, t, run["id"], statuses=("waiting",))
    moved = merge(client, t, survivor, dup)
    assert moved["id"] == survivor
    stored = database.query(
        f"SELECT trigger_payload->>'contact_id' FROM workflow_runs WHERE id = {run['id']}")
    assert stored.strip() == str(survivor), stored
    done = crm.wait_run(client, t, run["id"])
    assert done["status"] == "succeeded", done
    assert done["steps"][1]["result"]["contact_id"] == survivor, done["steps"]
    assert "followed-up" in crm.get_contact(client, t, survivor)["tags"]
    merges = database.query(
        f"SELECT moved->>'workflow_runs' FROM contact_merges WHERE duplicate_id = {dup}")
    assert merges.strip() == "1", merges
