"""Rate limits (issue 14 "Standing defences", contract §9): token buckets per user and per tenant,
per source address for login, inbound webhooks and everything else without a valid token; every
API response carries the IETF RateLimit-Policy and RateLimit headers; over a limit -> 429
RATE_LIMITED with Retry-After."""
import re
import time

import pytest

import crm

USER_Q, TENANT_Q, LOGIN_Q, WEBHOOK_Q, ADDRESS_Q = 40, 60, 12, 20, 30
SERVER_ENV = {
    "CARECRM_RATE_LIMIT_USER": USER_Q,
    "CARECRM_RATE_LIMIT_TENANT": TENANT_Q,
    "CARECRM_RATE_LIMIT_LOGIN": LOGIN_Q,
    "CARECRM_RATE_LIMIT_WEBHOOK": WEBHOOK_Q,
    "CARECRM_RATE_LIMIT_ADDRESS": ADDRESS_Q,
}
ME = "/api/v1/auth/me"
ITEM = re.compile(r'^"(?P<name>[a-z]+)";(?P<params>[a-z]+=\d+(;[a-z]+=\d+)*)$')


def parse_items(field: str) -> dict:
    """A structured-field list of `"name";k=v;...` items -> {name: {k: int}}."""
    out = {}
    for item in field.split(","):
        m = ITEM.match(item.strip())
        assert m, f"not an RFC 8941 item of the RateLimit fields: {item!r} in {field!r}"
        out[m["name"]] = {k: int(v) for k, v in (p.split("=") for p in m["params"].split(";"))}
    return out


def rate_headers(resp) -> tuple[dict, dict]:
    policy, current = resp.header("RateLimit-Policy"), resp.header("RateLimit")
    assert policy and current, f"RateLimit headers missing: {resp.describe()}"
    current_items = parse_items(current)
    assert len(current_items) == 1, current
    return parse_items(policy), current_items


def exhaust(call, limit: int) -> list:
    """Calls until the first 429 (at most limit + 5 times); the responses."""
    out = []
    for _ in range(limit + 5):
        out.append(call())
        if out[-1].status == 429:
            break
    return out


@pytest.fixture
def fresh(client, cli_env):
    """A new tenant with an admin and an agent: buckets of their own."""
    return crm.tenant_session(client, cli_env, ("agent",))


def test_every_api_response_carries_the_ratelimit_headers(client, fresh):
    token = fresh.tokens["agent"]
    for resp in (client.get(ME, token=token),                      # 200
                 client.get("/api/v1/contacts/0", token=token),     # 422
                 client.get("/api/v1/nowhere", token=token),        # 404
                 client.get(ME, token="not-a-token"),               # 401
                 client.get("/healthz"),                            # open route
                 client.post("/api/v1/auth/login", {"email": "x@y.example", "password": "p"})):
        policy, current = rate_headers(resp)
        (name, params), = current.items()
        assert name in policy, (policy, current)
        assert set(params) == {"r", "t"} and 0 <= params["r"] <= policy[name]["q"], current
        for p in policy.values():
            assert p["w"] == 60 and p["q"] > 0, policy
    policy, _ = rate_headers(client.get(ME, token=token))
    assert policy == {"user": {"q": USER_Q, "w": 60}, "tenant": {"q": TENANT_Q, "w": 60}}


def test_remaining_counts_down_with_each_request(client, fresh):
    token = fresh.tokens["agent"]
    seen = [rate_headers(client.get(ME, token=token))[1] for _ in range(3)]
    users = [c["user"]["r"] for c in seen if "user" in c]
    assert users == sorted(users, reverse=True) and users[0] > users[-1], seen


def test_a_user_over_the_limit_gets_429_with_retry_after_and_others_do_not(client, fresh):
    agent = fresh.tokens["agent"]
    responses = exhaust(lambda: client.get(ME, token=agent), USER_Q)
    assert [r.status for r in responses[:-1]] == [200] * (len(responses) - 1)
    refused = responses[-1]
    crm.assert_error(refused, 429, "RATE_LIMITED")
    assert USER_Q - 2 <= len(responses) - 1 <= USER_Q + 2, len(responses)  # refill while testing
    retry = int(refused.header("Retry-After"))
    assert 1 <= retry <= 60 // USER_Q + 1, retry
    _, current = rate_headers(refused)
    assert current["user"]["r"] == 0, current
    # The admin of the same tenant has a bucket of its own.
    assert crm.me_status(client, fresh.admin) == 200
    time.sleep(retry + 0.2)
    assert crm.me_status(client, agent) == 200, "Retry-After was not enough"


def test_the_tenant_limit_binds_users_together_but_never_another_tenant(client, fresh, cli_env):
    other = crm.tenant_session(client, cli_env)
    tokens = [fresh.admin, fresh.tokens["agent"]]
    statuses, i = [], 0
    while len(statuses) < TENANT_Q + 10 and 429 not in statuses:
        statuses.append(client.get(ME, token=tokens[i % 2]).status)
        i += 1
    assert 429 in statuses, "two users together passed the tenant's limit"
    assert statuses.index(429) >= TENANT_Q - 2, statuses  # neither user alone was over
    refused = client.get(ME, token=tokens[0])
    crm.assert_error(refused, 429, "RATE_LIMITED")
    assert "tenant" in refused.json["detail"], refused.describe()
    assert crm.me_status(client, other.admin) == 200, "another tenant paid for this one"


def test_logins_per_source_address_are_limited_even_with_the_right_password(
        database, redis_url, migrated, cli_env):
    # A server of its own: the module's server spent login requests on its fixtures.
    srv = crm.start_server(database.url, redis_url, SERVER_ENV, label="carecrm[login-limit]")
    try:
        logins_are_limited(srv.client(), crm.create_tenant(cli_env))
    finally:
        srv.stop(check=True)
        srv.cleanup()


def logins_are_limited(client, tenant):
    responses = exhaust(lambda: client.post("/api/v1/auth/login", {
        "email": crm.unique_email("nobody"), "password": "wrong-password"}), LOGIN_Q)
    assert {r.status for r in responses[:-1]} == {401}, [r.status for r in responses]
    crm.assert_error(responses[-1], 429, "RATE_LIMITED")
    assert int(responses[-1].header("Retry-After")) >= 1
    resp = client.post("/api/v1/auth/login", {"email": tenant.admin_email,
                                              "password": tenant.admin_password})
    crm.assert_error(resp, 429, "RATE_LIMITED")
    policy, _ = rate_headers(resp)
    assert policy == {"login": {"q": LOGIN_Q, "w": 60}}


def test_inbound_webhooks_per_source_address_are_limited(client):
    responses = exhaust(lambda: client.post("/api/v1/webhooks/987654321987", {"x": 1}), WEBHOOK_Q)
    # An unknown workflow is refused like a wrong secret (issue 31).
    assert {r.status for r in responses[:-1]} == {401}, [r.status for r in responses]
    crm.assert_error(responses[-1], 429, "RATE_LIMITED")
    policy, _ = rate_headers(responses[-1])
    assert policy == {"webhook": {"q": WEBHOOK_Q, "w": 60}}


def test_the_metrics_listener_is_never_rate_limited(server):
    metrics = server.metrics_client()
    for _ in range(ADDRESS_Q + 5):
        resp = metrics.get("/metrics")
        assert resp.status == 200, resp.describe()
    assert resp.header("RateLimit") is None
