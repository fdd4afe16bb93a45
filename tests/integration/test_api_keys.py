"""API keys for integrators (issue 31, docs/operations.md "API keys"): named keys with a role and
an optional expiry, shown once, stored as a keyed hash, revocable, usable as
`Authorization: Bearer ck_...`, audited as their own principal."""
import datetime
import time

import crm

KEYS = "/api/v1/api-keys"


def create_key(client, token, name="integration", role="agent", **extra) -> dict:
    body = {"name": name, "role": role} | extra
    return crm.assert_json_response(client.post(KEYS, body, token=token), 201)


def in_seconds(s: float) -> str:
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=s)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_key_is_shown_once_kept_as_a_keyed_hash_and_works_with_its_role(
        client, sess, database):
    made = create_key(client, sess.admin, name="lab sync", role="agent")
    key = made["key"]
    assert key.startswith(f"ck_{made['id']}_") and key.startswith(made["prefix"]), made
    assert (made["role"], made["revoked_at"], made["expires_at"]) == ("agent", None, None)
    assert made["created_by"] == sess.tenant.admin_id, made
    listed = crm.assert_json_response(client.get(KEYS, token=sess.admin), 200)["items"]
    mine = [k for k in listed if k["id"] == made["id"]]
    assert len(mine) == 1 and "key" not in mine[0], listed
    got = crm.assert_json_response(client.get(f"{KEYS}/{made['id']}", token=sess.admin), 200)
    assert "key" not in got and got["prefix"] == made["prefix"], got
    stored = database.query(f"SELECT secret_hash FROM api_keys WHERE id = {made['id']}").strip()
    assert stored.startswith("kh1:"), stored
    assert key.split("_", 2)[2] not in crm.dump_database(database)

    c = crm.create_contact(client, key, first_name="ByKey")
    assert crm.get_contact(client, key, c["id"])["first_name"] == "ByKey"
    # Its role is the one it was given: an agent may not administer users or delete contacts.
    crm.assert_error(client.get("/api/v1/users", token=key), 403, "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.delete(crm.contact_url(c["id"]), token=key), 403,
                     "INSUFFICIENT_PERMISSIONS")
    # Audited as its own principal: no user, the key named.
    rows = crm.audit_rows(client, sess.admin, resource="contact", resource_id=c["id"])
    ref = f"api_key:{made['id']}"
    assert [(r["action"], r["outcome"], r["actor_type"], r["actor_ref"], r["role"], r["user_id"])
            for r in rows] == [("delete", "denied", "api_key", ref, "agent", None),
                               ("read", "success", "api_key", ref, "agent", None),
                               ("create", "success", "api_key", ref, "agent", None)], rows


def test_a_wrong_unknown_or_malformed_key_gets_the_same_401(client, sess):
    made = create_key(client, sess.admin)
    secret = made["key"].split("_", 2)[2]
    wrong = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    bodies = set()
    for token in (f"ck_{made['id']}_{wrong}", f"ck_{made['id'] + 100000}_{secret}",
                  f"ck_{made['id']}_short", "ck_x_" + secret, "ck_"):
        resp = client.get(crm.CONTACTS, token=token)
        crm.assert_error(resp, 401, "INVALID_CREDENTIALS")
        bodies.add(resp.body)
    assert len(bodies) == 1, bodies


def test_a_revoked_key_is_refused_at_once_here_and_soon_on_another_node(
        client, sess, database, redis_url):
    made = create_key(client, sess.admin, role="viewer")
    key = made["key"]
    other = crm.start_server(database.url, redis_url, {}, label="api-keys-2")
    try:
        o = other.client()
        crm.assert_json_response(o.get(crm.CONTACTS, token=key), 200)  # cached there now
        crm.assert_json_response(client.get(crm.CONTACTS, token=key), 200)
        resp = client.delete(f"{KEYS}/{made['id']}", token=sess.admin)
        assert resp.status == 204, resp.describe()
        crm.assert_error(client.get(crm.CONTACTS, token=key), 401, "INVALID_CREDENTIALS")
        refused = crm.eventually(lambda: o.get(crm.CONTACTS, token=key).status == 401,
                                 timeout=15)
        assert refused, "the other node still admits a revoked key"
    finally:
        other.stop(check=True)
        other.cleanup()
    again = client.delete(f"{KEYS}/{made['id']}", token=sess.admin)
    assert again.status == 204, again.describe()
    got = crm.assert_json_response(client.get(f"{KEYS}/{made['id']}", token=sess.admin), 200)
    crm.assert_timestamp(got["revoked_at"])
    rows = crm.audit_rows(client, sess.admin, resource="api_key", resource_id=made["id"])
    assert [r["action"] for r in rows].count("revoke") == 2, rows


def test_a_key_stops_at_its_expiry(client, sess):
    made = create_key(client, sess.admin, expires_at=in_seconds(3))
    crm.assert_json_response(client.get(crm.CONTACTS, token=made["key"]), 200)
    time.sleep(3.5)
    resp = client.get(crm.CONTACTS, token=made["key"])
    crm.assert_error(resp, 401, "INVALID_CREDENTIALS")
    assert "expired" in resp.json["detail"], resp.describe()


def test_a_key_cannot_manage_keys_nor_credentials_nor_act_as_a_session(client, sess):
    """A leaked admin key must not mint keys, nor become a person (set a password, create a
    user, strip a second factor) who then could."""
    admin_key = create_key(client, sess.admin, role="admin")["key"]
    crm.assert_json_response(client.get("/api/v1/users", token=admin_key), 200)
    victim = sess.users["agent"]["id"]
    for resp in (client.post(KEYS, {"name": "more", "role": "admin"}, token=admin_key),
                 client.get(KEYS, token=admin_key),
                 client.get("/api/v1/auth/me", token=admin_key),
                 client.post("/api/v1/auth/logout", {}, token=admin_key),
                 client.patch(f"/api/v1/users/{victim}", {"password": "taken-over-123"},
                              token=admin_key),
                 client.post("/api/v1/users", {"email": crm.unique_email("k"),
                                               "full_name": "By Key", "role": "admin",
                                               "password": "by-key-password-1"},
                             token=admin_key),
                 client.delete(f"/api/v1/users/{victim}/totp", token=admin_key)):
        crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
    # Other user changes stay open to it (a role, a name).
    crm.assert_json_response(client.patch(f"/api/v1/users/{victim}", {"full_name": "Renamed"},
                                          token=admin_key), 200)
    # The refused logout did not revoke it.
    crm.assert_json_response(client.get("/api/v1/users", token=admin_key), 200)


def test_keys_are_admin_only_checked_and_kept_per_tenant(client, sess, sess_b):
    crm.assert_error(client.post(KEYS, {"name": "x", "role": "viewer"},
                                 token=sess.tokens["manager"]), 403, "INSUFFICIENT_PERMISSIONS")
    for body, loc in (({"role": "viewer"}, "name"), ({"name": "x", "role": "root"}, "role"),
                      ({"name": "x", "role": "viewer", "expires_at": in_seconds(-60)},
                       "expires_at"),
                      ({"name": "x", "role": "viewer", "expires_at": "tomorrow"}, "expires_at")):
        resp = client.post(KEYS, body, token=sess.admin)
        assert resp.status == 422, resp.describe()
        assert any(i["loc"] == ["body", loc] for i in resp.json["detail"]), resp.describe()
    b_key = create_key(client, sess_b.admin, role="admin")
    crm.assert_error(client.get(f"{KEYS}/{b_key['id']}", token=sess.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.delete(f"{KEYS}/{b_key['id']}", token=sess.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.get(f"{KEYS}/{b_key['id'] + 100000}", token=sess.admin), 404,
                     "NOT_FOUND")
    # Tenant B's key sees tenant B only.
    a_contact = crm.create_contact(client, sess.admin, first_name="OnlyA")
    resp = client.get(crm.contact_url(a_contact["id"]), token=b_key["key"])
    assert resp.status in (403, 404), resp.describe()
    ids = [c["id"] for c in crm.list_page(client, b_key["key"], crm.CONTACTS,
                                          {"per_page": 100})["items"]]
    assert a_contact["id"] not in ids


def test_a_tenant_holds_at_most_100_keys_in_force(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    made = [create_key(client, s.admin, name=f"k{i}", role="viewer") for i in range(100)]
    crm.assert_error(client.post(KEYS, {"name": "one more", "role": "viewer"}, token=s.admin),
                     409, "CONFLICT")
    assert client.delete(f"{KEYS}/{made[0]['id']}", token=s.admin).status == 204
    create_key(client, s.admin, name="after a revoke", role="viewer")
