"""The owner of a contact (contract §11, docs/design.md "The owner of a contact"): `owner_id` names an active user
of the tenant who looks after the patient. It is set on create, changed or cleared on update,
filters the list and the export, is a column of the export and the import, and a workflow's
update_contact may set it. Anyone else (another tenant's user, a deactivated one, no user) is a
422 that changes nothing."""
import csv
import io

import crm


def test_an_owner_is_set_filtered_and_cleared(client, sess):
    t = sess.tokens["agent"]
    agent = sess.users["agent"]["id"]
    manager = sess.users["manager"]["id"]
    owned = crm.assert_json_response(client.post(crm.CONTACTS, {
        "first_name": "Ana", "owner_id": agent}, token=t), 201)
    other = crm.assert_json_response(client.post(crm.CONTACTS, {
        "first_name": "Bia", "owner_id": manager}, token=t), 201)
    nobody = crm.create_contact(client, t)
    got = crm.get_contact(client, t, owned["id"])
    assert got["owner_id"] == agent, got
    assert crm.get_contact(client, t, nobody["id"])["owner_id"] is None
    page = crm.assert_json_response(client.get(crm.with_query(crm.CONTACTS, {
        "owner_id": agent, "per_page": 100}), token=t), 200)
    assert [c["id"] for c in page["items"]] == [owned["id"]], page
    assert all(c["owner_id"] == agent for c in page["items"])
    # Handed over, then cleared; the audit row names the field, never the value.
    changed = crm.assert_json_response(client.patch(crm.contact_url(owned["id"]), {
        "owner_id": manager}, token=t), 200)
    assert changed["owner_id"] == manager, changed
    ids = {c["id"] for c in crm.assert_json_response(client.get(crm.with_query(crm.CONTACTS, {
        "owner_id": manager, "per_page": 100}), token=t), 200)["items"]}
    assert ids == {owned["id"], other["id"]}, ids
    crm.assert_json_response(client.patch(crm.contact_url(owned["id"]), {"owner_id": None},
                                          token=t), 200)
    assert crm.get_contact(client, t, owned["id"])["owner_id"] is None
    rows = crm.audit_rows(client, sess.admin, resource="contact", resource_id=owned["id"],
                          action="update")
    assert any(r["fields"] == ["owner_id"] for r in rows), rows


def test_an_owner_who_is_not_an_active_user_of_the_tenant_is_refused(client, sess, sess_b):
    t = sess.admin
    theirs = crm.create_user(client, sess_b.admin, "agent")[0]["id"]
    leaving = crm.create_user(client, t, "agent")[0]["id"]
    kept = crm.assert_json_response(client.post(crm.CONTACTS, {
        "first_name": "Kept", "owner_id": leaving}, token=t), 201)
    crm.assert_json_response(client.patch(f"/api/v1/users/{leaving}", {"is_active": False},
                                          token=t), 200)
    before = crm.list_total(client, t)
    for owner, kind in [(theirs, "value_error"), (987654321, "value_error"),
                        (leaving, "value_error"), (0, "int_parsing"), ("7", "int_parsing")]:
        resp = client.post(crm.CONTACTS, {"first_name": "X", "owner_id": owner}, token=t)
        crm.assert_validation_locs(resp, ("body", "owner_id"))
        assert [i["type"] for i in crm.validation_items(resp)] == [kind], resp.describe()
    assert crm.list_total(client, t) == before
    # A contact keeps a deactivated owner through other changes; naming them anew is refused.
    renamed = crm.assert_json_response(client.patch(crm.contact_url(kept["id"]), {
        "first_name": "Kept too", "owner_id": leaving}, token=t), 200)
    assert renamed["first_name"] == "Kept too", renamed
    assert crm.get_contact(client, t, kept["id"])["owner_id"] == leaving
    fresh = crm.create_contact(client, t)
    crm.assert_validation_locs(client.patch(crm.contact_url(fresh["id"]), {"owner_id": leaving},
                                            token=t), ("body", "owner_id"))
    assert crm.get_contact(client, t, fresh["id"])["owner_id"] is None
    # Reactivated, or just created: an owner at once.
    crm.assert_json_response(client.patch(f"/api/v1/users/{leaving}", {"is_active": True},
                                          token=t), 200)
    newcomer = crm.create_user(client, t, "agent")[0]["id"]
    for owner in (leaving, newcomer):
        crm.assert_json_response(client.patch(crm.contact_url(fresh["id"]), {"owner_id": owner},
                                              token=t), 200)


def test_the_owner_is_a_column_of_the_export_and_of_the_import(client, sess):
    t = sess.admin
    agent = sess.users["agent"]["id"]
    c = crm.assert_json_response(client.post(crm.CONTACTS, {
        "first_name": "Exported", "owner_id": agent}, token=t), 201)
    resp = client.get(crm.with_query("/api/v1/contacts/export", {"owner_id": agent}), token=t)
    assert resp.status == 200, resp.describe()
    rows = list(csv.reader(io.StringIO(resp.body.decode("utf-8"), newline="")))
    assert rows[0] == crm.EXPORT_HEADER, rows[0]
    at = rows[0].index("owner_id")
    assert [(r[0], r[at]) for r in rows[1:] if r[0] == str(c["id"])] == [(str(c["id"]),
                                                                          str(agent))], rows
    text = f"first_name,owner_id\r\nImported,{agent}\r\nStranger,987654321\r\n"
    resp = client.request("POST", "/api/v1/contacts/import", raw=text.encode(), token=t,
                          headers={"Content-Type": "text/csv"})
    results = crm.assert_json_response(resp, 200)["results"]
    assert "id" in results[0] and "id" not in results[1], results
    assert crm.get_contact(client, t, results[0]["id"])["owner_id"] == agent
    assert [tuple(e["loc"]) for e in results[1]["errors"]] == [("body", "rows", 1, "owner_id")]


def test_a_workflow_hands_a_new_contact_to_an_owner_who_gets_its_tasks(client, cli_env):
    s = crm.tenant_session(client, cli_env, ("agent",))
    nurse = s.users["agent"]["id"]
    wf = crm.create_workflow(client, s.admin, trigger_type="contact.created", actions=[
        {"type": "update_contact", "params": {"fields": {"owner_id": nurse}}}])
    c = crm.create_contact(client, s.admin)
    run = crm.wait_run(client, s.admin, crm.wait_runs(client, s.admin, wf["id"], 1)[0]["id"])
    assert run["status"] == "succeeded", run
    assert crm.get_contact(client, s.admin, c["id"])["owner_id"] == nurse
    # A task a workflow makes about an owned contact goes to the owner unless one is named.
    follow_up = crm.create_workflow(client, s.admin, trigger_type="contact.updated", actions=[
        {"type": "create_task", "params": {"title": "Welcome call"}}])
    crm.assert_json_response(client.patch(crm.contact_url(c["id"]), {"last_name": "Lima"},
                                          token=s.admin), 200)
    run = crm.wait_run(client, s.admin,
                       crm.wait_runs(client, s.admin, follow_up["id"], 1)[0]["id"])
    assert run["status"] == "succeeded", run
    task = crm.assert_json_response(client.get(f"/api/v1/tasks/{run['steps'][0]['result']['task_id']}",
                                               token=s.admin), 200)
    assert (task["assignee_id"], task["contact_id"]) == (nurse, c["id"]), task
