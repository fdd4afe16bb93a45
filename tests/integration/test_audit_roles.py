"""The application role of docs/operations.md "Database roles" (issue 31 item 6): made by
deploy/sql/roles.sql, it runs `carecrm serve` (reads, changes and the audit trail work) but
cannot update, delete or truncate the stored trail, nor write retention's anchors."""
import pathlib
import secrets
import subprocess

import pytest

import crm

ROLES_SQL = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "sql" / "roles.sql"


@pytest.fixture(scope="module")
def app_role(database, migrated, cli_env):
    role = "crm_app_" + secrets.token_hex(4)
    # The owner's cron job: the month partitions exist before the application role is made.
    crm.run_cli(["audit", "prune"], cli_env)
    for _ in range(2):  # idempotent: run after every upgrade
        r = subprocess.run(["psql", database.url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v",
                            f"app_role={role}", "-f", str(ROLES_SQL)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    yield role
    database.query(f'DROP OWNED BY "{role}"')
    crm.psql(database.admin_dsn, f'DROP ROLE IF EXISTS "{role}"')


def as_role(database, role: str) -> str:
    assert "postgres@" in database.url, database.url
    return database.url.replace("postgres@", f"{role}@", 1)


@pytest.mark.parametrize("sql", [
    "UPDATE audit_blocks SET events = '[]'",
    "DELETE FROM audit_blocks",
    "TRUNCATE audit_blocks",
    "DELETE FROM audit_heads",
    "UPDATE audit_pruned SET seq = 0",
    "INSERT INTO audit_pruned (tenant_id, seq, hash) VALUES (999999, 1, 'x')",
    "UPDATE audit_pending SET action = 'x'",
    "UPDATE audit_pending SET sanitized = true",
    "DROP TABLE audit_heads",
])
def test_the_application_role_cannot_rewrite_the_trail(database, app_role, sql):
    with pytest.raises(RuntimeError, match="permission denied|must be owner"):
        crm.psql(as_role(database, app_role), sql)


def test_the_application_role_cannot_touch_a_month_partition(database, app_role):
    part = database.query("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON "
                          "c.oid = i.inhrelid WHERE i.inhparent = 'audit_blocks'::regclass "
                          "ORDER BY 1 LIMIT 1").strip()
    assert part.startswith("audit_blocks_y"), part
    for sql in (f"DELETE FROM {part}", f"UPDATE {part} SET events = '[]'", f"SELECT * FROM {part}"):
        with pytest.raises(RuntimeError, match="permission denied"):
            crm.psql(as_role(database, app_role), sql)


def test_serve_runs_as_the_application_role_and_the_trail_verifies(database, redis_url, cli_env,
                                                                   app_role):
    server = crm.start_server(as_role(database, app_role), redis_url, label="app-role")
    try:
        client = server.client()
        s = crm.tenant_session(client, cli_env)
        c = crm.create_contact(client, s.admin, first_name="Role")
        crm.get_contact(client, s.admin, c["id"])
        items = crm.assert_json_response(client.get(crm.with_query(
            "/api/v1/audit-log", {"resource": "contact", "resource_id": c["id"]}),
            token=s.admin), 200)["items"]
        assert {i["action"] for i in items} >= {"create", "read"}, items
    finally:
        server.stop(check=True)
        server.cleanup()
    r = subprocess.run([crm.carecrm_bin(), "audit", "verify", "--tenant",
                        str(s.tenant.tenant_id)], env=cli_env, capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, (r.stdout, r.stderr)
