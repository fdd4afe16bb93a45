"""Notes on a contact (contract §11, docs/notes.md): what colleagues leave on a patient's record.
Agents and above write; authors change and delete their own notes, managers and admins anyone's;
pinned notes come first, then the newest. Every read and change is audited as a touch of the
contact's record, and the notes go with the contact (a delete, an erasure) and come with it in
its export."""
import crm


def notes_url(contact_id, note_id=None) -> str:
    base = f"{crm.contact_url(contact_id)}/notes"
    return base if note_id is None else f"{base}/{note_id}"


def add(client, token, contact_id, body: str, **fields) -> dict:
    resp = client.post(notes_url(contact_id), {"body": body, **fields}, token=token)
    note = crm.assert_json_response(resp, 201)
    assert resp.header("Location") == notes_url(contact_id, note["id"]), resp.describe()
    assert set(note) == {"id", "contact_id", "body", "pinned", "author_id", "created_at",
                         "updated_at"}, note
    assert note["contact_id"] == contact_id and note["body"] == body, note
    crm.assert_timestamp(note["created_at"])
    return note


def bodies(client, token, contact_id, **params) -> list[str]:
    page = crm.assert_json_response(
        client.get(crm.with_query(notes_url(contact_id), params or None), token=token), 200)
    return [n["body"] for n in page["items"]]


def test_notes_are_kept_pinned_first_then_newest_first(client, sess):
    c = crm.create_contact(client, sess.admin)["id"]
    agent = sess.tokens["agent"]
    first = add(client, agent, c, "Allergic to penicillin")
    add(client, agent, c, "Prefers mornings")
    add(client, agent, c, "Asked about the fasting rules")
    assert first["author_id"] == sess.users["agent"]["id"] and first["pinned"] is False
    assert bodies(client, agent, c) == ["Asked about the fasting rules", "Prefers mornings",
                                        "Allergic to penicillin"]
    pinned = crm.assert_json_response(
        client.patch(notes_url(c, first["id"]), {"pinned": True}, token=agent), 200)
    assert pinned["pinned"] is True and pinned["body"] == first["body"], pinned
    assert pinned["updated_at"] > first["updated_at"], pinned
    assert bodies(client, sess.tokens["viewer"], c) == [
        "Allergic to penicillin", "Asked about the fasting rules", "Prefers mornings"]
    # Paging and the search over the text, in any case.
    page = crm.assert_json_response(
        client.get(crm.with_query(notes_url(c), {"page": 2, "per_page": 2}), token=agent), 200)
    crm.assert_page(page, total=3, page=2, per_page=2)
    assert [n["body"] for n in page["items"]] == ["Prefers mornings"], page
    assert bodies(client, agent, c, q="FASTING") == ["Asked about the fasting rules"]
    assert bodies(client, agent, c, q="nothing like it") == []
    # The search text is counted in characters: 200 accented letters (400 bytes) are allowed.
    assert bodies(client, agent, c, q="ç" * 200) == []
    crm.assert_validation_locs(client.get(crm.with_query(notes_url(c), {"q": "x" * 201}),
                                          token=agent), ("query", "q"))
    got = crm.assert_json_response(client.get(notes_url(c, first["id"]), token=agent), 200)
    assert got == pinned
    # Gone for good once deleted.
    crm.assert_no_content(client.delete(notes_url(c, first["id"]), token=agent))
    crm.assert_error(client.get(notes_url(c, first["id"]), token=agent), 404, "NOT_FOUND")
    crm.assert_error(client.patch(notes_url(c, first["id"]), {"body": "x"}, token=agent), 404,
                     "NOT_FOUND")
    assert len(bodies(client, agent, c)) == 2


def test_authors_change_their_own_notes_and_managers_anyone(client, sess, cli_env):
    c = crm.create_contact(client, sess.admin)["id"]
    other_agent, email, password = crm.create_user(client, sess.admin, "agent")
    other = crm.login(client, email, password)["access_token"]
    note = add(client, sess.tokens["agent"], c, "Needs an interpreter")
    # A viewer reads but never writes.
    crm.assert_error(client.post(notes_url(c), {"body": "no"}, token=sess.tokens["viewer"]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    # Another agent may not change or delete it, and nothing changes.
    crm.assert_error(client.patch(notes_url(c, note["id"]), {"body": "changed"}, token=other),
                     403, "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.delete(notes_url(c, note["id"]), token=other), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert bodies(client, other, c) == ["Needs an interpreter"]
    # Its author may; so may a manager.
    crm.assert_json_response(client.patch(notes_url(c, note["id"]), {
        "body": "Needs a Portuguese interpreter"}, token=sess.tokens["agent"]), 200)
    managed = crm.assert_json_response(client.patch(notes_url(c, note["id"]), {
        "body": "Needs a Portuguese interpreter (booked)"}, token=sess.tokens["manager"]), 200)
    assert managed["author_id"] == sess.users["agent"]["id"], managed  # still the author's
    crm.assert_no_content(client.delete(notes_url(c, note["id"]), token=sess.tokens["manager"]))


def test_bad_input_and_records_not_held_change_nothing(client, sess, sess_b):
    c = crm.create_contact(client, sess.admin)["id"]
    t = sess.tokens["agent"]
    crm.assert_validation_locs(client.post(notes_url(c), {"body": ""}, token=t), ("body", "body"))
    crm.assert_validation_locs(client.post(notes_url(c), {"body": "x" * 10001}, token=t),
                               ("body", "body"))
    crm.assert_validation_locs(client.post(notes_url(c), {"body": "ok", "pinned": "yes"},
                                           token=t), ("body", "pinned"))
    crm.assert_validation_locs(client.post(notes_url(c), {"body": "ok", "author_id": 1},
                                           token=t), ("body", "author_id"))
    crm.assert_validation_locs(client.post(notes_url(c), {}, token=t), ("body", "body"))
    add(client, t, c, "x" * 10000)  # the longest allowed
    crm.assert_validation_locs(client.get(crm.with_query(notes_url(c), {"per_page": 0}), token=t),
                               ("query", "per_page"))
    # A contact of no tenant, and one of another tenant.
    crm.assert_error(client.post(notes_url(987654321), {"body": "x"}, token=t), 404, "NOT_FOUND")
    theirs = crm.create_contact(client, sess_b.admin)["id"]
    their_note = add(client, sess_b.admin, theirs, "theirs")
    crm.assert_error(client.get(notes_url(theirs), token=t), 403, "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.post(notes_url(theirs), {"body": "x"}, token=t), 403,
                     "INSUFFICIENT_PERMISSIONS")
    # Their note's id under our own contact: not ours to see or change.
    crm.assert_error(client.get(notes_url(c, their_note["id"]), token=t), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.patch(notes_url(c, their_note["id"]), {"body": "mine"},
                                  token=sess.admin), 403, "INSUFFICIENT_PERMISSIONS")
    # Our note under another of our contacts: 404.
    mine = add(client, t, c, "mine")
    c2 = crm.create_contact(client, sess.admin)["id"]
    crm.assert_error(client.get(notes_url(c2, mine["id"]), token=t), 404, "NOT_FOUND")
    assert bodies(client, sess_b.admin, theirs) == ["theirs"]
    assert len(bodies(client, t, c)) == 2


def test_each_read_and_change_is_audited_on_the_contacts_record(client, sess):
    c = crm.create_contact(client, sess.admin)["id"]
    t = sess.tokens["agent"]
    note = add(client, t, c, "Result due on Friday")
    client.get(notes_url(c), token=t)
    client.get(notes_url(c, note["id"]), token=t)
    client.patch(notes_url(c, note["id"]), {"pinned": True}, token=t)
    crm.assert_no_content(client.delete(notes_url(c, note["id"]), token=t))

    def actions():
        rows = crm.audit_rows(client, sess.admin, resource="contact", resource_id=c)
        return [r for r in rows if "note" in r["action"]]

    assert crm.eventually(lambda: len(actions()) == 5, timeout=5), actions()
    rows = actions()
    by_action = {r["action"]: r for r in rows}
    assert set(by_action) == {"create_note", "list_notes", "read_note", "update_note",
                              "delete_note"}, rows
    assert by_action["create_note"]["fields"] == ["body"], by_action["create_note"]
    assert by_action["update_note"]["fields"] == ["pinned"], by_action["update_note"]
    for r in rows:
        assert r["user_id"] == sess.users["agent"]["id"] and r["outcome"] == "success", r
        assert "Friday" not in str(r), r  # names of fields, never the text


def test_notes_go_with_their_contact_and_come_with_its_export(client, sess, database):
    c = crm.create_contact(client, sess.admin)["id"]
    t = sess.tokens["agent"]
    note = add(client, t, c, "Exported with the record", pinned=True)
    export = crm.assert_json_response(client.get(f"{crm.contact_url(c)}/export",
                                                 token=sess.admin), 200)
    assert [(n["id"], n["body"], n["pinned"]) for n in export["notes"]] == [
        (note["id"], "Exported with the record", True)], export["notes"]
    crm.assert_no_content(client.delete(crm.contact_url(c), token=sess.admin))
    crm.assert_error(client.get(notes_url(c), token=t), 404, "NOT_FOUND")
    assert database.query(f"SELECT count(*) FROM notes WHERE contact_id = {c}").strip() == "0"


def test_notes_are_reloaded_after_their_actor_fails(server, client, sess):
    c = crm.create_contact(client, sess.admin)["id"]
    add(client, sess.tokens["agent"], c, "Kept in Postgres")
    metrics = server.metrics_client()
    crm.assert_json_response(metrics.post(f"/actors/{sess.tenant.tenant_id}/notes/fail"), 202)
    # Answered from memory reloaded from Postgres (a request during the restart may get 503).
    def reloaded():
        resp = client.get(notes_url(c), token=sess.admin)
        if resp.status == 503:
            return False
        return [n["body"] for n in crm.assert_json_response(resp, 200)["items"]]

    assert crm.eventually(reloaded, timeout=5) == ["Kept in Postgres"]
