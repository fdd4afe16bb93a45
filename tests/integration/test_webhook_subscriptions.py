"""Outbound webhook subscriptions (contract §7, docs/automation.md "Outbound webhook
subscriptions", "Outbound requests (SSRF)"): the admin-only CRUD with a write-only secret (a
generated whsec_ secret is shown once), validation, tenant isolation; deliveries to a local
receiver with Standard Webhooks headers verified independently, the event filter, retries with
the same webhook-id and an attempt log, failure after the retry window, 410 disabling the
subscription, timeouts, redirects, redelivery, and refusal of private destinations on a server
that does not allow them.

The retry schedule is shortened through SERVER_ENV (base 0.2 s, max 1 s, window 4 s) and the
outbound response timeout is 1 s. Tests that create contacts use a tenant of their own: every
subscription of a tenant sees every event of the tenant. Tenant A (`sess`) holds only
subscriptions, never a contact."""
import base64
import collections
import secrets
import time

import pytest

import crm

RETRY_WINDOW = 4.0
SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true",
              "CARECRM_WEBHOOK_RETRY_BASE": "0.2",
              "CARECRM_WEBHOOK_RETRY_MAX": "1",
              "CARECRM_WEBHOOK_RETRY_WINDOW": str(int(RETRY_WINDOW)),
              "CARECRM_OUTBOUND_TIMEOUT": "1"}

SUBSCRIPTIONS = crm.SUBSCRIPTIONS
NOWHERE_ID = crm.NOWHERE_ID
MISSING = crm.MISSING
UPDATE_METHODS = ["PUT", "PATCH"]
SECRET = "sub-secret-" + secrets.token_hex(10)  # 31 characters
DELIVERY_TIMEOUT = 20.0
EXAMPLE_URL = "https://hooks.example.test/carecrm"


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


# ---- helpers --------------------------------------------------------------------------------


def url(subscription_id) -> str:
    return crm.subscription_url(subscription_id)


def total(client, token) -> int:
    return crm.list_total(client, token, SUBSCRIPTIONS)


def payload_contact_id(payload):
    if isinstance(payload, dict):
        if "contact_id" in payload:
            return payload["contact_id"]
        if isinstance(payload.get("contact"), dict):
            return payload["contact"].get("id")
    return None


def event_of(req) -> str | None:
    body = req.json
    return body.get("type") if isinstance(body, dict) else None


def contact_of(req):
    body = req.json
    return payload_contact_id(body.get("data")) if isinstance(body, dict) else None


def rejected_at(resp, *prefixes) -> None:
    items = crm.validation_items(resp)
    locs = [tuple(i["loc"]) for i in items]
    for loc in locs:
        assert any(loc[:len(p)] == tuple(p) for p in prefixes), \
            f"unexpected loc {loc} (want under {prefixes}): {resp.describe()}"
    for p in prefixes:
        assert any(loc[:len(p)] == tuple(p) for loc in locs), \
            f"nothing reported under {p}: {resp.describe()}"


def only_delivery(client, token, subscription_id, check) -> dict:
    items = crm.wait_deliveries(client, token, subscription_id,
                                lambda ds: len(ds) == 1 and check(ds[0]), DELIVERY_TIMEOUT)
    return items[0]


def subscribe(client, token, receiver, events=("*",), secret=SECRET, **extra) -> dict:
    return crm.create_subscription(client, token, url=receiver.url(), events=list(events),
                                   secret=secret, **extra)


# ---- create and read ------------------------------------------------------------------------


def test_create_with_a_secret_is_201_and_never_returns_it(client, admin):
    body = {"url": EXAMPLE_URL, "events": ["contact.created", "contact.updated"],
            "description": "CRM sync", "secret": SECRET}
    resp = client.post(SUBSCRIPTIONS, body, token=admin)
    created = crm.assert_json_response(resp, 201)
    crm.assert_subscription(created, url=EXAMPLE_URL, events=body["events"],
                            description="CRM sync", is_active=True, has_secret=True,
                            disabled_reason=None)
    assert resp.header("Location") == url(created["id"]), resp.describe()
    assert SECRET.encode() not in resp.body
    assert crm.get_subscription(client, admin, created["id"]) == created
    assert SECRET.encode() not in client.get(url(created["id"]), token=admin).body


def test_generated_secret_is_whsec_and_returned_only_in_the_201_body(client, admin):
    first = crm.create_subscription(client, admin, url=EXAMPLE_URL, events=["*"])
    second = crm.create_subscription(client, admin, url=EXAMPLE_URL, events=["*"])
    for sub in (first, second):
        secret = sub["secret"]
        assert isinstance(secret, str) and secret.startswith("whsec_"), sub
        key = base64.b64decode(secret[len("whsec_"):], validate=True)
        assert len(key) >= 16, f"a generated key of {len(key)} bytes"
        assert sub["has_secret"] is True and sub["description"] is None, sub
        got = crm.get_subscription(client, admin, sub["id"])
        assert "secret" not in got and got == {k: v for k, v in sub.items() if k != "secret"}
        listing = client.get(crm.with_query(SUBSCRIPTIONS, {"per_page": 100}), token=admin)
        assert secret.encode() not in listing.body
    assert first["secret"] != second["secret"]


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_changes_only_the_fields_sent(client, admin, method):
    sub = crm.create_subscription(client, admin, url=EXAMPLE_URL, events=["contact.created"],
                                  description="first", secret=SECRET)
    body = crm.assert_json_response(client.request(method, url(sub["id"]),
                                                   {"description": "second"}, token=admin), 200)
    crm.assert_subscription(body)
    assert body == dict(sub, description="second", updated_at=body["updated_at"])
    body = crm.assert_json_response(client.request(method, url(sub["id"]), {
        "events": ["contact.deleted", "contact.tag_added"], "url": EXAMPLE_URL + "/v2",
        "is_active": False, "secret": "rotated-" + secrets.token_hex(8)}, token=admin), 200)
    crm.assert_subscription(body, events=["contact.deleted", "contact.tag_added"],
                            url=EXAMPLE_URL + "/v2", is_active=False, description="second",
                            has_secret=True)
    assert crm.get_subscription(client, admin, sub["id"]) == body


def test_delete_is_204_and_then_404(client, admin):
    sub = crm.create_subscription(client, admin, url=EXAMPLE_URL, events=["*"], secret=SECRET)
    crm.assert_no_content(client.delete(url(sub["id"]), token=admin))
    for method, path, body in [("GET", url(sub["id"]), None),
                               ("PATCH", url(sub["id"]), {"description": "x"}),
                               ("DELETE", url(sub["id"]), None),
                               ("GET", crm.deliveries_url(sub["id"]), None),
                               ("POST", crm.redeliver_url(sub["id"], 1), None)]:
        crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")


def test_list_pages_newest_first(client, fresh):
    t = fresh.admin
    subs = [crm.create_subscription(client, t, url=f"{EXAMPLE_URL}/{i}", events=["*"],
                                    secret=SECRET) for i in range(3)]
    body = crm.list_page(client, t, SUBSCRIPTIONS, {"per_page": 2})
    crm.assert_page(body, total=3, page=1, per_page=2)
    assert [s["id"] for s in body["items"]] == [subs[2]["id"], subs[1]["id"]]
    for item in body["items"]:
        crm.assert_subscription(item)
    body = crm.list_page(client, t, SUBSCRIPTIONS, {"per_page": 2, "page": 2})
    assert [s["id"] for s in body["items"]] == [subs[0]["id"]]


# ---- validation -----------------------------------------------------------------------------


def sub_body(override: dict) -> dict:
    return crm.with_override({"url": EXAMPLE_URL, "events": ["contact.created"],
                              "secret": SECRET}, override)


INVALID_CREATE = [
    ("url missing", {"url": MISSING}, [(("body", "url"), "missing")]),
    ("url ftp", {"url": "ftp://example.com/hook"}, ("body", "url")),
    ("url without scheme", {"url": "example.com/hook"}, ("body", "url")),
    ("url without host", {"url": "http://"}, ("body", "url")),
    ("url javascript", {"url": "javascript:alert(1)"}, ("body", "url")),
    ("url empty", {"url": ""}, ("body", "url")),
    ("url 2049", {"url": "https://example.com/" + "a" * 2029}, ("body", "url")),
    ("url int", {"url": 5}, ("body", "url")),
    ("events missing", {"events": MISSING}, [(("body", "events"), "missing")]),
    ("events empty", {"events": []}, ("body", "events")),
    ("events string", {"events": "contact.created"}, ("body", "events")),
    ("event unknown", {"events": ["contact.exploded"]}, ("body", "events")),
    ("event of a trigger that is not a record event", {"events": ["webhook"]}, ("body", "events")),
    ("event capitalised", {"events": ["Contact.Created"]}, ("body", "events")),
    ("event int", {"events": [1]}, ("body", "events")),
    ("secret 15", {"secret": "s" * 15}, [(("body", "secret"), "string_too_short")]),
    ("secret 257", {"secret": "s" * 257}, [(("body", "secret"), "string_too_long")]),
    ("description 501", {"description": "d" * 501},
     [(("body", "description"), "string_too_long")]),
    ("is_active string", {"is_active": "perhaps"}, ("body", "is_active")),
    ("id", {"id": 1}, [(("body", "id"), "extra_forbidden")]),
    ("has_secret", {"has_secret": False}, [(("body", "has_secret"), "extra_forbidden")]),
    ("disabled_reason", {"disabled_reason": "x"},
     [(("body", "disabled_reason"), "extra_forbidden")]),
    ("unknown", {"format": "xml"}, [(("body", "format"), "extra_forbidden")]),
    ("every failure at once", {"url": MISSING, "events": MISSING, "secret": "short",
                               "colour": 1},
     [(("body", "url"), "missing"), (("body", "events"), "missing"),
      (("body", "secret"), "string_too_short"), (("body", "colour"), "extra_forbidden")]),
]


def check_rejection(resp, expected) -> None:
    if isinstance(expected, list):
        crm.assert_validation(resp, *expected)
    else:
        rejected_at(resp, expected)


@pytest.mark.parametrize("override,expected", [c[1:] for c in INVALID_CREATE],
                         ids=[c[0] for c in INVALID_CREATE])
def test_invalid_create_is_422_and_stores_nothing(client, admin, override, expected):
    before = total(client, admin)
    check_rejection(client.post(SUBSCRIPTIONS, sub_body(override), token=admin), expected)
    assert total(client, admin) == before, "a rejected subscription was stored"


@pytest.mark.parametrize("override", [
    {"url": "http://example.com"}, {"url": "https://example.com:8443/a/b?c=d"},
    {"url": "https://example.com/" + "a" * 2028}, {"events": ["*"]},
    {"events": list(crm.RECORD_EVENTS)}, {"secret": "s" * 16}, {"secret": "s" * 256},
    {"description": "d" * 500}, {"description": None}, {"is_active": False}])
def test_valid_edges_are_accepted(client, admin, override):
    body = sub_body(override)
    sub = crm.create_subscription(client, admin, **body)
    for key in ("url", "events", "description", "is_active"):
        if key in override:
            assert sub[key] == override[key], (key, sub)


@pytest.fixture(scope="module")
def target(client, admin) -> dict:
    return crm.create_subscription(client, admin, url=EXAMPLE_URL, events=["contact.created"],
                                   secret=SECRET, description="target")


@pytest.mark.parametrize("method", UPDATE_METHODS)
@pytest.mark.parametrize("body,expected", [
    ({"url": "ftp://x"}, ("body", "url")),
    ({"events": []}, ("body", "events")),
    ({"events": ["nope"]}, ("body", "events")),
    ({"secret": "short"}, [(("body", "secret"), "string_too_short")]),
    ({"id": 1}, [(("body", "id"), "extra_forbidden")]),
    ({"description": "would change", "url": "gopher://x"}, ("body", "url")),
])
def test_invalid_update_is_422_and_changes_nothing(client, admin, target, method, body,
                                                   expected):
    check_rejection(client.request(method, url(target["id"]), body, token=admin), expected)
    assert crm.get_subscription(client, admin, target["id"]) == target


@pytest.mark.parametrize("raw", ['{"url": ', "url=x"])
def test_malformed_json_is_422(client, admin, raw):
    before = total(client, admin)
    crm.assert_validation(client.post(SUBSCRIPTIONS, raw=raw, token=admin),
                          (("body",), "json_invalid"))
    assert total(client, admin) == before


# ---- roles and tenants ----------------------------------------------------------------------


def routes(subscription_id) -> dict:
    return {
        "list": ("GET", SUBSCRIPTIONS, None),
        "create": ("POST", SUBSCRIPTIONS, sub_body({})),
        "get": ("GET", url(subscription_id), None),
        "put": ("PUT", url(subscription_id), {"description": "hijacked"}),
        "patch": ("PATCH", url(subscription_id), {"is_active": False}),
        "delete": ("DELETE", url(subscription_id), None),
        "deliveries": ("GET", crm.deliveries_url(subscription_id), None),
        "redeliver": ("POST", crm.redeliver_url(subscription_id, 1), None),
    }


ROUTES = list(routes(1))
ITEM_ROUTES = [r for r in ROUTES if r not in ("list", "create")]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("role", ["viewer", "agent", "manager"])
def test_only_admins_manage_subscriptions(client, sess, target, role, route):
    before = total(client, sess.admin)
    method, path, body = routes(target["id"])[route]
    crm.assert_error(client.request(method, path, body, token=sess.tokens[role]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_subscription(client, sess.admin, target["id"]) == target
    assert total(client, sess.admin) == before


@pytest.mark.parametrize("route", ROUTES)
def test_routes_without_token_are_401(client, admin, target, route):
    method, path, body = routes(target["id"])[route]
    crm.assert_error(client.request(method, path, body), 401, "INVALID_CREDENTIALS")
    assert crm.get_subscription(client, admin, target["id"]) == target


@pytest.fixture(scope="module")
def sub_b(client, sess_b) -> dict:
    return crm.create_subscription(client, sess_b.admin, url=EXAMPLE_URL, events=["*"],
                                   secret=SECRET)


@pytest.mark.parametrize("route", ITEM_ROUTES)
def test_another_tenants_subscription_is_403_and_unchanged(client, admin, sess_b, sub_b, route):
    method, path, body = routes(sub_b["id"])[route]
    crm.assert_error(client.request(method, path, body, token=admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_subscription(client, sess_b.admin, sub_b["id"]) == sub_b
    ids = {s["id"] for s in crm.list_all(client, admin, SUBSCRIPTIONS)}
    assert sub_b["id"] not in ids


@pytest.mark.parametrize("route", ITEM_ROUTES)
def test_subscription_of_no_tenant_is_404(client, admin, route):
    method, path, body = routes(NOWHERE_ID)[route]
    crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")


# ---- deliveries -----------------------------------------------------------------------------


def test_delivery_follows_standard_webhooks(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as rcv:
        sub = subscribe(client, t, rcv, events=["contact.created"])
        c = crm.create_contact(client, t, first_name="Signed", email=crm.unique_email("s"))
        req = rcv.wait_for(1, DELIVERY_TIMEOUT)[0]
        delivery = only_delivery(client, t, sub["id"], lambda d: d["status"] == "succeeded")
        time.sleep(0.5)
        assert len(rcv.requests) == 1, rcv.requests
    assert req.method == "POST" and req.path == "/hook", req.describe()
    assert (req.header("Content-Type") or "").startswith("application/json"), req.describe()
    msg_id = req.header("webhook-id")
    assert msg_id and msg_id.startswith("msg_"), req.describe()
    stamp = req.header("webhook-timestamp")
    assert stamp and stamp.isdigit() and abs(int(stamp) - time.time()) < 60, req.describe()
    assert (req.header("webhook-signature") or "").startswith("v1,"), req.describe()
    assert crm.verify_standard_webhook(SECRET, req.headers, req.body, tolerance=60), \
        f"signature does not verify: {req.describe()}"
    assert not crm.verify_standard_webhook(SECRET, req.headers, req.body + b" ")
    assert not crm.verify_standard_webhook(SECRET[:-1] + "#", req.headers, req.body)
    body = req.json
    assert isinstance(body, dict) and set(body) == {"type", "timestamp", "data"}, req.describe()
    assert body["type"] == "contact.created", body
    crm.assert_timestamp(body["timestamp"])
    assert payload_contact_id(body["data"]) == c["id"], body
    assert body["data"]["contact"]["email"] == c["email"], body

    crm.assert_delivery(delivery, subscription_id=sub["id"], event="contact.created",
                        webhook_id=msg_id, status="succeeded", attempts=1,
                        last_status_code=200)
    assert delivery["attempt_log"][0]["status_code"] == 200, delivery
    assert delivery["attempt_log"][0]["error"] is None, delivery
    assert delivery["payload"] in (body["data"], body), delivery


def test_generated_whsec_secret_signs_the_deliveries(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as rcv:
        sub = crm.create_subscription(client, t, url=rcv.url(), events=["contact.created"])
        crm.create_contact(client, t, first_name="Whsec")
        req = rcv.wait_for(1, DELIVERY_TIMEOUT)[0]
    assert crm.verify_standard_webhook(sub["secret"], req.headers, req.body), req.describe()
    # The key is the base64-decoded part after whsec_, not the text of the secret.
    raw_key = sub["secret"][len("whsec_"):]
    assert not crm.verify_standard_webhook(raw_key, req.headers, req.body)


def test_rotated_secret_signs_later_deliveries(client, fresh):
    t = fresh.admin
    new_secret = "rotated-" + secrets.token_hex(12)
    with crm.Receiver([200]) as rcv:
        sub = subscribe(client, t, rcv, events=["contact.created"])
        crm.create_contact(client, t, first_name="Old")
        old = rcv.wait_for(1, DELIVERY_TIMEOUT)[0]
        crm.assert_json_response(client.patch(url(sub["id"]), {"secret": new_secret}, token=t),
                                 200)
        crm.create_contact(client, t, first_name="New")
        new = rcv.wait_for(2, DELIVERY_TIMEOUT)[1]
    assert crm.verify_standard_webhook(SECRET, old.headers, old.body)
    assert crm.verify_standard_webhook(new_secret, new.headers, new.body), new.describe()
    assert not crm.verify_standard_webhook(SECRET, new.headers, new.body)


def test_event_filter(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as deleted_rcv, crm.Receiver([200]) as created_rcv:
        subscribe(client, t, deleted_rcv, events=["contact.deleted"])
        subscribe(client, t, created_rcv, events=["contact.created"])
        c = crm.create_contact(client, t, first_name="Filtered")
        assert contact_of(created_rcv.wait_for(1, DELIVERY_TIMEOUT)[0]) == c["id"]
        crm.assert_no_content(client.delete(crm.contact_url(c["id"]), token=t))
        got = deleted_rcv.wait_for(1, DELIVERY_TIMEOUT)
        time.sleep(1.0)
        # Events are taken in order: the creation was dispatched before the deletion.
        assert [event_of(r) for r in deleted_rcv.requests] == ["contact.deleted"], got
        assert contact_of(got[0]) == c["id"]
        assert [event_of(r) for r in created_rcv.requests] == ["contact.created"]


def test_star_receives_every_event(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as rcv:
        subscribe(client, t, rcv, events=["*"])
        c = crm.create_contact(client, t, first_name="Star")
        cid = c["id"]
        crm.assert_json_response(client.patch(crm.contact_url(cid), {"last_name": "Wars"},
                                              token=t), 200)
        crm.assert_json_response(client.post(crm.contact_url(cid) + "/tags", {"tags": ["vip"]},
                                             token=t), 200)
        crm.assert_json_response(client.patch(crm.contact_url(cid), {"status": "qualified"},
                                              token=t), 200)
        crm.assert_no_content(client.delete(crm.contact_url(cid), token=t))
        wanted = {"contact.created", "contact.updated", "contact.tag_added",
                  "contact.status_changed", "contact.deleted"}

        def arrived():
            return wanted <= {event_of(r) for r in rcv.requests}

        assert crm.eventually(arrived, DELIVERY_TIMEOUT, 0.1), \
            [event_of(r) for r in rcv.requests]
        time.sleep(1.0)
        reqs = rcv.requests
    counts = collections.Counter(event_of(r) for r in reqs)
    for once in ("contact.created", "contact.tag_added", "contact.status_changed",
                 "contact.deleted"):
        assert counts[once] == 1, counts
    assert counts["contact.updated"] >= 1, counts
    assert all(contact_of(r) == cid for r in reqs), [r.describe() for r in reqs]
    ids = [r.header("webhook-id") for r in reqs]
    assert len(set(ids)) == len(ids), f"a webhook-id repeated without a retry: {ids}"
    assert all(crm.verify_standard_webhook(SECRET, r.headers, r.body) for r in reqs)


def test_each_subscription_gets_its_own_delivery(client, fresh):
    t = fresh.admin
    other_secret = "other-" + secrets.token_hex(12)
    with crm.Receiver([200]) as one, crm.Receiver([200]) as two:
        subscribe(client, t, one, events=["contact.created"])
        subscribe(client, t, two, events=["contact.created"], secret=other_secret)
        crm.create_contact(client, t, first_name="Twice")
        a, b = one.wait_for(1, DELIVERY_TIMEOUT)[0], two.wait_for(1, DELIVERY_TIMEOUT)[0]
    assert a.header("webhook-id") != b.header("webhook-id")
    assert crm.verify_standard_webhook(SECRET, a.headers, a.body)
    assert crm.verify_standard_webhook(other_secret, b.headers, b.body)
    assert not crm.verify_standard_webhook(SECRET, b.headers, b.body)


def test_inactive_subscription_receives_nothing(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as quiet, crm.Receiver([200]) as anchor:
        sub = subscribe(client, t, quiet, events=["*"], is_active=False)
        subscribe(client, t, anchor, events=["contact.created"])
        crm.create_contact(client, t, first_name="Unheard")
        anchor.wait_for(1, DELIVERY_TIMEOUT)
        time.sleep(1.5)
        assert quiet.requests == []
        assert crm.list_deliveries(client, t, sub["id"]) == []


def test_retries_keep_the_webhook_id_and_log_every_attempt(client, fresh):
    t = fresh.admin
    with crm.Receiver([500, 500, 200]) as rcv:
        sub = subscribe(client, t, rcv, events=["contact.created"])
        crm.create_contact(client, t, first_name="Retry")
        reqs = rcv.wait_for(3, DELIVERY_TIMEOUT)
        delivery = only_delivery(client, t, sub["id"], lambda d: d["status"] == "succeeded")
        time.sleep(1.0)
        assert len(rcv.requests) == 3, rcv.requests
    ids = {r.header("webhook-id") for r in reqs}
    assert len(ids) == 1, f"every attempt carries the same webhook-id: {ids}"
    assert all(crm.verify_standard_webhook(SECRET, r.headers, r.body) for r in reqs)
    assert len({r.body for r in reqs}) == 1, "the body changed between attempts"
    gaps = [reqs[1].at - reqs[0].at, reqs[2].at - reqs[1].at]
    assert gaps[0] >= 0.15 and gaps[1] >= 0.3, f"retries too early (base 0.2 s): {gaps}"
    crm.assert_delivery(delivery, status="succeeded", attempts=3, last_status_code=200,
                        webhook_id=ids.pop())
    assert [a["status_code"] for a in delivery["attempt_log"]] == [500, 500, 200], delivery
    assert [a["attempt"] for a in delivery["attempt_log"]] == [1, 2, 3], delivery
    ats = [a["at"] for a in delivery["attempt_log"]]
    assert ats == sorted(ats), delivery


def test_delivery_that_keeps_failing_fails_after_the_retry_window(client, fresh):
    t = fresh.admin
    with crm.Receiver([500]) as rcv:
        sub = subscribe(client, t, rcv, events=["contact.created"])
        crm.create_contact(client, t, first_name="Doomed")
        delivery = only_delivery(client, t, sub["id"], lambda d: d["status"] == "failed")
        count = len(rcv.requests)
        time.sleep(2.0)
        assert len(rcv.requests) == count, "attempts went on after the delivery failed"
        reqs = rcv.requests
    crm.assert_delivery(delivery, status="failed", last_status_code=500, delivered_at=None)
    assert delivery["attempts"] == len(reqs) >= 4, (delivery, len(reqs))
    assert all(a["status_code"] == 500 for a in delivery["attempt_log"]), delivery
    assert reqs[-1].at - reqs[0].at >= RETRY_WINDOW - 0.5, \
        f"gave up {reqs[-1].at - reqs[0].at:.2f} s after the first attempt"
    assert len({r.header("webhook-id") for r in reqs}) == 1
    # The subscription itself stays active: only a 410 disables it.
    assert crm.get_subscription(client, t, sub["id"])["is_active"] is True


def test_410_disables_the_subscription_and_reactivation_clears_the_reason(client, fresh):
    t = fresh.admin
    with crm.Receiver([410]) as rcv:
        sub = subscribe(client, t, rcv, events=["contact.created"])
        crm.create_contact(client, t, first_name="Gone1")
        crm.create_contact(client, t, first_name="Gone2")

        def disabled():
            return crm.get_subscription(client, t, sub["id"])["is_active"] is False

        assert crm.eventually(disabled, DELIVERY_TIMEOUT, 0.2), \
            crm.get_subscription(client, t, sub["id"])
        got = crm.get_subscription(client, t, sub["id"])
        assert isinstance(got["disabled_reason"], str) and got["disabled_reason"], got
        # Gone2's event reaches the dispatcher before or after the 410 switched the
        # subscription off: then it has a delivery (failed, never left pending) or none.
        items = crm.wait_deliveries(client, t, sub["id"],
                                    lambda ds: 1 <= len(ds) <= 2 and
                                    all(d["status"] == "failed" for d in ds))
        assert any(d["last_status_code"] == 410 for d in items), items
        count = len(rcv.requests)
        assert 1 <= count <= 2, rcv.requests
        crm.create_contact(client, t, first_name="Unheard")
        time.sleep(1.5)
        assert len(rcv.requests) == count, "an inactive subscription was delivered to"

        rcv.set_responses([200])
        body = crm.assert_json_response(client.patch(url(sub["id"]), {"is_active": True},
                                                     token=t), 200)
        assert body["is_active"] is True and body["disabled_reason"] is None, body
        c = crm.create_contact(client, t, first_name="Heard")
        got = rcv.wait_for(1, DELIVERY_TIMEOUT, where=lambda r: r.status == 200)
    assert contact_of(got[0]) == c["id"]


def test_hanging_receiver_times_out_and_is_retried(client, fresh):
    t = fresh.admin
    with crm.Receiver([crm.HANG, 200]) as rcv:
        sub = subscribe(client, t, rcv, events=["contact.created"])
        crm.create_contact(client, t, first_name="Slow")
        delivery = only_delivery(client, t, sub["id"], lambda d: d["status"] == "succeeded")
        reqs = rcv.requests
    assert len(reqs) == 2 and reqs[0].header("webhook-id") == reqs[1].header("webhook-id"), reqs
    first, second = delivery["attempt_log"][0], delivery["attempt_log"][1]
    assert first["status_code"] is None, delivery
    assert first["error"] and ("timed out" in first["error"].lower()
                               or "timeout" in first["error"].lower()), delivery
    assert first["duration_ms"] >= 900, delivery
    assert second["status_code"] == 200, delivery


def test_redirect_is_a_failed_attempt_and_is_not_followed(client, fresh):
    t = fresh.admin
    with crm.Receiver([(301, {"Location": "/elsewhere"}, b""), 200]) as rcv:
        sub = subscribe(client, t, rcv, events=["contact.created"])
        crm.create_contact(client, t, first_name="Moved")
        delivery = only_delivery(client, t, sub["id"], lambda d: d["status"] == "succeeded")
        reqs = rcv.requests
    assert [r.path for r in reqs] == ["/hook", "/hook"], reqs
    assert [a["status_code"] for a in delivery["attempt_log"]] == [301, 200], delivery


def test_refused_connection_is_a_failed_attempt(client, fresh):
    t = fresh.admin
    sub = crm.create_subscription(client, t, url=crm.closed_port_url(), events=["contact.created"],
                                  secret=SECRET)
    crm.create_contact(client, t, first_name="Nobody")
    delivery = only_delivery(client, t, sub["id"], lambda d: d["status"] == "failed")
    assert delivery["attempts"] >= 2, delivery
    assert all(a["status_code"] is None and a["error"] for a in delivery["attempt_log"]), delivery
    assert delivery["last_error"], delivery


def test_redeliver_sends_a_delivered_event_again_with_the_same_id(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as rcv:
        sub = subscribe(client, t, rcv, events=["contact.created"])
        crm.create_contact(client, t, first_name="Again")
        delivery = only_delivery(client, t, sub["id"], lambda d: d["status"] == "succeeded")
        resp = client.post(crm.redeliver_url(sub["id"], delivery["id"]), token=t)
        assert resp.status == 202, resp.describe()
        reqs = rcv.wait_for(2, DELIVERY_TIMEOUT)
        again = only_delivery(client, t, sub["id"],
                              lambda d: d["status"] == "succeeded" and d["attempts"] == 2)
    assert reqs[0].header("webhook-id") == reqs[1].header("webhook-id") == delivery["webhook_id"]
    assert reqs[0].body == reqs[1].body
    assert crm.verify_standard_webhook(SECRET, reqs[1].headers, reqs[1].body)
    assert again["id"] == delivery["id"], again


def test_redeliver_of_a_failed_delivery_starts_a_fresh_window(client, fresh):
    t = fresh.admin
    with crm.Receiver([500]) as rcv:
        sub = subscribe(client, t, rcv, events=["contact.created"])
        crm.create_contact(client, t, first_name="Revived")
        failed = only_delivery(client, t, sub["id"], lambda d: d["status"] == "failed")
        rcv.set_responses([500, 200])
        resp = client.post(crm.redeliver_url(sub["id"], failed["id"]), token=t)
        assert resp.status == 202, resp.describe()
        done = only_delivery(client, t, sub["id"], lambda d: d["status"] == "succeeded")
    assert done["attempts"] == failed["attempts"] + 2, (failed, done)
    assert [a["status_code"] for a in done["attempt_log"][-2:]] == [500, 200], done


def test_redeliver_on_an_inactive_subscription_is_409(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as rcv:
        sub = subscribe(client, t, rcv, events=["contact.created"])
        crm.create_contact(client, t, first_name="Paused")
        delivery = only_delivery(client, t, sub["id"], lambda d: d["status"] == "succeeded")
        crm.assert_json_response(client.patch(url(sub["id"]), {"is_active": False}, token=t), 200)
        crm.assert_error(client.post(crm.redeliver_url(sub["id"], delivery["id"]), token=t), 409,
                         "CONFLICT")
        time.sleep(1.5)
        assert len(rcv.requests) == 1
    crm.assert_error(client.post(crm.redeliver_url(sub["id"], NOWHERE_ID), token=t), 404,
                     "NOT_FOUND")


def test_deliveries_page_newest_first_and_filter_by_status(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as rcv:
        sub = subscribe(client, t, rcv, events=["contact.created"])
        for i in range(3):
            crm.create_contact(client, t, first_name=f"Paged{i}")
        items = crm.wait_deliveries(client, t, sub["id"],
                                    lambda ds: len(ds) == 3 and
                                    all(d["status"] == "succeeded" for d in ds))
    ids = [d["id"] for d in items]
    assert ids == sorted(ids, reverse=True), ids
    body = crm.list_page(client, t, crm.deliveries_url(sub["id"]), {"per_page": 2})
    crm.assert_page(body, total=3, per_page=2)
    assert [d["id"] for d in body["items"]] == ids[:2]
    assert crm.list_page(client, t, crm.deliveries_url(sub["id"]),
                         {"per_page": 2, "page": 2})["items"][0]["id"] == ids[2]
    assert len(crm.list_deliveries(client, t, sub["id"], {"status": "succeeded"})) == 3
    assert crm.list_deliveries(client, t, sub["id"], {"status": "failed"}) == []
    assert crm.list_deliveries(client, t, sub["id"], {"status": "pending"}) == []
    crm.assert_validation_locs(client.get(crm.deliveries_url(sub["id"], {"status": "done"}),
                                          token=t), ("query", "status"))
    crm.assert_no_content(client.delete(url(sub["id"]), token=t))
    crm.assert_error(client.get(crm.deliveries_url(sub["id"]), token=t), 404, "NOT_FOUND")


# ---- private destinations -------------------------------------------------------------------


def test_private_destinations_are_refused_without_outbound_allow_private(pg_dsn, redis_url):
    """A server of its own (on a database of its own, so that this module's server, which allows
    private destinations, never sees its events) without CARECRM_OUTBOUND_ALLOW_PRIVATE."""
    db = crm.Database(pg_dsn)
    srv = None
    try:
        env = crm.server_env(db.url, redis_url)
        crm.migrate(env)
        overrides = {k: v for k, v in SERVER_ENV.items() if k != "CARECRM_OUTBOUND_ALLOW_PRIVATE"}
        srv = crm.start_server(db.url, redis_url, overrides, label="carecrm[no-private]")
        c = srv.client()
        s = crm.tenant_session(c, env)
        with crm.Receiver([200]) as rcv:
            by_ip = crm.create_subscription(c, s.admin, url=rcv.url("/ip"),
                                            events=["contact.created"], secret=SECRET)
            by_name = crm.create_subscription(c, s.admin,
                                              url=f"http://localhost:{rcv.port}/name",
                                              events=["contact.created"], secret=SECRET)
            wf = crm.create_workflow(c, s.admin, trigger_type="manual", actions=[
                {"type": "http_request", "params": {"url": rcv.url("/action")}}])
            crm.create_contact(c, s.admin, first_name="Private")
            for sub in (by_ip, by_name):
                d = only_delivery(c, s.admin, sub["id"], lambda d: d["status"] == "failed")
                assert d["attempt_log"], d
                for attempt in d["attempt_log"]:
                    assert attempt["status_code"] is None, d
                    assert "not allowed" in (attempt["error"] or "").lower(), d
            run = crm.wait_run(c, s.admin, crm.start_run(c, s.admin, wf["id"]))
            assert run["status"] == "failed" and "not allowed" in run["error"].lower(), run
            assert rcv.requests == [], "a refused destination was contacted"
        srv.stop(check=True)
    finally:
        if srv is not None:
            srv.kill()
            srv.cleanup()
        db.drop()
