"""The patient's right of access (issue "Health-data compliance" item 4, docs/compliance.md "The
patient's rights"): `GET /contacts/{id}/export` gives an admin everything the tenant holds about
one person, as one JSON document, and nothing about anyone else."""
import secrets

import pytest

import crm

SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}
SECRET = "export-secret-" + secrets.token_hex(10)


def export_url(contact_id) -> str:
    return f"{crm.contact_url(contact_id)}/export"


@pytest.fixture(scope="module")
def sess(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env, ("viewer", "agent", "manager"))


def test_the_export_holds_every_part_of_the_record_and_nothing_else(client, sess):
    t = sess.admin
    company = crm.create_company(client, t, name="Clinica Sol")
    with crm.Receiver([200, 200]) as rcv:
        chan = crm.create_channel(client, t, type="api", webhook_secret=SECRET,
                                  config={"outbound_url": rcv.url("/out")})
        phone = crm.unique_phone()
        ack = crm.inbound(client, chan["id"], SECRET, {"phone": phone, "external_id": "ext-9"},
                          "My results, please")
        other = crm.inbound(client, chan["id"], SECRET, {"phone": crm.unique_phone()},
                            "Someone else's private question")
        cid = ack["contact_id"]
        crm.assert_json_response(client.patch(crm.contact_url(cid), {
            "first_name": "Rita", "last_name": "Lee", "company_id": company["id"],
            "tags": ["cardio"]}, token=t), 200)
        sent = crm.send_message(client, t, ack["conversation_id"], "They are ready")
        rcv.wait_for(1, 20)
    deal = crm.create_deal(client, t, contact_id=cid, amount="150.00")
    consent = crm.assert_json_response(client.post(f"{crm.contact_url(cid)}/consents", {
        "purpose": "marketing", "granted": True, "source": "form"}, token=t), 201)

    resp = client.get(export_url(cid), token=t)
    doc = crm.assert_json_response(resp, 200)
    assert resp.header("Content-Disposition") == \
        f'attachment; filename="contact-{cid}-export.json"', resp.describe()
    assert resp.header("Cache-Control") == "no-store", resp.describe()
    assert set(doc) == {"exported_at", "tenant_id", "contact", "company", "channel_identities",
                        "conversations", "deals", "consents", "notes", "tasks", "appointments",
                        "ai_decisions",
                        "access_log"}, doc.keys()
    crm.assert_timestamp(doc["exported_at"])
    c = doc["contact"]
    assert (c["id"], c["first_name"], c["last_name"], c["phone"], c["tags"]) == \
        (cid, "Rita", "Lee", phone, ["cardio"]), c
    assert doc["company"]["name"] == "Clinica Sol", doc["company"]
    assert doc["channel_identities"] == [{"channel_id": chan["id"], "external_id": "ext-9"}]
    [conv] = doc["conversations"]
    assert conv["id"] == ack["conversation_id"], conv
    assert [(m["direction"], m["text"]) for m in conv["messages"]] == \
        [("inbound", "My results, please"), ("outbound", "They are ready")], conv
    assert conv["messages"][1]["id"] == sent["id"]
    assert [d["id"] for d in doc["deals"]] == [deal["id"]], doc["deals"]
    assert doc["deals"][0]["history"][0]["kind"] == "created", doc["deals"]
    assert [k["id"] for k in doc["consents"]] == [consent["id"]], doc["consents"]
    assert b"Someone else's private question" not in resp.body
    assert other["contact_id"] != cid


def test_only_admins_export_and_only_their_tenants_contacts(client, sess, cli_env):
    c = crm.create_contact(client, sess.admin, first_name="Only")
    for role in ("viewer", "agent", "manager"):
        crm.assert_error(client.get(export_url(c["id"]), token=sess.tokens[role]), 403,
                         "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.get(export_url(crm.NOWHERE_ID), token=sess.admin), 404, "NOT_FOUND")
    other = crm.tenant_session(client, cli_env)
    resp = client.get(export_url(c["id"]), token=other.admin)
    assert resp.status in (403, 404), resp.describe()
    assert b"Only" not in resp.body
