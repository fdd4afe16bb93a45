"""Supervision and passivation of a tenant's actors (architecture rules 6 and 7): a failed
contacts actor is restarted from Postgres by its supervisor without affecting other tenants, and
an idle tenant's actors stop and come back with the same state."""
import concurrent.futures
import time

import pytest

import crm

TENANT_IDLE_TIMEOUT = 2
SERVER_ENV = {"CARECRM_TENANT_IDLE_TIMEOUT": TENANT_IDLE_TIMEOUT}


@pytest.fixture(scope="module")
def metrics(server):
    return server.metrics_client()


def live_tenants(metrics) -> dict:
    body = crm.assert_json_response(metrics.get("/actors"), 200)
    return {t["tenant_id"]: t for t in body["tenants"]}


def restarts(metrics, actor: str) -> float:
    resp = metrics.get("/metrics")
    assert resp.status == 200, resp.describe()
    return sum(v for n, lab, v in crm.parse_prometheus(resp.body.decode())
               if n == "carecrm_actor_restarts_total" and lab.get("actor") == actor)


def contacts_child(metrics, tenant_id):
    t = live_tenants(metrics).get(tenant_id)
    return None if t is None else next((c for c in t["children"] if c["name"] == "contacts"), None)


def test_failed_contacts_actor_restarts_from_postgres_without_touching_other_tenants(
        client, metrics, cli_env):
    a = crm.tenant_session(client, cli_env)
    b = crm.tenant_session(client, cli_env)
    ca = crm.create_contact(client, a.admin, first_name="Alpha", email=crm.unique_email("a"),
                            tags=["vip"])
    cb = crm.create_contact(client, b.admin, first_name="Beta")
    before_a = crm.get_contact(client, a.admin, ca["id"])
    before_b = crm.get_contact(client, b.admin, cb["id"])
    count = restarts(metrics, "contacts")

    resp = metrics.post(f"/actors/{a.tenant.tenant_id}/contacts/fail")
    assert crm.assert_json_response(resp, 202) == {"status": "failing"}
    assert crm.eventually(lambda: restarts(metrics, "contacts") == count + 1, 5.0), \
        "the supervisor did not record the contacts actor's failure"
    # Tenant B's contacts actor was never touched; tenant A's supervisor survived.
    assert crm.get_contact(client, b.admin, cb["id"]) == before_b
    assert a.tenant.tenant_id in live_tenants(metrics)
    # The next request restarts the child, which reloads the same state from Postgres.
    assert crm.get_contact(client, a.admin, ca["id"]) == before_a
    assert contacts_child(metrics, a.tenant.tenant_id) is not None
    # And it still writes: the e-mail index was rebuilt too.
    dup = client.post(crm.CONTACTS, {"first_name": "Dup", "email": before_a["email"]},
                      token=a.admin)
    crm.assert_error(dup, 409, "DUPLICATE_EMAIL")
    crm.create_contact(client, a.admin, first_name="After")


def test_requests_racing_a_failure_are_answered_never_hung(client, metrics, cli_env):
    s = crm.tenant_session(client, cli_env)
    c = crm.create_contact(client, s.admin, first_name="Racer")

    def read(_):
        return client_for(client).get(crm.contact_url(c["id"]), token=s.admin).status

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(read, i) for i in range(200)]
        time.sleep(0.02)
        metrics.post(f"/actors/{s.tenant.tenant_id}/contacts/fail")
        statuses = [f.result(timeout=30) for f in futures]
    assert set(statuses) <= {200, 503}, statuses
    assert statuses.count(200) > 0
    assert crm.get_contact(client, s.admin, c["id"])["first_name"] == "Racer"


def client_for(client):
    return crm.Client(client.host, client.port)


def test_failing_an_unknown_tenant_or_child_is_404(metrics, client, cli_env):
    crm.assert_error(metrics.post("/actors/987654321/contacts/fail"), 404, "NOT_FOUND")
    s = crm.tenant_session(client, cli_env)
    crm.create_contact(client, s.admin)
    crm.assert_error(metrics.post(f"/actors/{s.tenant.tenant_id}/nothing/fail"), 404, "NOT_FOUND")


def test_idle_tenant_passivates_and_serves_the_same_contacts_after(client, metrics, cli_env):
    s = crm.tenant_session(client, cli_env)
    co = crm.create_company(client, s.admin, name="Clinic One")
    c = crm.create_contact(client, s.admin, first_name="Sleepy", company_id=co["id"],
                           tags=["night"], custom_fields={"bed": 12})
    before = crm.get_contact(client, s.admin, c["id"])
    listing = crm.assert_json_response(client.get(crm.CONTACTS, token=s.admin), 200)
    tags = crm.assert_json_response(client.get("/api/v1/tags", token=s.admin), 200)
    assert s.tenant.tenant_id in live_tenants(metrics)
    gone = crm.eventually(lambda: s.tenant.tenant_id not in live_tenants(metrics),
                          TENANT_IDLE_TIMEOUT + 15, 0.25)
    assert gone, "the idle tenant was not passivated"
    assert crm.get_contact(client, s.admin, c["id"]) == before
    assert crm.assert_json_response(client.get(crm.CONTACTS, token=s.admin), 200) == listing
    assert crm.assert_json_response(client.get("/api/v1/tags", token=s.admin), 200) == tags


def test_failed_commit_answers_503_and_changes_nothing_in_memory(client, cli_env, database):
    s = crm.tenant_session(client, cli_env)
    kept = crm.create_contact(client, s.admin, first_name="Kept", email=crm.unique_email("k"))
    before = crm.assert_json_response(client.get(crm.CONTACTS, token=s.admin), 200)
    # Make Postgres refuse one particular row at commit time (this file's own database).
    database.query("ALTER TABLE contacts ADD CONSTRAINT test_no_boom CHECK (first_name <> 'Boom')")
    try:
        email = crm.unique_email("boom")
        crm.assert_error(client.post(crm.CONTACTS, {"first_name": "Boom", "email": email},
                                     token=s.admin), 503, "SERVICE_UNAVAILABLE")
        # Nothing of it reached memory: the list is unchanged and its e-mail is still free.
        assert crm.assert_json_response(client.get(crm.CONTACTS, token=s.admin), 200) == before
        resp = client.patch(crm.contact_url(kept["id"]), {"first_name": "Boom"}, token=s.admin)
        crm.assert_error(resp, 503, "SERVICE_UNAVAILABLE")
        assert crm.get_contact(client, s.admin, kept["id"])["first_name"] == "Kept"
    finally:
        database.query("ALTER TABLE contacts DROP CONSTRAINT test_no_boom")
    again = crm.create_contact(client, s.admin, first_name="Fine", email=email)
    assert again["email"] == email


def test_requests_at_the_moment_of_passivation_lose_nothing(client, metrics, cli_env, database):
    """Requests arriving while an idle tenant's actors stop are held and handed to the next
    supervisor, which loads state that includes every committed write (one writer per tenant)."""
    s = crm.tenant_session(client, cli_env)
    created = []
    offsets = [-0.2, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    for offset in offsets:
        time.sleep(TENANT_IDLE_TIMEOUT + offset)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            posts = [pool.submit(client.post, crm.CONTACTS,
                                 {"first_name": "Edge", "email": crm.unique_email("edge")},
                                 token=s.admin) for _ in range(3)]
            lists = [pool.submit(client.get, crm.CONTACTS + "?per_page=1", token=s.admin)
                     for _ in range(2)]
            for f in posts:
                r = f.result(timeout=30)
                assert r.status == 201, r.describe()
                created.append(r.json["id"])
            for f in lists:
                assert f.result(timeout=30).status == 200
        # Read your writes, from memory and from Postgres.
        listing = crm.assert_json_response(client.get(crm.CONTACTS + "?per_page=1", token=s.admin),
                                           200)
        assert listing["total"] == len(created), (offset, listing["total"], len(created))
        for cid in created[-3:]:
            assert crm.get_contact(client, s.admin, cid)["first_name"] == "Edge"
    in_db = database.query(
        f"SELECT count(*) FROM contacts WHERE tenant_id = {s.tenant.tenant_id}").strip()
    assert in_db == str(len(created))
