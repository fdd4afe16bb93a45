"""The patient's right to erasure (issue "Health-data compliance" item 4, docs/compliance.md
"The patient's rights"): `POST /contacts/{id}/erase` removes the person from every table,
outbox payloads, webhook delivery logs and workflow runs included, keeps only the audit trail
(which holds no values), is idempotent, and is completed after a crash."""
import secrets

import pytest

import crm

SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true", "CARECRM_WEBHOOK_RETRY_BASE": "0.2"}
SECRET = "erase-secret-" + secrets.token_hex(10)


def erase_url(contact_id) -> str:
    return f"{crm.contact_url(contact_id)}/erase"


def test_erasure_reaches_every_table_and_keeps_only_the_audit_trail(client, sess, database):
    t = sess.admin
    name = "Zelda" + secrets.token_hex(4)
    email = crm.unique_email("zelda")
    said = "my private symptom " + secrets.token_hex(4)
    with crm.Receiver([200] * 50) as rcv:
        crm.create_subscription(client, t, url=rcv.url("/hooks"), events=["*"])
        crm.create_workflow(client, t, trigger_type="contact.updated", is_active=True,
                            actions=[{"type": "add_tag", "params": {"tag": "touched"}}])
        chan = crm.create_channel(client, t, type="api", webhook_secret=SECRET,
                                  config={"outbound_url": rcv.url("/out")})
        phone = crm.unique_phone()
        # Created with an Idempotency-Key: the stored first answer is a copy of the person.
        person = crm.assert_json_response(client.post(crm.CONTACTS, {
            "first_name": "Z", "phone": phone}, token=t,
            headers={"Idempotency-Key": "k-" + secrets.token_hex(4)}), 201)
        ack = crm.inbound(client, chan["id"], SECRET, {"phone": phone, "external_id": "z-1"},
                          said)
        cid = ack["contact_id"]
        assert cid == person["id"], (ack, person)
        crm.assert_json_response(client.patch(crm.contact_url(cid), {
            "first_name": name, "email": email}, token=t), 200)
        crm.send_message(client, t, ack["conversation_id"], "reply to " + name)
        crm.assert_json_response(client.post(f"{crm.contact_url(cid)}/consents", {
            "purpose": "marketing", "granted": True, "source": "form",
            "evidence": "signed by " + name}, token=t), 201)
        deal = crm.create_deal(client, t, contact_id=cid, amount="90.00")
        # A note goes with its contact (ON DELETE CASCADE): its text is checked for below.
        crm.assert_json_response(client.post(f"{crm.contact_url(cid)}/notes", {
            "body": "called back about " + said}, token=t), 201)
        rcv.wait_for(3, 20)
        crm.eventually(lambda: name in crm.dump_database(database), timeout=10)
        assert name in crm.dump_database(database) and phone in crm.dump_database(database)

        resp = client.post(erase_url(cid), token=t)
        doc = crm.assert_json_response(resp, 200)
        assert doc["contact_id"] == cid, doc
        crm.assert_timestamp(doc["erased_at"])
        removed = doc["removed"]
        assert removed["conversations"] == 1 and removed["contact"] in (0, 1), removed
        assert removed["outbox_events"] >= 1 and removed["webhook_deliveries"] >= 1, removed
        assert removed["workflow_runs"] >= 1 and removed["idempotency_keys"] == 1, removed

    crm.assert_error(client.get(crm.contact_url(cid), token=t), 404, "NOT_FOUND")
    crm.assert_error(client.get(f"/api/v1/fhir/Patient/{cid}", token=t), 404, "NOT_FOUND")
    crm.assert_error(client.get(crm.conversation_url(ack["conversation_id"]), token=t), 404,
                     "NOT_FOUND")
    assert crm.get_deal(client, t, deal["id"])["contact_id"] is None
    # Nothing of what the person said or was called is left anywhere.
    everything = crm.dump_database(database)
    for trace in (name, email, phone, said):
        assert trace not in everything, trace
    # What the audit trail kept: who erased, when; no values.
    rows = crm.assert_json_response(client.get(crm.with_query("/api/v1/audit-log", {
        "resource": "contact", "resource_id": cid}), token=t), 200)["items"]
    erasing = [r for r in rows if r["action"].startswith("erase")]
    assert [r["action"] for r in erasing] == ["erase_completed", "erase", "erase_requested"], rows
    assert all(r["user_id"] == sess.tenant.admin_id for r in erasing), erasing
    # Reads of the record after it was erased are recorded too, as failures.
    assert [r["outcome"] for r in rows[:2]] == ["failure", "failure"], rows[:2]
    # Again: the same answer, nothing more to do.
    again = crm.assert_json_response(client.post(erase_url(cid), token=t), 200)
    assert again == doc


def test_only_admins_erase_and_only_their_own_tenants_contacts(client, sess, sess_b):
    c = crm.create_contact(client, sess.admin, first_name="Keep")
    for role in ("viewer", "agent", "manager"):
        crm.assert_error(client.post(erase_url(c["id"]), token=sess.tokens[role]), 403,
                         "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.post(erase_url(c["id"]), token=sess_b.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.post(erase_url(987654321), token=sess.admin), 404, "NOT_FOUND")
    assert crm.get_contact(client, sess.admin, c["id"])["first_name"] == "Keep"


def test_an_erasure_interrupted_by_a_crash_is_completed_at_start(database, redis_url, migrated,
                                                                cli_env):
    server = crm.start_server(database.url, redis_url, {}, label="erase-crash")
    client = server.client()
    s = crm.tenant_session(client, cli_env)
    name = "Crash" + secrets.token_hex(4)
    c = crm.create_contact(client, s.admin, first_name=name, email=crm.unique_email("crash"))
    server.kill()
    server.cleanup()
    # The request was recorded, then the process died before anything was removed.
    database.query(f"INSERT INTO erasures (tenant_id, contact_id) VALUES "
                   f"({s.tenant.tenant_id}, {c['id']})")
    server = crm.start_server(database.url, redis_url, {}, label="erase-crash-2")
    try:
        client = server.client()
        token = crm.login(client, s.tenant.admin_email, s.tenant.admin_password)["access_token"]
        crm.assert_error(client.get(crm.contact_url(c["id"]), token=token), 404, "NOT_FOUND")
        assert name not in crm.dump_database(database)
        doc = crm.assert_json_response(client.post(erase_url(c["id"]), token=token), 200)
        assert doc["contact_id"] == c["id"] and doc["removed"]["contact"] == 1, doc
    finally:
        server.stop(check=True)
        server.cleanup()
