"""Hardening (issue 14): hostile bytes outside JSON bodies never reach SQL, and one client's bad
input never costs another tenant a write."""
import contextlib
import csv
import io
import secrets
import socket
import subprocess
import threading
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
    assert crm.get_contact(client, sess.admin, contact["id"])["tags"] == ["x"]
    names = str(crm.tags_of(client, sess.admin))
    assert "'y'" not in names and '"y"' not in names, names


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
        f"SELECT count(*) FROM contacts WHERE tenant_id = {sess_b.tenant.tenant_id}"
        " AND email IN (" + ",".join(f"'{e}'" for e in good) + ")")
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


@pytest.mark.parametrize("kind, path, status, code", [
    ("channel", "/api/v1/channels/{}/api/webhook", 404, "NOT_FOUND"),
    # An unknown workflow is refused like a wrong secret (issue 31): ids are sequential.
    ("workflow", "/api/v1/webhooks/{}", 401, "INVALID_CREDENTIALS"),
])
def test_an_unknown_webhook_id_asked_again_and_again_costs_one_database_lookup(
        server, client, kind, path, status, code):
    unknown = 7_000_000_000 + secrets.randbelow(1_000_000_000)
    before = scrape(server)
    for _ in range(40):
        resp = client.post(path.format(unknown), {"x": 1}, headers={"webhook_secret": "s"})
        crm.assert_error(resp, status, code)
    after = scrape(server)
    from_db = (metric(after, "carecrm_owner_lookups_total", kind=kind, source="postgres") -
               metric(before, "carecrm_owner_lookups_total", kind=kind, source="postgres"))
    assert from_db == 1, f"{from_db} database lookups for one unknown {kind} id asked 40 times"
    judged = (metric(after, "carecrm_webhook_gate_total", kind=kind, verdict="unknown") -
              metric(before, "carecrm_webhook_gate_total", kind=kind, verdict="unknown"))
    assert judged == 40, f"{judged} calls of 40 for an unknown {kind} id counted as unknown"


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
        # An unknown workflow is refused like a wrong secret (issue 31).
        assert set(statuses["lookup"]) <= {401, 503}, statuses["lookup"]
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


# ---- item 3: the state in memory never drifts from Postgres -----------------------------------


def assert_api_matches_postgres(client, token, database, tenant_id, acknowledged):
    """Every contact row of the tenant in Postgres is what the API serves, every acknowledged
    create is among them, and each stored e-mail is taken (409, never 503 or 201)."""
    rows = {int(line.split("|")[0]): line.split("|")[1] for line in database.query(
        f"SELECT id, coalesce(email, '') FROM contacts WHERE tenant_id = {tenant_id}"
        " ORDER BY id").splitlines() if line.strip()}
    assert set(acknowledged) <= set(rows), "an acknowledged create is not in Postgres"
    assert crm.list_total(client, token) == len(rows), "the API lists another number of rows"
    for cid, email in rows.items():
        resp = client.get(crm.contact_url(cid), token=token)
        assert resp.status == 200, f"contact {cid} in Postgres: {resp.describe()}"
        assert (resp.json["email"] or "") == email, (cid, resp.json, email)
    for email in list(rows.values())[:20]:
        if email:
            crm.assert_error(client.post(CONTACTS, {"first_name": "Again", "email": email},
                                         token=token), 409, "DUPLICATE_EMAIL")


def write_load_with(client, token, disrupt, rounds=6, per_round=24):
    """Concurrent creates, with `disrupt()` called in the middle of each round; the ids of the
    creates that were acknowledged (201)."""
    acknowledged = []
    for _ in range(rounds):
        def create(i):
            return client.post(CONTACTS, {"first_name": f"L{i}", "email": crm.unique_email("l")},
                               token=token)

        t = threading.Timer(0.01, disrupt)
        t.start()
        results = crm.run_parallel(create, list(range(per_round)), workers=12)
        t.join()
        for r in results:
            assert r.status in (201, 503), r.describe()
            if r.status == 201:
                acknowledged.append(r.json["id"])
    return acknowledged


def test_a_contacts_actor_failed_under_write_load_reloads_everything_committed(
        server, client, cli_env, database):
    s = crm.tenant_session(client, cli_env)
    metrics = server.metrics_client()
    crm.create_contact(client, s.admin)
    tid = s.tenant.tenant_id
    acknowledged = write_load_with(
        client, s.admin, lambda: metrics.post(f"/actors/{tid}/contacts/fail"))
    assert acknowledged, "no create was acknowledged at all"
    assert_api_matches_postgres(client, s.admin, database, tid, acknowledged)


def test_an_actor_restarted_while_its_batch_waits_in_the_committer_loads_that_batch(
        server, client, cli_env, database):
    """Tenant A's create is committing (held by a table lock) when A's contacts actor is failed.
    The next instance must not load before that batch settles: else the row, committed a moment
    later, is missing from memory (403/404 for the tenant's own contact, 503 for its e-mail)."""
    s = crm.tenant_session(client, cli_env)
    metrics = server.metrics_client()
    tid = s.tenant.tenant_id
    crm.create_contact(client, s.admin, first_name="Loaded")
    email = crm.unique_email("held")
    lock = threading.Thread(target=database.query, args=(
        "BEGIN; LOCK TABLE contacts IN SHARE ROW EXCLUSIVE MODE; SELECT pg_sleep(2); COMMIT;",))
    lock.start()
    time.sleep(0.3)  # the table is locked: inserts wait
    box = {}
    create = threading.Thread(target=lambda: box.setdefault("r", client.post(
        CONTACTS, {"first_name": "Held", "email": email}, token=s.admin)))
    create.start()
    time.sleep(0.3)  # its batch is in the committer, waiting for the lock
    crm.assert_json_response(metrics.post(f"/actors/{tid}/contacts/fail"), 202)
    time.sleep(0.2)
    listed = crm.assert_json_response(client.get(CONTACTS + "?per_page=100", token=s.admin), 200)
    lock.join()
    create.join(timeout=30)
    assert box["r"].status in (201, 503), box["r"].describe()  # 503: its actor died meanwhile
    stored = database.query(f"SELECT id FROM contacts WHERE tenant_id = {tid} AND email = '{email}'")
    assert stored.strip(), "the held create never committed"
    held_id = int(stored.strip())
    assert held_id in [c["id"] for c in listed["items"]], \
        "the restarted actor loaded before the batch in the committer settled"
    assert crm.get_contact(client, s.admin, held_id)["email"] == email
    crm.assert_error(client.post(CONTACTS, {"first_name": "Again", "email": email},
                                 token=s.admin), 409, "DUPLICATE_EMAIL")


def test_a_commit_meeting_a_row_written_behind_its_back_reloads_the_state(client, cli_env,
                                                                          database):
    """A row written to Postgres behind carecrm's back takes an e-mail: the create that meets it
    fails (503, retryable) and the actor reloads, so the retry is the right answer (409) and
    the row is served, instead of 503 until the tenant goes idle."""
    s = crm.tenant_session(client, cli_env)
    crm.create_contact(client, s.admin, first_name="Loaded")  # the state is in memory
    email = crm.unique_email("sneaked")
    database.query("INSERT INTO contacts (tenant_id, first_name, email, status, created_at,"
                   f" updated_at) VALUES ({s.tenant.tenant_id}, 'Sneaked', '{email}', 'active',"
                   " now(), now())")
    first = client.post(CONTACTS, {"first_name": "Clash", "email": email}, token=s.admin)
    crm.assert_error(first, 503, "SERVICE_UNAVAILABLE")
    again = client.post(CONTACTS, {"first_name": "Clash", "email": email}, token=s.admin)
    crm.assert_error(again, 409, "DUPLICATE_EMAIL")
    listed = crm.assert_json_response(client.get(CONTACTS + "?per_page=100", token=s.admin), 200)
    assert email in [c["email"] for c in listed["items"]]



def test_a_deals_actor_restarted_while_its_batch_waits_in_the_committer_loads_that_batch(
        server, client, cli_env, database):
    """The deals actor follows the same rule as the contacts actor."""
    s = crm.tenant_session(client, cli_env)
    metrics = server.metrics_client()
    tid = s.tenant.tenant_id
    crm.create_deal(client, s.admin, title="Loaded")
    title = "Held " + secrets.token_hex(4)
    lock = threading.Thread(target=database.query, args=(
        "BEGIN; LOCK TABLE deals IN SHARE ROW EXCLUSIVE MODE; SELECT pg_sleep(2); COMMIT;",))
    lock.start()
    time.sleep(0.3)
    box = {}
    create = threading.Thread(target=lambda: box.setdefault("r", client.post(
        crm.DEALS, {"title": title, "amount": "10.00"}, token=s.admin)))
    create.start()
    time.sleep(0.3)
    crm.assert_json_response(metrics.post(f"/actors/{tid}/deals/fail"), 202)
    time.sleep(0.2)
    listed = crm.assert_json_response(client.get(crm.DEALS + "?per_page=100", token=s.admin), 200)
    lock.join()
    create.join(timeout=30)
    assert box["r"].status in (201, 503), box["r"].describe()
    stored = database.query(f"SELECT id FROM deals WHERE tenant_id = {tid} AND title = '{title}'")
    assert stored.strip(), "the held create never committed"
    assert int(stored.strip()) in [d["id"] for d in listed["items"]], \
        "the restarted deals actor loaded before the batch in the committer settled"

# Last in the module: it leaves carecrm's pool with connections that fail once.
def test_commits_whose_connection_is_cut_leave_no_drift(server, client, cli_env, database):
    """Postgres connections of carecrm are terminated while writes commit: an outcome may be
    unknown; the state is reloaded, so what the API serves is what Postgres holds."""
    s = crm.tenant_session(client, cli_env)
    crm.create_contact(client, s.admin)

    def cut():
        database.query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                       f" WHERE datname = '{database.name}' AND pid <> pg_backend_pid()")

    acknowledged = write_load_with(client, s.admin, cut)
    # carecrm reconnects; reads may fail once per dropped connection.
    assert crm.eventually(lambda: client.get(CONTACTS, token=s.admin).status == 200, 10.0)
    assert_api_matches_postgres(client, s.admin, database, s.tenant.tenant_id, acknowledged)
