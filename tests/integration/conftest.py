"""Fixtures shared by the integration test files. Everything is module-scoped: CTest runs each
test_*.py in its own process, possibly in parallel with the others, so each file gets its own
database (crm_t_<random>), its own `carecrm serve`, and its own tenants and e-mail addresses.

A module may define SERVER_ENV = {"CARECRM_...": value} to configure its server.
"""
import pytest

import crm


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for server in crm.all_servers():
            report.sections.append((f"{server.label} stderr (tail)", server.stderr_tail(3000)))


@pytest.fixture(scope="module")
def pg_dsn() -> str:
    return crm.require_env("CARECRM_TEST_PG_DSN")


@pytest.fixture(scope="module")
def redis_url() -> str:
    return crm.require_env("CARECRM_TEST_REDIS_URL")


@pytest.fixture(scope="module")
def database(pg_dsn):
    crm.carecrm_bin()  # fail before creating anything when the binary is missing
    db = crm.Database(pg_dsn)
    yield db
    db.drop()


@pytest.fixture(scope="module")
def cli_env(database, redis_url) -> dict:
    """Environment for `carecrm migrate` / `carecrm tenant create` on this module's database."""
    return crm.server_env(database.url, redis_url)


@pytest.fixture(scope="module")
def migrated(cli_env) -> None:
    crm.migrate(cli_env)


@pytest.fixture(scope="module")
def server(request, database, redis_url, migrated):
    overrides = getattr(request.module, "SERVER_ENV", {})
    srv = crm.start_server(database.url, redis_url, overrides, label=request.module.__name__)
    yield srv
    srv.stop(check=True)  # SIGTERM -> exit 0, no sanitizer report, nothing else on stdout
    srv.cleanup()


@pytest.fixture(scope="module")
def client(server) -> crm.Client:
    return server.client()


@pytest.fixture(scope="module")
def tenant(cli_env, migrated) -> crm.Tenant:
    return crm.create_tenant(cli_env)


@pytest.fixture(scope="module")
def admin_pair(client, tenant) -> dict:
    """A login of the tenant's admin kept for the whole module: never log it out."""
    return crm.login(client, tenant.admin_email, tenant.admin_password)


@pytest.fixture(scope="module")
def admin_token(admin_pair) -> str:
    return admin_pair["access_token"]


@pytest.fixture(scope="module")
def sess(client, cli_env) -> crm.TenantSession:
    """Tenant A: its admin plus a viewer, an agent and a manager, logged in once per module."""
    return crm.tenant_session(client, cli_env, ("viewer", "agent", "manager"))


@pytest.fixture(scope="module")
def admin(sess) -> str:
    return sess.admin


@pytest.fixture(scope="module")
def sess_b(client, cli_env) -> crm.TenantSession:
    """Tenant B, for isolation checks."""
    return crm.tenant_session(client, cli_env)
