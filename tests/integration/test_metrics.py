"""Observability (architecture rule 9, contract §9): Prometheus metrics per route and actor type on
the metrics listener, the /actors view of live tenant supervisors, and tenant passivation."""
import contextlib
import json
import pathlib
import re
import subprocess
import time

import pytest

import crm

TENANT_IDLE_TIMEOUT = 3
SERVER_ENV = {"CARECRM_TENANT_IDLE_TIMEOUT": TENANT_IDLE_TIMEOUT}

ME_ROUTE = "/api/v1/auth/me"
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def metrics(server):
    return server.metrics_client()


def scrape(metrics) -> list:
    resp = metrics.get("/metrics")
    assert resp.status == 200, resp.describe()
    return crm.parse_prometheus(resp.body.decode())


def value(samples, name, **labels) -> float:
    """Sum of the samples of `name` whose labels include `labels` (0 when there is none)."""
    return sum(v for n, lab, v in samples
               if n == name and all(lab.get(k) == str(want) for k, want in labels.items()))


def has(samples, name, **labels) -> bool:
    return any(n == name and all(lab.get(k) == str(w) for k, w in labels.items())
               for n, lab, _ in samples)


def requests_total(metrics, route, status, method="GET") -> float:
    return value(scrape(metrics), "carecrm_http_requests_total", method=method, route=route,
                 status=status)


def live_tenants(metrics) -> dict:
    body = crm.assert_json_response(metrics.get("/actors"), 200)
    assert isinstance(body, dict) and isinstance(body.get("tenants"), list), body
    return {t["tenant_id"]: t for t in body["tenants"]}


def test_metrics_endpoint_serves_prometheus_text(metrics):
    resp = metrics.get("/metrics")
    assert resp.status == 200, resp.describe()
    assert (resp.header("Content-Type") or "").startswith("text/plain"), resp.describe()
    crm.parse_prometheus(resp.body.decode())  # every line parses


def test_request_counter_counts_me_by_route_and_status(client, metrics, admin_token):
    before = requests_total(metrics, ME_ROUTE, 200)
    for _ in range(3):
        assert crm.me_status(client, admin_token) == 200
    crm.eventually(lambda: requests_total(metrics, ME_ROUTE, 200) >= before + 3, 2.0)
    after = requests_total(metrics, ME_ROUTE, 200)
    assert after == before + 3, f"counter went from {before} to {after} after 3 requests"


def test_request_counter_labels_error_status(client, metrics):
    before = requests_total(metrics, ME_ROUTE, 401)
    assert crm.me_status(client, "not-a-token") == 401
    assert crm.eventually(lambda: requests_total(metrics, ME_ROUTE, 401) == before + 1, 2.0)


def test_latency_histogram_has_cumulative_buckets_for_me(client, metrics, admin_token):
    for _ in range(2):
        assert crm.me_status(client, admin_token) == 200
    samples = scrape(metrics)
    buckets = [(lab, v) for n, lab, v in samples
               if n == "carecrm_http_request_duration_seconds_bucket"
               and lab.get("route") == ME_ROUTE and "le" in lab]
    assert buckets, "no latency histogram buckets for /api/v1/auth/me"
    series = {}
    for lab, v in buckets:
        key = tuple(sorted((k, x) for k, x in lab.items() if k != "le"))
        le = float("inf") if lab["le"] == "+Inf" else float(lab["le"])
        series.setdefault(key, []).append((le, v))
    total_inf = 0.0
    for key, points in series.items():
        points.sort()
        assert points[-1][0] == float("inf"), f"series {key} has no le=\"+Inf\" bucket"
        counts = [v for _, v in points]
        assert counts == sorted(counts), f"buckets of {key} are not cumulative: {points}"
        total_inf += points[-1][1]
    assert total_inf >= 2


def test_users_by_id_is_counted_under_its_path_template(client, metrics, tenant, admin_token):
    assert client.get(f"/api/v1/users/{tenant.admin_id}", token=admin_token).status == 200
    samples = crm.eventually(
        lambda: (s := scrape(metrics)) and has(s, "carecrm_http_requests_total",
                                               route="/api/v1/users/{id}", status=200) and s, 2.0)
    assert samples, "no carecrm_http_requests_total for route /api/v1/users/{id} status 200"
    routes = {lab.get("route") for n, lab, _ in samples if n == "carecrm_http_requests_total"}
    assert f"/api/v1/users/{tenant.admin_id}" not in routes, "route label must be the template"


def test_actor_metrics_are_exported_for_users(client, metrics, admin_token):
    before = value(scrape(metrics), "carecrm_actor_messages_total", actor="users")
    assert client.get("/api/v1/users", token=admin_token).status == 200
    crm.create_user(client, admin_token, "viewer")
    assert crm.eventually(
        lambda: value(scrape(metrics), "carecrm_actor_messages_total", actor="users") >= before + 2,
        2.0), "the users actor did not count the list and create messages"
    samples = scrape(metrics)
    assert has(samples, "carecrm_actor_mailbox_depth", actor="users")
    assert value(samples, "carecrm_actor_mailbox_depth", actor="users") >= 0
    assert has(samples, "carecrm_actor_processing_seconds_total", actor="users")
    assert value(samples, "carecrm_actor_processing_seconds_total", actor="users") > 0


def test_actors_lists_the_live_tenant_with_its_users_child(client, metrics, tenant, admin_token):
    assert client.get("/api/v1/users", token=admin_token).status == 200
    tenants = live_tenants(metrics)
    assert tenant.tenant_id in tenants, f"tenant {tenant.tenant_id} not live: {tenants}"
    children = tenants[tenant.tenant_id]["children"]
    assert isinstance(children, list)
    users = [c for c in children if c.get("name") == "users"]
    assert len(users) == 1, children
    assert isinstance(users[0]["mailbox"], int) and users[0]["mailbox"] >= 0, users


def test_idle_tenant_is_passivated_and_restored_from_postgres(client, metrics, cli_env):
    tenant = crm.create_tenant(cli_env)
    token = crm.login(client, tenant.admin_email, tenant.admin_password)["access_token"]
    created, _, _ = crm.create_user(client, token, "agent")
    listing = crm.assert_json_response(client.get("/api/v1/users", token=token), 200)
    assert tenant.tenant_id in live_tenants(metrics)
    gone = crm.eventually(lambda: tenant.tenant_id not in live_tenants(metrics),
                          TENANT_IDLE_TIMEOUT + 15, 0.25)
    assert gone, f"tenant still live {TENANT_IDLE_TIMEOUT + 15} s after its last request"
    again = crm.assert_json_response(client.get("/api/v1/users", token=token), 200)
    assert again == listing, "state after passivation differs from before"
    assert created in again["items"]
    assert tenant.tenant_id in live_tenants(metrics)


# ---- the operations listener is guarded (issue 14 item 8) -----------------------------------


def test_actor_routes_need_the_operator_token(server, sess):
    crm.create_contact(server.client(), sess.admin)  # a live tenant with a contacts actor
    tid = sess.tenant.tenant_id
    for client in (server.metrics_client(token=""), server.metrics_client(token="wrong-token")):
        crm.assert_error(client.get("/actors"), 401, "INVALID_CREDENTIALS")
        crm.assert_error(client.post(f"/actors/{tid}/contacts/fail"), 401, "INVALID_CREDENTIALS")
        for path in ("/healthz", "/readyz"):  # everything but /metrics (contract §9)
            crm.assert_error(client.get(path), 401, "INVALID_CREDENTIALS")
    assert tid in live_tenants(server.metrics_client())  # the right token
    assert server.metrics_client().get("/healthz").status == 200
    # /metrics stays open to scrapers unless configured otherwise.
    assert server.metrics_client(token="").get("/metrics").status == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:9464", "rebind.127.0.0.1.nip.io",
                                  "999.1.2.3", "[evil.example]", "1.2.3.4.example"])
def test_the_operations_listener_refuses_a_dns_rebinding_host(server, host):
    metrics = server.metrics_client()
    for path in ("/actors", "/metrics"):
        resp = metrics.get(path, headers={"Host": host})
        crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
    for ok in (f"127.0.0.1:{server.metrics_port}", "localhost", f"[::1]:{server.metrics_port}"):
        assert metrics.get("/actors", headers={"Host": ok}).status == 200, ok


@contextlib.contextmanager
def another_server(database, redis_url, overrides):
    srv = crm.start_server(database.url, redis_url, overrides, label="carecrm[ops-guard]")
    try:
        yield srv
    finally:
        srv.stop(check=True)
        srv.cleanup()


def test_without_a_configured_token_actor_routes_are_refused_never_open(redis_url, database,
                                                                         migrated):
    with another_server(database, redis_url, {"CARECRM_METRICS_TOKEN": None}) as srv:
        for token in ("", "anything"):
            metrics = srv.metrics_client(token=token)
            crm.assert_error(metrics.get("/actors"), 403, "INSUFFICIENT_PERMISSIONS")
            crm.assert_error(metrics.post("/actors/1/contacts/fail"), 403,
                             "INSUFFICIENT_PERMISSIONS")
        assert srv.metrics_client(token="").get("/metrics").status == 200


def test_metrics_can_require_the_token_and_allow_named_hosts(redis_url, database, migrated):
    overrides = {"CARECRM_METRICS_REQUIRE_TOKEN": "true",
                 "CARECRM_METRICS_HOSTS": "metrics.internal, ops.example"}
    with another_server(database, redis_url, overrides) as srv:
        crm.assert_error(srv.metrics_client(token="").get("/metrics"), 401, "INVALID_CREDENTIALS")
        metrics = srv.metrics_client()
        assert metrics.get("/metrics").status == 200
        assert metrics.get("/metrics", headers={"Host": "OPS.example:80"}).status == 200
        crm.assert_error(metrics.get("/metrics", headers={"Host": "other.example"}), 403,
                         "INSUFFICIENT_PERMISSIONS")


def test_promtool_finds_nothing_wrong_with_the_metrics(client, metrics, admin_token):
    """Prometheus's own linter (Debian's prometheus package) on a scrape taken after traffic, so
    histograms, labels and actor families are all present."""
    crm.assert_json_response(client.get(ME_ROUTE, token=admin_token), 200)
    client.get("/api/v1/no/such/route")
    body = metrics.get("/metrics").body.decode()
    assert "carecrm_actor_messages_total{" in body, body
    r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True,
                       text=True, timeout=60)
    assert (r.returncode, r.stdout + r.stderr) == (0, ""), r.stdout + r.stderr


def test_the_grafana_dashboard_uses_only_metrics_that_are_exposed(client, metrics, admin_token):
    """deploy/grafana/carecrm.json: every metric name its queries use is one /metrics exposes
    (with a histogram's or a summary's _bucket, _sum and _count), and every family exposed is
    on the dashboard."""
    crm.assert_json_response(client.get(ME_ROUTE, token=admin_token), 200)
    body = metrics.get("/metrics").body.decode()
    families = dict(re.findall(r"^# TYPE (\S+) (\S+)$", body, re.M))
    names = set(families)
    for name, kind in families.items():
        if kind in ("histogram", "summary"):
            names |= {name + "_sum", name + "_count"} | ({name + "_bucket"}
                                                         if kind == "histogram" else set())
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "carecrm.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 20, exprs
    used = {m for e in exprs for m in re.findall(r"\bcarecrm_[a-z0-9_]+", e)}
    # A node of a cluster adds carecrm_cluster_* (test_cluster checks those); this one is alone.
    alone = {m for m in used if not m.startswith("carecrm_cluster_")}
    assert used and alone <= names, sorted(alone - names)
    covered = {re.sub(r"_(bucket|sum|count)$", "", m) if m not in families else m for m in used}
    assert set(families) <= covered, sorted(set(families) - covered)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), ids
