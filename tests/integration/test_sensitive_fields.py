"""Sensitive custom fields (issue "Health-data compliance" item 5, docs/compliance.md "Sensitive
fields"): values sealed at rest, masked for roles below manager, every disclosure audited."""
import secrets

import pytest

import crm

AUDIT = "/api/v1/audit-log"
SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}


@pytest.fixture(scope="module")
def diagnosis(client, sess) -> str:
    name = crm.field_name("dx")
    f = crm.create_field(client, sess.admin, "contact", name=name, field_type="text",
                         sensitive=True)
    assert f["sensitive"] is True, f
    return name


def test_only_contact_fields_are_sensitive_and_it_is_fixed_at_creation(client, sess, diagnosis):
    resp = client.post(crm.fields_url("company"), {"name": "secret_x", "field_type": "text",
                                                   "sensitive": True}, token=sess.admin)
    crm.assert_validation(resp, (("body", "sensitive"), "value_error"))
    [field] = [f for f in crm.list_fields(client, sess.admin, "contact") if f["name"] == diagnosis]
    resp = client.put(crm.field_url("contact", field["field_id"]), {"sensitive": False},
                      token=sess.admin)
    crm.assert_error(resp, 409, "CONFLICT")
    plain = crm.create_field(client, sess.admin, "contact", name=crm.field_name("pl"),
                             field_type="text")
    assert plain["sensitive"] is False


def test_values_are_sealed_at_rest_and_never_in_answers_to_writes_or_events(
        client, sess, diagnosis, database):
    value = "hypertension-" + secrets.token_hex(5)
    with crm.Receiver([200] * 10) as rcv:
        crm.create_subscription(client, sess.admin, url=rcv.url("/hooks"),
                                events=["contact.created", "contact.updated"])
        resp = client.post(crm.CONTACTS, {"first_name": "Sealed",
                                          "custom_fields": {diagnosis: value, "note": "plain"}},
                           token=sess.tokens["agent"],
                           headers={"Idempotency-Key": "sens-" + secrets.token_hex(4)})
        created = crm.assert_json_response(resp, 201)
        assert value not in resp.body.decode(), created
        updated = crm.assert_json_response(client.patch(crm.contact_url(created["id"]), {
            "custom_fields": {diagnosis: value + "-2"}}, token=sess.tokens["manager"]), 200)
        assert updated["custom_fields"][diagnosis] == "***", updated
        hooks = rcv.wait_for(2, 20)
    for h in hooks:
        assert value not in h.body.decode() and "$sealed" not in h.body.decode(), h.body
    stored = database.query(f"SELECT custom_fields->'{diagnosis}'->>'$sealed' FROM contacts "
                            f"WHERE id = {created['id']}").strip()
    assert stored.startswith("dk1:"), stored  # under the tenant's own data key...
    key = database.query(f"SELECT data_key FROM tenant_data_keys "
                         f"WHERE tenant_id = {sess.tenant.tenant_id}").strip()
    assert key.startswith("sb1:"), key  # ...itself sealed by the configured keys
    assert value not in crm.dump_database(database)


def test_roles_below_manager_see_masks_and_every_disclosure_is_audited(client, sess, diagnosis):
    value = "asthma-" + secrets.token_hex(5)
    tag = crm.unique("sens")
    c = crm.create_contact(client, sess.admin, first_name="Masked", tags=[tag],
                           custom_fields={diagnosis: value})
    for role in ("viewer", "agent"):
        t = sess.tokens[role]
        assert crm.get_contact(client, t, c["id"])["custom_fields"][diagnosis] == "***"
    # An agent writing back what it was shown does not replace the value with the mask.
    shown = crm.get_contact(client, sess.tokens["agent"], c["id"])
    crm.assert_json_response(client.put(crm.contact_url(c["id"]), {
        "first_name": "Masked", "custom_fields": shown["custom_fields"]},
        token=sess.tokens["agent"]), 200)
    body = client.get(crm.with_query(f"{crm.CONTACTS}/export", {"tag": tag}),
                      token=sess.tokens["agent"]).body.decode()
    assert value not in body and "***" in body, body
    for role in ("manager", "admin"):
        assert crm.get_contact(client, sess.tokens[role], c["id"])["custom_fields"][diagnosis] \
            == value
    body = client.get(crm.with_query(f"{crm.CONTACTS}/export", {"tag": tag}),
                      token=sess.tokens["manager"]).body.decode()
    assert value in body, body
    rows = crm.assert_json_response(client.get(crm.with_query(AUDIT, {
        "action": "read_sensitive"}), token=sess.admin), 200)["items"]
    mine = [r for r in rows if r["resource_id"] == c["id"] or c["id"] in r["ids"]]
    assert [(r["role"], r["fields"]) for r in mine] == [
        ("manager", [f"custom_fields.{diagnosis}"]), ("admin", [f"custom_fields.{diagnosis}"]),
        ("manager", [f"custom_fields.{diagnosis}"])], mine
    assert all(value not in str(r) for r in rows)


def test_sealed_values_open_after_a_restart_and_in_the_subject_export(
        client, sess, diagnosis, database, redis_url):
    value = "diabetes-" + secrets.token_hex(5)
    c = crm.create_contact(client, sess.admin, first_name="Kept",
                           custom_fields={diagnosis: value})
    doc = crm.assert_json_response(client.get(f"{crm.contact_url(c['id'])}/export",
                                              token=sess.admin), 200)
    assert doc["contact"]["custom_fields"][diagnosis] == value, doc["contact"]
    other = crm.start_server(database.url, redis_url, {}, label="sensitive-2")
    try:
        got = crm.get_contact(other.client(), sess.tokens["manager"], c["id"])
        assert got["custom_fields"][diagnosis] == value
    finally:
        other.stop(check=True)
        other.cleanup()


def test_a_sealed_value_copied_to_another_contact_or_field_does_not_open_there(
        client, sess, diagnosis, database, redis_url):
    """Each sealed value is bound to its contact and field: someone who can write the database
    cannot copy a patient's value into a record or field they are shown and read it there."""
    other_field = crm.field_name("dy")
    crm.create_field(client, sess.admin, "contact", name=other_field, field_type="text",
                     sensitive=True)
    value = "hiv-" + secrets.token_hex(5)
    source = crm.create_contact(client, sess.admin, first_name="Source",
                                custom_fields={diagnosis: value})
    target = crm.create_contact(client, sess.admin, first_name="Target",
                                custom_fields={diagnosis: "flu"})
    database.query(f"UPDATE contacts t SET custom_fields = t.custom_fields || jsonb_build_object("
                   f"'{diagnosis}', s.custom_fields->'{diagnosis}') FROM contacts s "
                   f"WHERE s.id = {source['id']} AND t.id = {target['id']};"
                   f"UPDATE contacts SET custom_fields = custom_fields || jsonb_build_object("
                   f"'{other_field}', custom_fields->'{diagnosis}') WHERE id = {source['id']}")
    fresh = crm.start_server(database.url, redis_url, {}, label="sensitive-3")
    try:
        c = fresh.client()
        got = crm.get_contact(c, sess.admin, target["id"])["custom_fields"]
        assert got[diagnosis] == "***", got
        got = crm.get_contact(c, sess.admin, source["id"])["custom_fields"]
        assert (got[diagnosis], got[other_field]) == (value, "***"), got
        doc = crm.assert_json_response(c.get(f"{crm.contact_url(target['id'])}/export",
                                             token=sess.admin), 200)
        assert doc["contact"]["custom_fields"][diagnosis] == "***", doc["contact"]
    finally:
        fresh.stop(check=True)
        fresh.cleanup()
