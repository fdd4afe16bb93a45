"""What an operator runs besides the API (issue "The API described exactly, and carecrm installed
like a real service", item 3; docs/operations.md): `carecrm --version`, `tenant list`,
`user reset-password`, and the logs, one line per request, as text or JSON."""
import json
import pathlib
import re
import subprocess

import crm

ROOT = pathlib.Path(__file__).resolve().parents[2]


def cli(env: dict, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run([crm.carecrm_bin(), *args], env=env, capture_output=True, text=True,
                       timeout=120, input=stdin if stdin is not None else "")
    assert not crm.sanitizer_findings(r.stderr), r.stderr
    return r


def test_version_is_the_projects(cli_env):
    version = re.search(r"project\(carecrm VERSION ([0-9.]+)",
                        (ROOT / "CMakeLists.txt").read_text()).group(1)
    r = cli(cli_env, "--version")
    assert (r.returncode, r.stdout) == (0, f"carecrm {version}\n"), r


def test_tenant_list_counts_each_tenants_users_and_contacts(client, cli_env, migrated):
    s = crm.tenant_session(client, cli_env, roles=("agent",))
    for i in range(3):
        crm.create_contact(client, s.admin, first_name=f"Listed{i}")
    r = cli(cli_env, "tenant", "list")
    assert r.returncode == 0, r.stderr
    tenants = {t["tenant_id"]: t for t in json.loads(r.stdout)}
    mine = tenants[s.tenant.tenant_id]
    assert (mine["users"], mine["active_users"], mine["contacts"]) == (2, 2, 3), mine
    crm.assert_timestamp(mine["created_at"])
    assert isinstance(mine["name"], str) and mine["name"], mine


def test_reset_password_replaces_it_ends_the_sessions_and_is_audited(client, cli_env, migrated):
    s = crm.tenant_session(client, cli_env)
    email, old = s.tenant.admin_email, s.tenant.admin_password
    pair = crm.login(client, email, old)
    # A password drawn and printed once.
    r = cli(cli_env, "user", "reset-password", "--tenant", str(s.tenant.tenant_id),
            "--email", email)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["user_id"] == s.tenant.admin_id and out["sessions_revoked"] >= 2, out
    assert out["announced"] is True and len(out["password"]) >= 16, out
    assert client.post("/api/v1/auth/login", {"email": email, "password": old}).status == 401
    # The sessions opened with the old password are over: access and refresh tokens refused.
    assert client.get("/api/v1/auth/me", token=pair["access_token"]).status == 401
    assert client.post("/api/v1/auth/refresh",
                       {"refresh_token": pair["refresh_token"]}).status == 401
    fresh = crm.login(client, email, out["password"])
    # One chosen by the operator, read from stdin (never from the command line, where `ps`
    # shows it).
    chosen = "chosen-" + crm.unique("pw")
    r = cli(cli_env, "user", "reset-password", "--tenant", str(s.tenant.tenant_id),
            "--email", email, "--password-stdin", stdin=chosen + "\n")
    assert r.returncode == 0 and "password" not in json.loads(r.stdout), r
    assert client.get("/api/v1/auth/me", token=fresh["access_token"]).status == 401
    token = crm.login(client, email, chosen)["access_token"]
    rows = crm.assert_json_response(client.get(crm.with_query(
        "/api/v1/audit-log", {"action": "reset_password"}), token=token), 200)["items"]
    assert [(x["actor_type"], x["actor_ref"], x["resource_id"], x["fields"]) for x in rows] == \
        [("operator", "carecrm user reset-password", s.tenant.admin_id, ["password"])] * 2, rows
    # A user of another tenant, a short password: refused, nothing changed.
    r = cli(cli_env, "user", "reset-password", "--tenant", str(s.tenant.tenant_id + 1000),
            "--email", email)
    assert r.returncode == 1 and "has no user" in r.stderr, r
    r = cli(cli_env, "user", "reset-password", "--tenant", str(s.tenant.tenant_id),
            "--email", email, "--password-stdin", stdin="short\n")
    assert r.returncode == 2, r
    crm.login(client, email, chosen)


def requests_logged(server) -> list[str]:
    return [line for line in server.stderr_since_start().splitlines() if " request " in line
            or '"msg":"request"' in line]


def test_json_logs_have_one_object_per_line_and_one_line_per_request(database, redis_url,
                                                                     migrated, cli_env):
    server = crm.start_server(database.url, redis_url, {"CARECRM_LOG_FORMAT": "json"},
                              label="json-logs")
    try:
        client = server.client()
        s = crm.tenant_session(client, cli_env)
        phone = crm.unique_phone()
        c = crm.create_contact(client, s.admin, first_name="Logged", phone=phone)
        resp = client.get(crm.contact_url(c["id"]), token=s.admin,
                          headers={"X-Request-Id": "ops-log-1"})
        crm.assert_json_response(resp, 200)
        client.get(crm.with_query(crm.CONTACTS, {"search": phone}), token=s.admin)
        client.get("/api/v1/no/such/route")
    finally:
        server.stop()
    lines = server.stderr_since_start().splitlines()
    server.cleanup()
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"ts", "level", "msg"} <= set(e) for e in entries), entries
    requests = [e for e in entries if e["msg"] == "request"]
    read = [e for e in requests if e["request_id"] == "ops-log-1"]
    assert len(read) == 1, requests
    assert (read[0]["method"], read[0]["route"], read[0]["status"], read[0]["tenant_id"],
            read[0]["user_id"], read[0]["remote"]) == \
        ("GET", "/api/v1/contacts/{id}", 200, s.tenant.tenant_id, s.tenant.admin_id,
         "127.0.0.1"), read
    assert isinstance(read[0]["duration_ms"], float) and read[0]["duration_ms"] >= 0, read
    assert any(e["route"] == "unmatched" and e["status"] == 404 and e["tenant_id"] is None
               for e in requests), requests
    # A sign-in names the account it signed in (known only once the password was checked).
    signed_in = [e for e in requests if e["route"] == "/api/v1/auth/login" and e["status"] == 200]
    assert signed_in and all((e["tenant_id"], e["user_id"]) == (s.tenant.tenant_id,
                                                                s.tenant.admin_id)
                             for e in signed_in), signed_in
    # Routes, never paths or queries: the phone searched for is in no line.
    assert phone not in "\n".join(lines) and "Logged" not in "\n".join(lines)
    assert any(e["msg"].startswith("carecrm serving") for e in entries), entries


def test_text_logs_by_default_and_the_access_log_can_be_turned_off(database, redis_url,
                                                                   migrated, cli_env):
    for access, expected in (("true", 1), ("false", 0)):
        server = crm.start_server(database.url, redis_url, {"CARECRM_ACCESS_LOG": access},
                                  label=f"access-log-{access}")
        try:
            client = server.client()
            resp = client.get("/healthz", headers={"X-Request-Id": f"ops-text-{access}"})
            assert resp.status == 200
        finally:
            server.stop()
        text = server.stderr_since_start()
        server.cleanup()
        mine = [line for line in text.splitlines() if f"request_id=ops-text-{access}" in line]
        assert len(mine) == expected, text
        if expected:
            assert re.fullmatch(r"\S+Z info request GET /healthz 200 [0-9.]+ms "
                                rf"request_id=ops-text-{access} remote=127\.0\.0\.1", mine[0]), mine
        assert not text.lstrip().startswith("{"), text
