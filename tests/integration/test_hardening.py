"""Hardening (issue 14): hostile bytes outside JSON bodies never reach SQL, and one client's bad
input never costs another tenant a write."""
import contextlib
import csv
import io
import secrets
import socket
import subprocess
import time

import pytest

import crm

CONTACTS = crm.CONTACTS
NOT_TEXT = "Input should be UTF-8 text without NUL characters"


def contact_count(database, tenant_id: int) -> int:
    return int(database.query(f"SELECT count(*) FROM contacts WHERE tenant_id = {tenant_id}"))


# ---- item 1: bytes that are not UTF-8 outside JSON bodies ------------------------------------


@pytest.mark.parametrize("key", ["k\xff1", "tab\there", "x" * 256, "caf\xe9"])
def test_an_idempotency_key_that_is_not_visible_ascii_is_422_and_stores_nothing(
        client, sess, database, key):
    before = contact_count(database, sess.tenant.tenant_id)
    resp = client.post(CONTACTS, {"first_name": "Key", "email": crm.unique_email()},
                       token=sess.admin, headers={"Idempotency-Key": key})
    crm.assert_validation_locs(resp, ("header", "Idempotency-Key"))
    assert contact_count(database, sess.tenant.tenant_id) == before


@pytest.mark.parametrize("path", [
    CONTACTS + "?q=%FF%FE",
    CONTACTS + "?tag=caf%E9",
    CONTACTS + "?status=%00",
    "/api/v1/deals?title=%C0%AF",
    "/api/v1/conversations?status=%ED%A0%80",
])
def test_query_values_that_are_not_utf8_text_are_422(client, sess, path):
    resp = client.get(path, token=sess.admin)
    assert resp.status == 422, resp.describe()
    (item,) = crm.validation_items(resp)
    assert item["loc"][0] == "query" and item["msg"] == NOT_TEXT, item


def test_a_query_name_that_is_not_utf8_is_422(client, sess):
    resp = client.get(CONTACTS + "?%FF=1", token=sess.admin)
    crm.assert_validation_locs(resp, ("query",))


def test_a_path_that_is_not_utf8_is_422_and_renames_no_tag(client, sess, database):
    contact = crm.create_contact(client, sess.admin, email=crm.unique_email())
    tag = "t" + secrets.token_hex(3)
    assert client.post(f"{CONTACTS}/{contact['id']}/tags", {"tags": [tag]},
                       token=sess.admin).status == 200
    resp = client.put(f"/api/v1/tags/{tag}", {"name": "x"}, token=sess.admin)
    assert resp.status in (200, 204), resp.describe()  # the route works with text
    resp = client.put("/api/v1/tags/%FFbad", {"name": "y"}, token=sess.admin)
    crm.assert_validation_locs(resp, ("path",))


@pytest.mark.parametrize("cell, line", [
    (b"Jo\xffao", 2),          # a byte that starts nothing
    (b"Jo\xc3", 2),            # a truncated character
    (b"\xc0\xafslash", 2),     # an overlong form
    (b"Ana\x00", 2),           # NUL
])
def test_a_csv_import_that_is_not_utf8_text_is_422_with_its_line_and_stores_nothing(
        client, sess, database, cell, line):
    before = contact_count(database, sess.tenant.tenant_id)
    body = (b"first_name,email\nGood," + crm.unique_email().encode() + b"\n" + cell + b"," +
            crm.unique_email().encode() + b"\n")
    resp = client.request("POST", CONTACTS + "/import", token=sess.admin, raw=body,
                          headers={"Content-Type": "text/csv"})
    crm.assert_validation_locs(resp, ("body",))
    assert f"(line {line + 1})" in crm.validation_items(resp)[0]["msg"]
    assert contact_count(database, sess.tenant.tenant_id) == before


def test_hostile_bytes_from_one_tenant_never_fail_another_tenants_writes(
        client, sess, sess_b, database):
    """Bad requests of tenant A race good writes of tenant B through the same group committer:
    every good write is acknowledged and stored, every bad one is 422."""
    good = [crm.unique_email("good") for _ in range(24)]

    def call(i):
        if i % 2:
            return ("bad", client.post(CONTACTS, {"first_name": "Bad", "email": crm.unique_email()},
                                       token=sess.admin,
                                       headers={"Idempotency-Key": f"k\xff{i}"}))
        return ("good", client.post(CONTACTS, {"first_name": "Good", "email": good[i // 2]},
                                    token=sess_b.admin, headers={"Idempotency-Key": f"ok-{i}"}))

    results = crm.run_parallel(call, list(range(48)))
    for kind, resp in results:
        assert resp.status == (201 if kind == "good" else 422), resp.describe()
    stored = database.query(
        f"SELECT count(*) FROM contacts WHERE tenant_id = {sess_b.tenant.tenant_id} AND email IN (" +
        ",".join(f"'{e}'" for e in good) + ")")
    assert int(stored) == len(good)


# ---- item 9: CSV formula injection ------------------------------------------------------------


def test_contact_export_escapes_formulas_and_imports_back_unchanged(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    names = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+cmd|' /C calc'!A0", "@SUM(A1)",
             "-2+3", "Plain"]
    for n in names:
        crm.create_contact(client, s.admin, first_name=n, last_name="L", phone="+5511999990000")
    resp = client.get(CONTACTS + "/export", token=s.admin)
    assert resp.status == 200, resp.describe()
    rows = list(csv.reader(io.StringIO(resp.body.decode(), newline="")))[1:]
    firsts = sorted(r[1] for r in rows)
    assert firsts == sorted(("'" + n if n != "Plain" else n) for n in names), firsts
    assert {r[4] for r in rows} == {"+5511999990000"}, "a phone number is not a formula"
    # The export imports back into another tenant with the names as they were.
    t = crm.tenant_session(client, cli_env)
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_ALL)
    writer.writerow(["first_name", "last_name", "phone"])
    writer.writerows([r[1], r[2], r[4]] for r in rows)
    body = out.getvalue()
    resp = client.request("POST", CONTACTS + "/import", token=t.admin, raw=body.encode(),
                          headers={"Content-Type": "text/csv"})
    assert resp.status in (200, 201, 207), resp.describe()
    listed = crm.assert_json_response(client.get(CONTACTS + "?per_page=100", token=t.admin), 200)
    assert sorted(c["first_name"] for c in listed["items"]) == sorted(names)


# ---- item 7: unauthenticated callers cannot make unbounded work --------------------------------


def scrape(server) -> list:
    resp = server.metrics_client().get("/metrics")
    assert resp.status == 200, resp.describe()
    return crm.parse_prometheus(resp.body.decode())


def metric(samples, name, **labels) -> float:
    return sum(v for n, lab, v in samples
               if n == name and all(lab.get(k) == str(w) for k, w in labels.items()))


@pytest.mark.parametrize("kind, path", [
    ("channel", "/api/v1/channels/{}/api/webhook"),
    ("workflow", "/api/v1/webhooks/{}"),
])
def test_an_unknown_webhook_id_asked_again_and_again_costs_one_database_lookup(
        server, client, kind, path):
    unknown = 7_000_000_000 + secrets.randbelow(1_000_000_000)
    before = scrape(server)
    for _ in range(40):
        resp = client.post(path.format(unknown), {"x": 1}, headers={"webhook_secret": "s"})
        crm.assert_error(resp, 404, "NOT_FOUND")
    after = scrape(server)
    from_db = (metric(after, "carecrm_owner_lookups_total", kind=kind, source="postgres") -
               metric(before, "carecrm_owner_lookups_total", kind=kind, source="postgres"))
    assert from_db == 1, f"{from_db} database lookups for one unknown {kind} id asked 40 times"


def test_a_channel_created_after_its_id_was_asked_for_is_found_at_once(client, sess):
    """The memory of missing ids must not hide a channel created on this node."""
    probe = client.get("/api/v1/channels?per_page=1", token=sess.admin)
    assert probe.status == 200, probe.describe()
    # The next id the sequence will give is unknown: ask for a range of likely ids first.
    created = crm.assert_json_response(client.post("/api/v1/channels", {
        "name": "Probe " + secrets.token_hex(3), "type": "api", "webhook_secret": "s" * 24,
        "config": {}}, token=sess.admin), 201)
    nxt = created["id"] + 1
    for i in range(nxt, nxt + 5):
        crm.assert_error(client.post(f"/api/v1/channels/{i}/api/webhook", {"x": 1},
                                     headers={"webhook_secret": "s"}), 404, "NOT_FOUND")
    channel = crm.assert_json_response(client.post("/api/v1/channels", {
        "name": "Probe " + secrets.token_hex(3), "type": "api", "webhook_secret": "t" * 24,
        "config": {}}, token=sess.admin), 201)
    assert channel["id"] in range(nxt, nxt + 5), "another writer took the ids in between"
    resp = client.post(f"/api/v1/channels/{channel['id']}/api/webhook", {"x": 1},
                       headers={"webhook_secret": "wrong"})
    crm.assert_error(resp, 401, "INVALID_CREDENTIALS")  # found: the secret is what fails now


@contextlib.contextmanager
def own_server(database, redis_url, overrides, label):
    srv = crm.start_server(database.url, redis_url, overrides, label=label)
    try:
        yield srv
    finally:
        srv.stop(check=True)
        srv.cleanup()


def test_readyz_probes_redis_at_most_about_once_a_second(database, migrated, tmp_path):
    redis = crm.RedisServer(str(tmp_path)).start()
    try:
        with own_server(database, redis.url, {}, "carecrm[readyz]") as srv:
            def pings() -> int:
                out = subprocess.run(["redis-cli", "-p", str(redis.port), "INFO", "commandstats"],
                                     capture_output=True, text=True, check=True).stdout
                for line in out.splitlines():
                    if line.startswith("cmdstat_ping:"):
                        return int(line.split("calls=")[1].split(",")[0])
                return 0

            client = srv.client()
            before, started = pings(), time.monotonic()
            results = crm.run_parallel(lambda _: client.get("/readyz").status, list(range(200)),
                                       workers=16)
            elapsed = time.monotonic() - started
            assert results == [200] * 200
            made = pings() - before
            assert made <= elapsed + 2, f"{made} PINGs for 200 /readyz calls in {elapsed:.1f} s"
    finally:
        redis.stop()


def test_a_full_database_queue_answers_lookups_503_and_never_costs_a_write(
        database, migrated, redis_url, cli_env):
    overrides = {"CARECRM_DATABASE_POOL_SIZE": 1, "CARECRM_DATABASE_QUEUE_LIMIT": 1}
    with own_server(database, redis_url, overrides, "carecrm[db-queue]") as srv:
        client = srv.client()
        s = crm.tenant_session(client, cli_env)
        crm.create_contact(client, s.admin)  # the tenant's contacts are loaded
        base = 8_000_000_000 + secrets.randbelow(1_000_000_000)

        def call(i):
            if i % 4 == 0:
                return ("write", client.post(CONTACTS, {"first_name": f"W{i}"}, token=s.admin))
            return ("lookup", client.post(f"/api/v1/webhooks/{base + i}", {"x": 1}))

        results = crm.run_parallel(call, list(range(160)), workers=32)
        statuses = {}
        for kind, resp in results:
            statuses.setdefault(kind, []).append(resp.status)
            if resp.status == 503:
                assert resp.json["code"] == "SERVICE_UNAVAILABLE", resp.describe()
        assert set(statuses["write"]) == {201}, statuses["write"]
        assert set(statuses["lookup"]) <= {404, 503}, statuses["lookup"]
        # Every 503 is a counted refusal (the server's own lookups may be refused too).
        refused = metric(scrape(srv), "carecrm_db_queue_refused_total")
        assert refused >= statuses["lookup"].count(503) > 0, (refused, statuses["lookup"])


def test_connections_beyond_the_cap_are_answered_503_and_closed(database, migrated, redis_url):
    with own_server(database, redis_url, {"CARECRM_MAX_CONNECTIONS": 4}, "carecrm[conns]") as srv:
        held = [socket.create_connection((srv.host, srv.port), timeout=10) for _ in range(4)]
        try:
            # The four held ones and the scrape's own.
            assert crm.eventually(
                lambda: metric(scrape(srv), "carecrm_http_connections") >= 5, 5.0)
            extra = socket.create_connection((srv.host, srv.port), timeout=10)
            with extra:
                data = b""
                while chunk := extra.recv(4096):
                    data += chunk
            assert data.startswith(b"HTTP/1.1 503 "), data[:200]
            assert b'"code":"SERVICE_UNAVAILABLE"' in data and b"Retry-After: 1" in data
            assert metric(scrape(srv), "carecrm_http_connections_refused_total") >= 1
        finally:
            for s in held:
                s.close()
        assert crm.eventually(lambda: srv.client().get("/healthz").status == 200, 5.0)
