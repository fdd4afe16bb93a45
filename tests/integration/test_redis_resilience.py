"""Redis outages (contract §3 "Revocations live in Redis"): refresh fails closed while Redis is
down and recovers with it; revocations survive a Redis crash (kill -9) and a carecrm restart.

Each test runs its own redis-server (AOF, fsync on every write) and its own `carecrm serve`; the
shared test Redis is never touched."""
import pytest

import crm

LOGIN, REFRESH, ME, LOGOUT = ("/api/v1/auth/login", "/api/v1/auth/refresh", "/api/v1/auth/me",
                              "/api/v1/auth/logout")
RECONNECT_GRACE = 10.0  # seconds carecrm may take to reconnect to a Redis that came back


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """Overrides the shared Redis for this module's CLI runs (migrate, tenant create)."""
    redis = crm.RedisServer(str(tmp_path_factory.mktemp("redis-cli"))).start()
    yield redis.url
    redis.stop()


@pytest.fixture
def stack(request, tmp_path, database, migrated, cli_env):
    """A private redis-server, a carecrm serve pointed at it, and a tenant."""
    redis = crm.RedisServer(str(tmp_path)).start()
    server = crm.start_server(database.url, redis.url, label=f"carecrm[{request.node.name}]")
    try:
        yield server, redis, crm.create_tenant(cli_env)
    finally:
        if not redis.ping():
            redis.start()
        try:
            server.stop(check=True)
            server.cleanup()
        finally:
            redis.stop()


def status_after_reconnect(call) -> int:
    """Repeats `call()` while it answers 503 (carecrm reconnecting), for RECONNECT_GRACE s."""
    status = crm.eventually(lambda: (s := call()) != 503 and s, RECONNECT_GRACE, 0.2)
    return status or 503


def test_refresh_fails_closed_while_redis_is_down_and_recovers(stack):
    server, redis, tenant = stack
    client = server.client()
    pair = crm.login(client, tenant.admin_email, tenant.admin_password)
    assert client.get("/readyz").status == 200

    redis.stop()
    crm.assert_error(client.post(REFRESH, {"refresh_token": pair["refresh_token"]}), 503,
                     "SERVICE_UNAVAILABLE")
    me = crm.assert_json_response(client.get(ME, token=pair["access_token"]), 200)
    assert me["id"] == tenant.admin_id, "requests that do not need Redis keep working"
    assert crm.eventually(lambda: client.get("/readyz").status == 503, 5.0), "/readyz stayed 200"
    crm.assert_error(client.get("/readyz"), 503, "SERVICE_UNAVAILABLE")

    redis.start()
    assert crm.eventually(lambda: client.get("/readyz").status == 200, RECONNECT_GRACE), \
        "/readyz did not recover after Redis came back"
    # The refused attempt consumed nothing: the same refresh token rotates now.
    resp = None

    def refresh():
        nonlocal resp
        resp = client.post(REFRESH, {"refresh_token": pair["refresh_token"]})
        return resp.status

    assert status_after_reconnect(refresh) == 200, resp.describe()
    crm.assert_token_pair(resp.json)
    assert crm.me_status(client, resp.json["access_token"]) == 200


def test_logout_survives_redis_kill_and_carecrm_restart(stack):
    server, redis, tenant = stack
    client = server.client()
    leaving = crm.login(client, tenant.admin_email, tenant.admin_password)
    staying = crm.login(client, tenant.admin_email, tenant.admin_password)

    resp = client.post(LOGOUT, token=leaving["access_token"])
    assert resp.status == 204, resp.describe()
    redis.kill9()
    redis.start()

    status = status_after_reconnect(lambda: crm.refresh_status(client, leaving["refresh_token"]))
    assert status == 401, f"logged-out refresh token answered {status} after a Redis crash"

    server.stop(check=True)
    server.start()
    client = server.client()
    crm.assert_error(client.get(ME, token=leaving["access_token"]), 401, "INVALID_CREDENTIALS")
    me = crm.assert_json_response(client.get(ME, token=staying["access_token"]), 200)
    assert me["id"] == tenant.admin_id
    crm.assert_error(client.post(REFRESH, {"refresh_token": leaving["refresh_token"]}), 401,
                     "INVALID_CREDENTIALS")
    resp = client.post(REFRESH, {"refresh_token": staying["refresh_token"]})
    crm.assert_json_response(resp, 200)
    crm.assert_token_pair(resp.json)


def test_a_logout_made_while_redis_is_down_reaches_other_nodes_when_it_returns(
        stack, database, request):
    """Two nodes share Postgres and Redis. Node A logs a session out while Redis is down: A
    refuses the token at once; node B, which only hears of logouts through Redis, refuses it
    once Redis is back (issue 14 item 5), while another session keeps working on both."""
    node_a, redis, tenant = stack
    node_b = crm.start_server(database.url, redis.url, label=f"carecrm[{request.node.name}-b]")
    try:
        a, b = node_a.client(), node_b.client()
        leaving = crm.login(a, tenant.admin_email, tenant.admin_password)
        staying = crm.login(a, tenant.admin_email, tenant.admin_password)
        assert crm.me_status(b, leaving["access_token"]) == 200

        redis.stop()
        assert crm.eventually(lambda: a.get("/readyz").status == 503, 5.0)
        resp = a.post(LOGOUT, token=leaving["access_token"])
        assert resp.status == 204, resp.describe()  # Postgres holds the revocation
        assert crm.me_status(a, leaving["access_token"]) == 401
        assert crm.me_status(b, leaving["access_token"]) == 200  # B cannot know yet

        redis.start()
        assert crm.eventually(lambda: crm.me_status(b, leaving["access_token"]) == 401,
                              RECONNECT_GRACE, 0.2), \
            "node B still accepts a token logged out on node A while Redis was down"
        for node in (a, b):
            assert crm.me_status(node, staying["access_token"]) == 200
    finally:
        node_b.stop(check=True)
        node_b.cleanup()
