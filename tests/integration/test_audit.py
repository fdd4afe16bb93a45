"""The audit trail (issue "Health-data compliance" item 1, docs/compliance.md "Audit trail"):
every read and change of a patient's record and every security event leaves a row saying who,
what, when, from where and with what outcome (field names, never values); each tenant's rows
form a hash chain that `carecrm audit verify` checks; admins read it at GET /audit-log."""
import contextlib
import hashlib
import json
import pathlib
import subprocess
import threading
import time

import pytest

import crm

AUDIT = "/api/v1/audit-log"
UA = "audit-test-agent/1.0"
MIGRATIONS = pathlib.Path(__file__).resolve().parents[2] / "persistence" / "migrations"


audit_rows = crm.audit_rows


@contextlib.contextmanager
def own_server(database, redis_url, cli_env, overrides: dict, label: str, first_name: str):
    """A server of its own with `overrides`, a tenant's session on it and one contact of it:
    yields (server, client, session, contact)."""
    server = crm.start_server(database.url, redis_url, overrides, label=label)
    try:
        client = server.client()
        s = crm.tenant_session(client, cli_env)
        yield server, client, s, crm.create_contact(client, s.admin, first_name=first_name)
    finally:
        server.stop(check=True)
        server.cleanup()


def wait_for_sign_in(database, s) -> None:
    """Until the writer's flush has written the session's sign-in (and claimed, with it, the
    tenant's change rows pending by then)."""
    signed_in = crm.eventually(lambda: database.query(
        f"SELECT count(*) FROM audit_log WHERE tenant_id = {s.tenant.tenant_id}"
        " AND action = 'login'").strip() == "1", timeout=10)
    assert signed_in, "the sign-in was not written by the writer's flush"


def ok_soon(call, timeout: float = 10.0):
    """call() until it answers 200 (a full audit buffer answers 503 for a moment)."""
    resp = crm.eventually(lambda: (lambda r: r if r.status == 200 else None)(call()), timeout)
    assert resp is not None, "no 200 within the time"
    return resp


verify = crm.audit_verify


def test_a_read_of_a_contact_records_who_what_when_and_where(client, sess):
    t = sess.admin
    c = crm.create_contact(client, t, first_name="Ana", email=crm.unique_email("ana"))
    resp = client.get(crm.contact_url(c["id"]), token=sess.tokens["viewer"],
                      headers={"User-Agent": UA, "X-Request-Id": "req-audit-read-1"})
    crm.assert_json_response(resp, 200)
    rows = audit_rows(client, t, resource="contact", resource_id=c["id"], action="read")
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["user_id"] == sess.users["viewer"]["id"], row
    assert (row["actor_type"], row["role"], row["outcome"], row["status"]) == \
        ("user", "viewer", "success", 200), row
    assert (row["client_ip"], row["user_agent"], row["request_id"]) == \
        ("127.0.0.1", UA, "req-audit-read-1"), row
    crm.assert_timestamp(row["at"])
    assert len(row["hash"]) == 64, row


def test_a_change_names_the_fields_changed_never_their_values(client, sess, database):
    t = sess.tokens["agent"]
    secret_phone = crm.unique_phone()
    c = crm.create_contact(client, t, first_name="Bruno", last_name="Alves")
    crm.assert_json_response(client.patch(crm.contact_url(c["id"]), {
        "phone": secret_phone, "last_name": "Alves", "status": "qualified"}, token=t), 200)
    rows = audit_rows(client, sess.admin, resource="contact", resource_id=c["id"])
    by_action = {r["action"]: r for r in rows}
    assert set(by_action) == {"create", "update"}, rows
    # last_name was sent but did not change: only what changed is named.
    assert sorted(by_action["update"]["fields"]) == ["phone", "status"], by_action["update"]
    assert "first_name" in by_action["create"]["fields"], by_action["create"]
    assert by_action["update"]["user_id"] == sess.users["agent"]["id"]
    stored = database.query(f"SELECT row_to_json(a)::text FROM audit_log a "
                            f"WHERE resource_id = {c['id']} AND resource = 'contact'")
    assert secret_phone not in stored and "Bruno" not in stored and "Alves" not in stored, stored


def test_every_acknowledged_change_has_its_row_written_in_its_transaction(client, sess, database):
    """The rows of changes are written by the transaction of the change: after 60 parallel
    creates and deletes, each acknowledged one has exactly one row, before any flush."""
    t = sess.admin
    made = crm.run_parallel(lambda i: crm.create_contact(client, t, first_name=f"P{i}")["id"],
                            list(range(40)))
    gone = made[:20]
    crm.run_parallel(lambda cid: crm.assert_no_content(client.delete(crm.contact_url(cid), token=t)),
                     gone)
    ids = ",".join(map(str, made))
    counts = crm.sql_rows(database, f"""
        SELECT resource_id, action, count(*) AS n FROM (
          SELECT resource_id, action FROM audit_pending WHERE resource = 'contact'
          UNION ALL SELECT resource_id, action FROM audit_log WHERE resource = 'contact') x
        WHERE resource_id IN ({ids}) GROUP BY 1, 2""")
    got = {(r["resource_id"], r["action"]): r["n"] for r in counts}
    expected = {(cid, "create"): 1 for cid in made} | {(cid, "delete"): 1 for cid in gone}
    assert got == expected


def test_a_change_row_reaches_its_chain_with_nobody_asking(database, redis_url, migrated,
                                                          cli_env):
    """The row stored with a change of a tenant nobody reads is moved into its hash chain by the
    writer's sweep on its own (every --audit-chain-interval, 1 s by default), not only when
    GET /audit-log asks for it."""
    with own_server(database, redis_url, cli_env, {}, "audit-chain-sweep", "First") as (
            _, client, s, _first):
        # Once the sign-in's flush is written, no read of this tenant brings the row along.
        wait_for_sign_in(database, s)
        c = crm.create_contact(client, s.admin, first_name="Chained")
        chained = crm.eventually(lambda: database.query(
            f"SELECT count(*) FROM audit_log WHERE resource = 'contact'"
            f" AND resource_id = {c['id']} AND action = 'create'").strip() == "1", timeout=10)
        pending = (f"SELECT count(*) FROM audit_pending WHERE resource = 'contact'"
                   f" AND resource_id = {c['id']}")
        assert chained, database.query(pending)
        assert database.query(pending).strip() == "0"


def test_the_log_waits_for_a_claim_under_way_elsewhere(database, redis_url, migrated, cli_env):
    """GET /audit-log shows every change made before it, even while another node's writer holds
    that change's row in a claim of its own (here a session locking it, then giving it up):
    the flush waits for that claim instead of skipping the row."""
    with own_server(database, redis_url, cli_env, {"CARECRM_AUDIT_CHAIN_INTERVAL": "60"},
                    "audit-chain-60", "First") as (_, client, s, _first):
        # The writer's flush of this tenant's sign-in claims its pending rows with it: once that
        # is written, a change with no read after it stays pending for the minute.
        wait_for_sign_in(database, s)
        # Other servers on this database (the rest of the suite's, each sweeping every second)
        # may chain the row first: then the scenario cannot happen, and a new change tries again.
        for _ in range(20):
            c = crm.create_contact(client, s.admin, first_name="Claimed")
            row = (f"SELECT id FROM audit_pending WHERE resource = 'contact'"
                   f" AND resource_id = {c['id']}")
            if database.query(row).strip():
                break
        else:
            raise AssertionError("the change's row is never waiting to be chained")
        hold = threading.Thread(target=database.query, args=(
            f"BEGIN; {row} FOR UPDATE; SELECT pg_sleep(2) AS held_claim; ROLLBACK;",))
        hold.start()
        held = crm.eventually(lambda: database.query(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%AS held_claim%'"
            " AND state = 'active' AND pid <> pg_backend_pid()").strip() == "1", timeout=5)
        assert held, "the claim was not taken"
        rows = audit_rows(client, s.admin, resource="contact", resource_id=c["id"])
        hold.join()
        assert [r["action"] for r in rows] == ["create"], rows


def test_a_chain_keeps_a_change_before_the_reads_that_followed_it(database, redis_url,
                                                                   migrated, cli_env):
    """The reads written by the writer's next flush bring their tenant's pending change rows
    with them, in the order things happened, though every tenant's are claimed only every
    minute here: the log, newest first, shows the read after the change."""
    with own_server(database, redis_url, cli_env, {"CARECRM_AUDIT_CHAIN_INTERVAL": "60"},
                    "audit-chain-order", "Ordered") as (_, client, s, c):
        crm.assert_json_response(client.patch(crm.contact_url(c["id"]), {"status": "qualified"},
                                              token=s.admin), 200)
        crm.assert_json_response(client.get(crm.contact_url(c["id"]), token=s.admin), 200)
        read_chained = crm.eventually(lambda: database.query(
            f"SELECT count(*) FROM audit_log WHERE resource = 'contact' AND resource_id = {c['id']}"
            " AND action = 'read'").strip() == "1", timeout=5)
        assert read_chained, "the read was not written by the writer's flush"
        rows = audit_rows(client, s.admin, resource="contact", resource_id=c["id"])
        assert [r["action"] for r in rows] == ["read", "update", "create"], rows


def test_a_list_records_its_query_and_the_ids_it_returned(client, sess):
    t = sess.admin
    tag = crm.unique("tag")
    ids = [crm.create_contact(client, t, first_name=f"L{i}", tags=[tag])["id"] for i in range(3)]
    page = crm.list_page(client, t, crm.CONTACTS, {"tag": tag, "per_page": 2, "sort": "id"})
    assert [c["id"] for c in page["items"]] == ids[:2]
    rows = audit_rows(client, t, resource="contact", action="list")
    row = next(r for r in rows if tag in r["query"])
    assert row["ids"] == ids[:2], row
    assert f"tag={tag}" in row["query"] and "per_page=2" in row["query"], row


def test_fhir_search_and_subject_export_are_audited(client, sess):
    t = sess.admin
    c = crm.create_contact(client, t, first_name="Fhira", last_name=crm.unique("Fam"))
    resp = client.get(crm.with_query("/api/v1/fhir/Patient", {"_id": c["id"]}), token=t)
    assert resp.status == 200, resp.describe()
    [search] = audit_rows(client, t, action="fhir_search", limit=1)
    assert search["ids"] == [c["id"]], search
    doc = crm.assert_json_response(client.get(f"{crm.contact_url(c['id'])}/export", token=t), 200)
    # The export holds who accessed the record, the search above included.
    assert [a["action"] for a in doc["access_log"]] == ["create", "fhir_search"], \
        doc["access_log"]
    assert all(set(a) >= {"at", "user_id", "action", "outcome"} for a in doc["access_log"])
    [export] = audit_rows(client, t, resource="contact", resource_id=c["id"], action="export")
    assert export["outcome"] == "success", export


def test_only_admins_read_the_trail_and_a_refusal_is_itself_recorded(client, sess):
    resp = client.get(AUDIT, token=sess.tokens["manager"])
    crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
    rows = audit_rows(client, sess.admin, resource="audit_log", outcome="denied")
    assert rows and rows[0]["user_id"] == sess.users["manager"]["id"], rows
    assert rows[0]["status"] == 403, rows
    # A viewer trying to delete a contact: denied and recorded, the contact kept.
    c = crm.create_contact(client, sess.admin, first_name="Kept")
    crm.assert_error(client.delete(crm.contact_url(c["id"]), token=sess.tokens["viewer"]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    [row] = audit_rows(client, sess.admin, resource="contact", resource_id=c["id"],
                       outcome="denied")
    assert (row["action"], row["role"]) == ("delete", "viewer"), row


def test_another_tenants_rows_are_never_shown(client, sess, sess_b):
    c = crm.create_contact(client, sess_b.admin, first_name="Other")
    crm.get_contact(client, sess_b.admin, c["id"])
    assert audit_rows(client, sess.admin, resource_id=c["id"]) == []
    assert audit_rows(client, sess_b.admin, resource_id=c["id"], action="read") != []


def test_sign_in_failures_refresh_reuse_and_sign_out_are_recorded(client, cli_env):
    tenant = crm.create_tenant(cli_env)
    bad = client.post("/api/v1/auth/login", {"email": tenant.admin_email, "password": "wrong-pw-1"})
    assert bad.status == 401, bad.describe()
    pair = crm.login(client, tenant.admin_email, tenant.admin_password)
    crm.assert_json_response(client.post("/api/v1/auth/refresh",
                                         {"refresh_token": pair["refresh_token"]}), 200)
    reused = client.post("/api/v1/auth/refresh", {"refresh_token": pair["refresh_token"]})
    assert reused.status == 401, reused.describe()
    again = crm.login(client, tenant.admin_email, tenant.admin_password)["access_token"]
    assert client.post("/api/v1/auth/logout", token=again).status == 204
    rows = audit_rows(client, crm.login(client, tenant.admin_email,
                                        tenant.admin_password)["access_token"], resource="session")
    events = [(r["action"], r["outcome"]) for r in reversed(rows)]
    assert events[:6] == [("login", "denied"), ("login", "success"), ("refresh", "success"),
                          ("refresh_reuse", "denied"), ("login", "success"),
                          ("logout", "success")], events
    assert all(r["user_id"] == tenant.admin_id for r in rows), rows


def test_role_and_password_changes_are_recorded_by_field_name(client, sess):
    user, email, password = crm.create_user(client, sess.admin, "viewer")
    new_password = crm.new_password()
    crm.assert_json_response(client.patch(f"/api/v1/users/{user['id']}", {
        "role": "agent", "password": new_password}, token=sess.admin), 200)
    [row] = audit_rows(client, sess.admin, resource="users", resource_id=user["id"],
                       action="update")
    assert sorted(row["fields"]) == ["password", "role"], row
    assert new_password not in json.dumps(row)


def test_cursor_paging_and_filters(client, sess):
    t = sess.admin
    c = crm.create_contact(client, t, first_name="Paged")
    for _ in range(5):
        crm.get_contact(client, t, c["id"])
    first = crm.assert_json_response(client.get(crm.with_query(AUDIT, {
        "resource_id": c["id"], "action": "read", "limit": 3}), token=t), 200)
    assert len(first["items"]) == 3 and first["next_cursor"], first
    second = crm.assert_json_response(client.get(crm.with_query(AUDIT, {
        "resource_id": c["id"], "action": "read", "limit": 3,
        "cursor": first["next_cursor"]}), token=t), 200)
    seqs = [r["seq"] for r in first["items"] + second["items"]]
    assert len(seqs) == 5 and seqs == sorted(seqs, reverse=True), seqs
    assert second["next_cursor"] is None
    future = audit_rows(client, t, resource_id=c["id"], **{"from": "2999-01-01T00:00:00Z"})
    assert future == []
    crm.assert_validation(client.get(crm.with_query(AUDIT, {"resourse": "contact"}), token=t),
                          (("query", "resourse"), "extra_forbidden"))
    crm.assert_validation(client.get(crm.with_query(AUDIT, {"limit": 0}), token=t),
                          (("query", "limit"), "int_parsing"))
    crm.assert_validation(client.get(crm.with_query(AUDIT, {"from": "yesterday"}), token=t),
                          (("query", "from"), "datetime_parsing"))


def test_the_trail_exports_as_ndjson_and_csv(client, sess):
    t = sess.admin
    c = crm.create_contact(client, t, first_name="Exported")
    crm.get_contact(client, t, c["id"])
    resp = client.get(crm.with_query(f"{AUDIT}/export", {"resource_id": c["id"]}), token=t)
    assert resp.status == 200 and resp.header("Content-Type") == "application/x-ndjson", \
        resp.describe()
    lines = [json.loads(x) for x in resp.body.decode().splitlines()]
    assert [r["action"] for r in lines] == ["create", "read"], lines
    resp = client.get(crm.with_query(f"{AUDIT}/export", {"resource_id": c["id"],
                                                         "format": "csv"}), token=t)
    assert resp.status == 200, resp.describe()
    rows = resp.body.decode().splitlines()
    assert rows[0].startswith("seq,at,actor_type,user_id,role"), rows
    assert len(rows) == 3 and ",read," in rows[2], rows


def rewrite_events(database, tid, keep="true", event="e"):
    """Rewrites the tenant's stored events as an insider with SQL access could: keeps those for
    which `keep` holds, each replaced by `event` (both SQL over the element e, a json)."""
    database.query(f"""
        UPDATE audit_blocks b SET events = (
          SELECT coalesce(json_agg({event} ORDER BY n), '[]')::text FROM
            json_array_elements(b.events::json) WITH ORDINALITY AS x(e, n) WHERE {keep})
        WHERE tenant_id = {tid}""")


def saved_blocks(database, tid) -> str:
    return database.query(f"SELECT json_agg(b)::text FROM audit_blocks b WHERE tenant_id = {tid}")


def restore_blocks(database, tid, saved: str):
    database.query(f"DELETE FROM audit_blocks WHERE tenant_id = {tid}")
    database.query(f"INSERT INTO audit_blocks SELECT * FROM json_populate_recordset("
                   f"NULL::audit_blocks, $${saved}$$::json)")


def test_the_hash_chain_names_an_edited_a_removed_and_a_truncated_row(client, cli_env, database):
    s = crm.tenant_session(client, cli_env)
    c = crm.create_contact(client, s.admin, first_name="Chain")
    for round_ in range(3):  # three flushes: the events lie in several blocks
        for _ in range(3):
            crm.get_contact(client, s.admin, c["id"])
        audit_rows(client, s.admin)
    tid = s.tenant.tenant_id
    # The last read of the audit log is itself recorded a moment later: the blocks are saved
    # once the chain has stopped growing, or restoring them would take that block away too.
    head = lambda: database.query(f"SELECT seq FROM audit_heads WHERE tenant_id = {tid}").strip()
    last, since = head(), time.monotonic()
    deadline = since + 15
    while time.monotonic() - since < 1.5 and time.monotonic() < deadline:
        time.sleep(0.25)
        if head() != last:
            last, since = head(), time.monotonic()
    code, out = verify(cli_env, tid)
    assert (code, out["ok"]) == (0, True), out
    n = out["last_seq"]
    assert out["rows"] == n >= 10, out
    saved = saved_blocks(database, tid)
    # Edit an event (an insider hiding who read the record).
    rewrite_events(database, tid, event="CASE WHEN (e->>0)::int = 4 THEN "
                   "jsonb_set(e::jsonb, '{3}', '999999')::json ELSE e END")
    code, out = verify(cli_env, tid)
    assert (code, out["ok"], out["broken_seq"]) == (1, False, 4), out
    assert "edited" in out["reason"], out
    restore_blocks(database, tid, saved)
    assert verify(cli_env, tid)[0] == 0
    # Remove an event from the middle of its block.
    rewrite_events(database, tid, keep="(e->>0)::int <> 5")
    code, out = verify(cli_env, tid)
    assert (code, out["broken_seq"]) == (1, 5), out
    restore_blocks(database, tid, saved)
    # Remove a whole block.
    blocks = crm.sql_rows(database, f"SELECT first_seq, last_seq FROM audit_blocks "
                                    f"WHERE tenant_id = {tid} ORDER BY first_seq")
    assert len(blocks) >= 3, blocks
    middle = blocks[len(blocks) // 2]
    database.query(f"DELETE FROM audit_blocks WHERE tenant_id = {tid} "
                   f"AND first_seq = {middle['first_seq']}")
    code, out = verify(cli_env, tid)
    assert (code, out["broken_seq"]) == (1, middle["first_seq"]), out
    restore_blocks(database, tid, saved)
    assert verify(cli_env, tid)[0] == 0
    # Remove the newest events: the chain's head still counts them.
    rewrite_events(database, tid, keep=f"(e->>0)::int < {n - 1}")
    code, out = verify(cli_env, tid)
    assert (code, out["broken_seq"]) == (1, n - 1), out


def test_retention_drops_whole_old_months_and_the_kept_chain_still_verifies(client, cli_env,
                                                                          database):
    s = crm.tenant_session(client, cli_env)
    c = crm.create_contact(client, s.admin, first_name="Old")
    for _ in range(3):
        crm.get_contact(client, s.admin, c["id"])
    audit_rows(client, s.admin)
    tid = s.tenant.tenant_id
    old = int(database.query(f"SELECT max(last_seq) FROM audit_blocks WHERE tenant_id = {tid}"))
    for _ in range(3):
        crm.get_contact(client, s.admin, c["id"])
    audit_rows(client, s.admin)
    # The blocks written first as if chained in January 2019.
    database.query("CREATE TABLE IF NOT EXISTS audit_blocks_y2019m01 PARTITION OF audit_blocks "
                   "FOR VALUES FROM ('2019-01-01') TO ('2019-02-01')")
    database.query(f"UPDATE audit_blocks SET logged_at = '2019-01-15' WHERE tenant_id = {tid} "
                   f"AND last_seq <= {old}")
    short = {"CARECRM_AUDIT_RETENTION_DAYS": "365", "CARECRM_AUDIT_RETENTION_OVERRIDE": "true"}
    r = subprocess.run([crm.carecrm_bin(), "audit", "prune"],
                       env=crm.with_override(cli_env, short), capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert "audit_blocks_y2019m01" in json.loads(r.stdout)["dropped"], r.stdout
    assert database.query(f"SELECT count(*) FROM audit_log WHERE tenant_id = {tid} "
                          f"AND seq <= {old}").strip() == "0"
    code, out = verify(cli_env, tid)
    assert (code, out["ok"], out["pruned_through"], out["first_seq"]) == \
        (0, True, old, old + 1), out
    # Deleting the oldest kept event is not mistaken for retention.
    rewrite_events(database, tid, keep=f"(e->>0)::int <> {old + 1}")
    code, out = verify(cli_env, tid)
    assert (code, out["broken_seq"]) == (1, old + 1), out


def test_reads_answer_503_rather_than_go_unaudited_while_changes_go_on(database, redis_url,
                                                                      migrated, cli_env):
    """The writer is held (a lock on the chains' heads) with a buffer of two rows: reads soon
    answer 503 instead of being served unaudited; writes are audited in their own transactions
    and keep working; once the writer is free, every read it accepted is in the trail."""
    with own_server(database, redis_url, cli_env, {"CARECRM_AUDIT_BUFFER": "2"},
                    "audit-buffer-2", "Held") as (server, client, s, c):
        ok_soon(lambda: client.get(AUDIT, token=s.admin))
        hold = threading.Thread(target=database.query, args=(
            "BEGIN; LOCK TABLE audit_heads IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(5); COMMIT;",))
        hold.start()
        held = crm.eventually(lambda: database.query(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE "
            "c.relname = 'audit_heads' AND l.mode = 'AccessExclusiveLock' AND l.granted"
        ).strip() == "1", timeout=5)
        assert held, "the lock on audit_heads was not taken"
        statuses = [client.get(crm.contact_url(c["id"]), token=s.admin).status for _ in range(6)]
        assert set(statuses) == {200, 503} and statuses[-1] == 503, statuses
        crm.assert_error(client.get(crm.contact_url(c["id"]), token=s.admin), 503,
                         "SERVICE_UNAVAILABLE")
        metrics = {name: value for name, labels, value in crm.parse_prometheus(
            server.metrics_client().get("/metrics").body.decode())}
        assert metrics["carecrm_audit_rows_refused_total"] >= 2, metrics
        assert metrics["carecrm_audit_rows_buffered"] >= 1, metrics
        # Changes do not wait for the writer and are never refused for it.
        crm.assert_json_response(client.patch(crm.contact_url(c["id"]), {"status": "inactive"},
                                              token=s.admin), 200)
        hold.join()
        served = statuses.count(200)
        # The buffer holds two rows: a read right behind others may still find it full.
        reads = json.loads(ok_soon(lambda: client.get(crm.with_query(AUDIT, {
            "resource_id": c["id"], "action": "read"}), token=s.admin)).body)["items"]
        assert len(reads) == served, (statuses, reads)
        got = ok_soon(lambda: client.get(crm.contact_url(c["id"]), token=s.admin))
        assert json.loads(got.body)["status"] == "inactive", got.describe()
        checked = verify(cli_env, s.tenant.tenant_id)
        assert checked[1]["ok"], checked


def test_rows_written_survive_a_kill_and_changes_are_never_lost(database, redis_url, migrated,
                                                               cli_env):
    server = crm.start_server(database.url, redis_url, {}, label="audit-kill")
    client = server.client()
    s = crm.tenant_session(client, cli_env)
    made = [crm.create_contact(client, s.admin, first_name=f"K{i}")["id"] for i in range(10)]
    for cid in made:
        crm.get_contact(client, s.admin, cid)
    flushed = audit_rows(client, s.admin, action="read", limit=50)
    server.kill()
    server.cleanup()
    server = crm.start_server(database.url, redis_url, {}, label="audit-kill-2")
    try:
        client = server.client()
        token = crm.login(client, s.tenant.admin_email, s.tenant.admin_password)["access_token"]
        # Every acknowledged create was audited in its transaction; reads flushed before the
        # kill are still there.
        after = audit_rows(client, token, action="create", limit=50)
        assert sorted(r["resource_id"] for r in after) == sorted(made)
        reads = audit_rows(client, token, action="read", limit=50)
        assert len(flushed) == 10
        assert {r["seq"] for r in flushed} <= {r["seq"] for r in reads}
        checked = verify(cli_env, s.tenant.tenant_id)
        assert checked[1]["ok"], checked
    finally:
        server.stop(check=True)
        server.cleanup()


def test_messages_conversations_and_consents_are_audited_in_their_transactions(client, sess,
                                                                               database):
    """An inbound message (and the contact made for it) is recorded as the channel's webhook's
    doing, a staff reply, a conversation change and a consent as the user's, each by the
    transaction that stores it (the rows are in audit_pending or audit_log before any read)."""
    t = sess.tokens["agent"]
    secret = "audit-ch-" + crm.unique("s")
    with crm.Receiver([200] * 5) as rcv:
        chan = crm.create_channel(client, sess.admin, type="api", webhook_secret=secret,
                                  config={"outbound_url": rcv.url("/out")})
        ack = crm.inbound(client, chan["id"], secret, {"phone": crm.unique_phone()},
                          "private words")
        cid, conv = ack["contact_id"], ack["conversation_id"]
        crm.send_message(client, t, conv, "an answer")
        crm.assert_json_response(client.patch(crm.conversation_url(conv), {"status": "pending"},
                                              token=t), 200)
        crm.assert_json_response(client.post(f"{crm.contact_url(cid)}/consents", {
            "purpose": "marketing", "granted": True, "source": "call"}, token=t), 201)
    rows = crm.sql_rows(database, f"""
        SELECT resource, resource_id, action, actor_type, actor_ref, user_id, fields, ids
        FROM (SELECT resource, resource_id, action, actor_type, actor_ref, user_id, fields, ids,
                     at FROM audit_pending
              UNION ALL SELECT resource, resource_id, action, actor_type, actor_ref, user_id,
                     fields, ids, at FROM audit_log) x
        WHERE (resource = 'contact' AND resource_id = {cid})
           OR (resource = 'conversation' AND resource_id = {conv}) ORDER BY at""")
    got = [(r["resource"], r["action"], r["actor_type"], r["actor_ref"], r["user_id"])
           for r in rows]
    webhook = f"channel:{chan['id']}"
    agent = sess.users["agent"]["id"]
    assert got == [("contact", "create", "webhook", webhook, None),
                   ("conversation", "message_received", "webhook", webhook, None),
                   ("conversation", "send_message", "user", "", agent),
                   ("conversation", "update", "user", "", agent),
                   ("contact", "record_consent", "user", "", agent)], got
    assert rows[1]["ids"] == [cid] and rows[3]["fields"] == ["status"], rows
    assert "private words" not in database.query(
        f"SELECT string_agg(row_to_json(a)::text, '') FROM audit_log a")


def chain_hash(previous: str, seq: int, tenant: int, e: dict) -> str:
    """The row's hash as docs/compliance.md describes it, written again here independently of
    the C++ (SHA-256 over each fact length-prefixed, the previous hash first)."""
    text = []

    def add(v):
        v = "-" if v is None else str(v)
        text.append(f"{len(v)}:{v},")
    for v in (previous, seq, tenant, e["at_micros"], e["actor_type"], e["user_id"], e["role"],
              e["actor_ref"], e["resource"], e["resource_id"], e["action"], len(e["fields"]),
              *e["fields"], e["outcome"], e["status"], e["client_ip"], e["user_agent"],
              e["request_id"], e["query"], len(e["ids"]), *e["ids"]):
        add(v)
    return hashlib.sha256("".join(text).encode()).hexdigest()


def test_rows_stored_before_the_blocks_are_kept_and_still_verify(pg_dsn, redis_url):
    """Migration 013 turns each row of the table audit_log had (010) into a block of one event:
    a chain written by an earlier carecrm, in two months, still verifies after `migrate`, and an
    edit of one of its events is still found."""
    db = crm.Database(pg_dsn)
    try:
        migrations = sorted(MIGRATIONS.glob("*.sql"))
        db.query("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                 " applied_at timestamptz NOT NULL DEFAULT now())")
        for m in migrations:
            if int(m.name[:3]) > 12:
                break
            db.query(m.read_text())
            db.query(f"INSERT INTO schema_migrations (version, name) VALUES "
                     f"({int(m.name[:3])}, '{m.name}')")
        db.query("CREATE TABLE audit_log_y2026m10 PARTITION OF audit_log FOR VALUES FROM "
                 "('2026-10-01') TO ('2026-11-01'); CREATE TABLE audit_log_y2026m11 PARTITION "
                 "OF audit_log FOR VALUES FROM ('2026-11-01') TO ('2026-12-01')")
        previous = "0" * 64
        for seq in range(1, 6):
            e = {"at_micros": 1792000000000000 + seq * 1234567, "actor_type": "user",
                 "user_id": None if seq == 3 else 5, "role": "admin", "actor_ref": "",
                 "resource": "contact", "resource_id": None if seq == 4 else 7,
                 "action": "list" if seq == 4 else "read",
                 "fields": ["a", "b"] if seq == 2 else [], "outcome": "success", "status": 200,
                 "client_ip": "127.0.0.1", "user_agent": 'ua "quoted" \\ back', "request_id":
                 f"r{seq}", "query": "tag=x" if seq == 4 else "", "ids": [7, 8] if seq == 4 else []}
            h = chain_hash(previous, seq, 1, e)
            db.query(f"""INSERT INTO audit_log VALUES (1, {seq},
                '{"2026-10-15" if seq <= 2 else "2026-11-20"}',
                timestamptz 'epoch' + {e["at_micros"]} * interval '1 microsecond', 'user',
                {e["user_id"] or "NULL"}, 'admin', '', 'contact', {e["resource_id"] or "NULL"},
                '{e["action"]}', '{{{",".join(e["fields"])}}}', 'success', 200, '127.0.0.1',
                $u${e["user_agent"]}$u$, 'r{seq}', '{e["query"]}',
                '{{{",".join(map(str, e["ids"]))}}}', '\\x{h}')""")
            previous = h
        db.query(f"INSERT INTO audit_heads VALUES (1, 5, '{previous}', '2026-11-20')")
        env = crm.server_env(db.url, redis_url)
        crm.migrate(env)
        code, out = verify(env, 1)
        assert (code, out["ok"], out["rows"], out["last_seq"]) == (0, True, 5, 5), out
        got = crm.sql_rows(db, "SELECT seq, resource_id, ids, fields, user_agent, "
                               "(extract(epoch from at) * 1000000)::bigint AS at "
                               "FROM audit_log ORDER BY seq")
        assert [(r["seq"], r["resource_id"], r["ids"]) for r in got] == \
            [(1, 7, []), (2, 7, []), (3, 7, []), (4, None, [7, 8]), (5, 7, [])], got
        assert got[1]["fields"] == ["a", "b"] and got[0]["user_agent"] == 'ua "quoted" \\ back'
        assert got[2]["at"] == 1792000000000000 + 3 * 1234567, got
        months = db.query("SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class "
                          "WHERE relname ~ '^audit_blocks_y[0-9]+m[0-9]+$'").strip()
        assert months == "audit_blocks_y2026m10,audit_blocks_y2026m11", months
        rewrite_events(db, 1, event="CASE WHEN (e->>0)::int = 2 THEN "
                       "jsonb_set(e::jsonb, '{14}', '\"forged\"')::json ELSE e END")
        code, out = verify(env, 1)
        assert (code, out["broken_seq"]) == (1, 2), out
    finally:
        db.drop()
