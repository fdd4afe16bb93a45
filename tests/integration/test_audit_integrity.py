"""The audit trail cannot be silenced or rewound (issue 31 items 1, 2 and 6; docs/compliance.md
"What no request can do to the trail" and "Tamper evidence"):

- bytes a request carries (headers, body keys) that PostgreSQL text cannot hold are replaced and
  flagged, never retried forever;
- a row PostgreSQL refuses all the same is isolated and stored escaped while the rows behind it go
  on;
- a stored block the audit_log view cannot parse is reported, not a 500 for the whole tenant;
- the chain's head and retention's anchor are signed with a key outside the database, so a
  rewound chain, a removed head or a moved anchor fail `carecrm audit verify`; prunes are rows of
  the chain; retention below six years needs an explicit override."""
import json
import socket
import subprocess
import time

import crm

AUDIT = "/api/v1/audit-log"


audit_rows = crm.audit_rows


verify = crm.audit_verify


def metrics(server) -> dict:
    resp = server.metrics_client().get("/metrics")
    assert resp.status == 200, resp.describe()
    return {name: value for name, labels, value in crm.parse_prometheus(resp.body.decode())
            if not labels}


def raw_request(server, method: str, path: str, headers: list[tuple[bytes, bytes]],
                body: bytes = b"") -> int:
    """A request with header bytes http.client would refuse to send; returns the status."""
    host, port = server.host, server.port
    lines = [f"{method} {path} HTTP/1.1".encode(), f"Host: {host}:{port}".encode(),
             b"Connection: close", f"Content-Length: {len(body)}".encode()]
    lines += [k + b": " + v for k, v in headers]
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1])


# ---- item 1: bytes that are not text ------------------------------------------------------------


def test_a_user_agent_that_is_not_utf8_is_stored_replaced_and_the_trail_goes_on(
        server, client, cli_env):
    """A byte 0xFF in a recorded header used to make the writer's COPY fail for ever: every
    tenant's GET /audit-log answered 503 and, once the buffer filled, every audited read."""
    s = crm.tenant_session(client, cli_env, roles=("viewer",))
    c = crm.create_contact(client, s.admin, first_name="Bytes")
    before = metrics(server)
    # An anonymous sign-in attempt (chain 0) and a signed-in read, each with bad bytes.
    login = json.dumps({"email": crm.unique_email("nobody"), "password": "x" * 12}).encode()
    assert raw_request(server, "POST", "/api/v1/auth/login",
                       [(b"User-Agent", b"probe\xff\xfe/1"), (b"Content-Type",
                                                             b"application/json")],
                       login) == 401
    assert raw_request(server, "GET", crm.contact_url(c["id"]),
                       [(b"User-Agent", b"reader\xc3\x28\xff"),
                        (b"Authorization", f"Bearer {s.tokens['viewer']}".encode())]) == 200
    rows = audit_rows(client, s.admin, resource="contact", resource_id=c["id"], action="read")
    assert rows and rows[0]["user_agent"] == "reader\ufffd(\ufffd", rows
    assert rows[0]["sanitized"] is True, rows[0]
    # The writer went on: later reads are recorded too, and nothing failed.
    crm.get_contact(client, s.admin, c["id"])
    assert len(audit_rows(client, s.admin, resource="contact", resource_id=c["id"],
                          action="read")) == 2
    after = metrics(server)
    assert after["carecrm_audit_writer_failures_total"] == \
        before["carecrm_audit_writer_failures_total"], after
    assert after["carecrm_audit_rows_sanitized_total"] >= \
        before["carecrm_audit_rows_sanitized_total"] + 2, after
    assert verify(cli_env, s.tenant.tenant_id)[0] == 0
    assert verify(cli_env, 0)[0] == 0


# ---- item 2: field names recorded from a request ----------------------------------------------


def test_a_body_key_holding_nul_leaves_the_log_readable_and_verifiable(client, cli_env):
    """A viewer's refused PATCH with the key "\\u0000" used to store that name in the row: the
    view's jsonb cast then failed, and GET /audit-log, the subject export and verify answered
    500 for the tenant from then on."""
    s = crm.tenant_session(client, cli_env, roles=("viewer",))
    c = crm.create_contact(client, s.admin, first_name="Keys")
    resp = client.patch(crm.contact_url(c["id"]), raw=b'{"\\u0000": 1, "ok\\u0000k": 2}',
                        token=s.tokens["viewer"])
    crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
    rows = audit_rows(client, s.admin, resource="contact", resource_id=c["id"],
                      outcome="denied")
    assert rows and sorted(rows[0]["fields"]) == ["ok\ufffdk", "\ufffd"], rows
    assert rows[0]["sanitized"] is True
    export = client.get(f"/api/v1/contacts/{c['id']}/export", token=s.admin)
    assert export.status == 200, export.describe()
    assert verify(cli_env, s.tenant.tenant_id)[0] == 0


def test_a_block_the_view_cannot_parse_is_reported_and_the_rest_is_read(client, cli_env,
                                                                        database):
    """Whatever is stored (here a block an insider broke by hand), readers answer: the block
    stands as one 'unreadable' row naming its rows, verify names it, the export still works."""
    s = crm.tenant_session(client, cli_env)
    c = crm.create_contact(client, s.admin, first_name="Broken")
    crm.get_contact(client, s.admin, c["id"])
    audit_rows(client, s.admin)  # stores what the writer holds
    tid = s.tenant.tenant_id
    block = crm.sql_rows(database, f"SELECT first_seq, last_seq FROM audit_blocks WHERE "
                                   f"tenant_id = {tid} ORDER BY first_seq LIMIT 1")[0]
    database.query(f"UPDATE audit_blocks SET events = '[[1, \"\\u0000\"' WHERE tenant_id = {tid} "
                   f"AND first_seq = {block['first_seq']}")
    items = audit_rows(client, s.admin)
    unreadable = [i for i in items if i["action"] == "unreadable"]
    assert len(unreadable) == 1, items
    assert unreadable[0]["resource"] == "audit_block" and unreadable[0]["outcome"] == "failure"
    assert f"rows {block['first_seq']} to {block['last_seq']}" in unreadable[0]["query"]
    assert len(items) > 1, "the readable rows are still listed"
    assert client.get(f"/api/v1/contacts/{c['id']}/export", token=s.admin).status == 200
    assert client.get(crm.with_query(AUDIT + "/export", {"format": "ndjson"}),
                      token=s.admin).status == 200
    code, out = verify(cli_env, tid)
    assert code == 1 and out["broken_seq"] == block["first_seq"], out
    assert "cannot be read" in out["reason"], out


def test_a_row_postgres_refuses_is_isolated_and_the_rows_behind_it_are_stored(
        server, client, cli_env, database):
    """Whatever PostgreSQL refuses for its content (here a trigger refusing a marker, as it
    would refuse a byte sequence), the writer halves its rounds until the row is alone, stores
    it escaped and flagged, and every other row is stored as it was."""
    s = crm.tenant_session(client, cli_env)
    c = crm.create_contact(client, s.admin, first_name="Poison")
    audit_rows(client, s.admin)
    database.query("""
        CREATE OR REPLACE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.events LIKE '%poison-é%' THEN
            RAISE EXCEPTION 'refused for the test' USING ERRCODE = 'character_not_in_repertoire';
          END IF;
          RETURN NEW;
        END $$;
        CREATE TRIGGER refuse_poison BEFORE INSERT ON audit_blocks
          FOR EACH ROW EXECUTE FUNCTION refuse_poison();""")
    try:
        before = metrics(server)
        agents = [f"good-{i}" for i in range(6)]
        agents.insert(3, "poison-é")
        for ua in agents:
            resp = client.get(crm.contact_url(c["id"]), token=s.admin,
                              headers={"User-Agent": ua.encode()})
            assert resp.status == 200, resp.describe()
        rows = audit_rows(client, s.admin, resource="contact", resource_id=c["id"],
                          action="read")
        got = {r["user_agent"]: r["sanitized"] for r in rows}
        assert got == {**{f"good-{i}": False for i in range(6)},
                       "poison-\\xc3\\xa9": True}, got
        after = metrics(server)
        assert after["carecrm_audit_rows_quarantined_total"] > \
            before["carecrm_audit_rows_quarantined_total"], after
    finally:
        database.query("DROP TRIGGER refuse_poison ON audit_blocks; DROP FUNCTION refuse_poison()")
    assert verify(cli_env, s.tenant.tenant_id)[0] == 0


# ---- item 6: signed heads and anchors ----------------------------------------------------------


def chain_with_rows(client, cli_env, n_reads: int = 4):
    s = crm.tenant_session(client, cli_env)
    c = crm.create_contact(client, s.admin, first_name="Signed")
    for _ in range(n_reads):
        crm.get_contact(client, s.admin, c["id"])
        audit_rows(client, s.admin)  # one block per round
    # The writer stores the reads of the audit log itself within a flush interval: nothing of
    # this tenant's is left to write while a test then edits its chain by hand.
    time.sleep(0.6)
    return s, c


def test_a_rewound_chain_fails_verify(client, cli_env, database):
    """Deleting the newest blocks and setting the head back to the last kept row used to pass
    verify: the head's signature now needs a key the database does not hold."""
    s, _ = chain_with_rows(client, cli_env)
    tid = s.tenant.tenant_id
    assert verify(cli_env, tid)[0] == 0
    saved_head = crm.sql_rows(database, f"SELECT * FROM audit_heads WHERE tenant_id = {tid}")[0]
    newest = crm.sql_rows(database, f"SELECT first_seq FROM audit_blocks WHERE tenant_id = {tid} "
                                    f"ORDER BY first_seq DESC LIMIT 1")[0]["first_seq"]
    kept = crm.sql_rows(database, f"SELECT last_seq, last_hash FROM audit_blocks WHERE "
                                  f"tenant_id = {tid} AND first_seq < {newest} "
                                  f"ORDER BY first_seq DESC LIMIT 1")[0]
    database.query(f"DELETE FROM audit_blocks WHERE tenant_id = {tid} AND first_seq >= {newest}")
    database.query(f"UPDATE audit_heads SET seq = {kept['last_seq']}, "
                   f"hash = '{kept['last_hash']}' WHERE tenant_id = {tid}")
    code, out = verify(cli_env, tid)
    assert code == 1 and "not signed" in out["reason"], out
    # A signature copied from the real head does not fit the rewound one either.
    database.query(f"UPDATE audit_heads SET signature = '{saved_head['signature']}' "
                   f"WHERE tenant_id = {tid}")
    code, out = verify(cli_env, tid)
    assert code == 1 and "not signed" in out["reason"], out
    # Nor does a plaintext copy of what is signed.
    database.query(f"UPDATE audit_heads SET signature = '{kept['last_seq']}:{kept['last_hash']}' "
                   f"WHERE tenant_id = {tid}")
    assert verify(cli_env, tid)[0] == 1


def test_a_removed_head_fails_verify(client, cli_env, database):
    s, _ = chain_with_rows(client, cli_env, 2)
    tid = s.tenant.tenant_id
    database.query(f"DELETE FROM audit_heads WHERE tenant_id = {tid}")
    code, out = verify(cli_env, tid)
    assert code == 1 and "no head" in out["reason"], out


def test_the_writer_records_in_the_chain_a_head_it_did_not_sign(server, client, cli_env,
                                                               database):
    """The writer does not launder a rewound head by signing its next row: it chains a
    head_unverified row first, and verify keeps failing after the head is signed again."""
    s, c = chain_with_rows(client, cli_env, 2)
    tid = s.tenant.tenant_id
    database.query(f"UPDATE audit_heads SET signature = NULL WHERE tenant_id = {tid}")
    before = metrics(server)
    crm.get_contact(client, s.admin, c["id"])
    rows = audit_rows(client, s.admin, resource="audit_log", action="head_unverified")
    assert len(rows) == 1 and rows[0]["outcome"] == "failure", rows
    assert metrics(server)["carecrm_audit_heads_unverified_total"] == \
        before["carecrm_audit_heads_unverified_total"] + 1
    code, out = verify(cli_env, tid)
    assert code == 1 and out["broken_seq"] == rows[0]["seq"], out


def test_prunes_are_recorded_and_a_moved_anchor_fails_verify(server, client, cli_env, database):
    s, c = chain_with_rows(client, cli_env, 2)
    tid = s.tenant.tenant_id
    old = int(database.query(f"SELECT max(last_seq) FROM audit_blocks WHERE tenant_id = {tid}"))
    crm.get_contact(client, s.admin, c["id"])
    audit_rows(client, s.admin)
    database.query("CREATE TABLE IF NOT EXISTS audit_blocks_y2018m03 PARTITION OF audit_blocks "
                   "FOR VALUES FROM ('2018-03-01') TO ('2018-04-01')")
    database.query(f"UPDATE audit_blocks SET logged_at = '2018-03-15' WHERE tenant_id = {tid} "
                   f"AND last_seq <= {old}")
    short = crm.with_override(cli_env, {"CARECRM_AUDIT_RETENTION_DAYS": "365"})
    # Below six years without the override: refused, nothing dropped.
    r = subprocess.run([crm.carecrm_bin(), "audit", "prune"], env=short, capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "audit-retention-override" in r.stderr, (r.stdout, r.stderr)
    assert database.query("SELECT count(*) FROM pg_class WHERE relname = "
                          "'audit_blocks_y2018m03'").strip() == "1"
    r = subprocess.run([crm.carecrm_bin(), "audit", "prune"],
                       env=crm.with_override(short, {"CARECRM_AUDIT_RETENTION_OVERRIDE": "true"}),
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert "audit_blocks_y2018m03" in json.loads(r.stdout)["dropped"], r.stdout
    # The prune is a row of the tenant's own chain (claimed by the server's writer).
    rows = audit_rows(client, s.admin, resource="audit_log", action="prune")
    assert len(rows) == 1 and f"after row {old}" in rows[0]["query"], rows
    code, out = verify(cli_env, tid)
    assert (code, out["pruned_through"]) == (0, old), out
    # Moving the anchor forward (hiding the removal of the kept rows after it) is caught.
    database.query(f"UPDATE audit_pruned SET seq = seq + 1 WHERE tenant_id = {tid}")
    code, out = verify(cli_env, tid)
    assert code == 1 and "anchor" in out["reason"], out


def test_serve_refuses_a_retention_below_six_years_without_the_override(database, redis_url,
                                                                       migrated):
    env = crm.server_env(database.url, redis_url, {"CARECRM_AUDIT_RETENTION_DAYS": "30"})
    r = subprocess.run([crm.carecrm_bin(), "serve"], env=env, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "audit-retention-override" in r.stderr, r.stderr
