"""Inbound workflow webhooks (spec "Webhook info", contract §7, docs/automation.md "Inbound
workflow webhooks"): GET /webhooks/info/{id} and POST /webhooks/{id} without a JWT: the order of
the checks (secret 401 first, an unknown id answered alike, then 409, body 422; 413 before all),
X-Webhook-Secret and X-Webhook-Signature, the secret every webhook workflow has (drawn and shown
once when none is given, issue 31), the run it queues (payload = body, conditions, chain depth),
and the "lab result" scenario that writes a contact's custom field from an external system.

Only webhook and manual workflows live in this file's tenants: no record-event workflow reacts
to the contacts created here."""
import json
import secrets
import time

import pytest

import crm

PUBLIC_URL = "https://crm.example.test"
SERVER_ENV = {"CARECRM_PUBLIC_URL": PUBLIC_URL}

NOWHERE_ID = crm.NOWHERE_ID
SECRET = "hook-secret-" + secrets.token_hex(10)  # 32 characters
BODY_LIMIT = 1024 * 1024
RUN_TIMEOUT = 20.0


def hook(workflow_id) -> str:
    return crm.webhook_trigger_url(workflow_id)


def info_url(workflow_id) -> str:
    return crm.webhook_info_url(workflow_id)


def trigger(client, workflow_id, body=None, raw=None, headers=None):
    """POST /webhooks/{id} without a JWT: a JSON `body`, or `raw` bytes as they are."""
    if raw is None and body is not None:
        raw = json.dumps(body).encode()
    return client.request("POST", hook(workflow_id), raw=raw, headers=headers)


def with_secret(wf, headers=None) -> dict:
    """`headers` and X-Webhook-Secret: the secret drawn for `wf`, shown in its create answer."""
    return {**(headers or {}), "X-Webhook-Secret": wf["webhook_secret"]}


def accepted(resp) -> int:
    body = crm.assert_json_response(resp, 202)
    assert isinstance(body, dict) and set(body) == {"run_id", "status"}, resp.describe()
    assert crm.is_int(body["run_id"]) and body["status"] == "queued", resp.describe()
    return body["run_id"]


def run_ids(client, token, workflow_id) -> list:
    return [r["id"] for r in crm.list_runs(client, token, workflow_id)]


@pytest.fixture(scope="module")
def open_hook(client, admin) -> dict:
    """An active webhook workflow created without a secret (the drawn one is its
    "webhook_secret") and without actions."""
    return crm.create_workflow(client, admin, name="Open hook", trigger_type="webhook")


@pytest.fixture(scope="module")
def secret_hook(client, admin) -> dict:
    return crm.create_workflow(client, admin, name="Guarded hook", trigger_type="webhook",
                               webhook_secret=SECRET)


# ---- info -----------------------------------------------------------------------------------


def test_info_of_a_webhook_workflow_has_exactly_the_six_keys(client, admin, secret_hook):
    body = crm.assert_json_response(client.get(info_url(secret_hook["id"]), token=admin), 200)
    assert body == {"has_secret": True, "workflow_id": secret_hook["id"],
                    "workflow_name": "Guarded hook", "trigger_type": "webhook",
                    "is_webhook_trigger": True,
                    "webhook_url": f"{PUBLIC_URL}/api/v1/webhooks/{secret_hook['id']}"}, body
    assert set(body) == crm.WEBHOOK_INFO_KEYS
    assert SECRET.encode() not in client.get(info_url(secret_hook["id"]), token=admin).body


def test_info_of_a_workflow_that_is_not_a_webhook(client, admin):
    wf = crm.create_workflow(client, admin, name="Manual one", trigger_type="manual")
    body = crm.assert_json_response(client.get(info_url(wf["id"]), token=admin), 200)
    assert body == {"has_secret": False, "workflow_id": wf["id"], "workflow_name": "Manual one",
                    "trigger_type": "manual", "is_webhook_trigger": False,
                    "webhook_url": None}, body


def test_info_follows_updates(client, admin):
    wf = crm.create_workflow(client, admin, name="Before", trigger_type="webhook")
    crm.assert_json_response(client.patch(crm.workflow_url(wf["id"]), {
        "name": "After", "webhook_secret": SECRET}, token=admin), 200)
    body = crm.assert_json_response(client.get(info_url(wf["id"]), token=admin), 200)
    assert (body["workflow_name"], body["has_secret"]) == ("After", True), body


@pytest.mark.parametrize("role,status", [("viewer", 403), ("agent", 403), ("manager", 200),
                                         ("admin", 200)])
def test_info_role_matrix(client, sess, open_hook, role, status):
    resp = client.get(info_url(open_hook["id"]), token=sess.tokens[role])
    if status == 403:
        crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
    else:
        assert crm.assert_json_response(resp, 200)["workflow_id"] == open_hook["id"]


def test_info_without_token_is_401(client, open_hook):
    crm.assert_error(client.get(info_url(open_hook["id"])), 401, "INVALID_CREDENTIALS")


@pytest.mark.parametrize("role", ["admin", "manager"])
def test_info_of_another_tenants_workflow_is_403(client, sess, sess_b, role):
    wf_b = crm.create_workflow(client, sess_b.admin, trigger_type="webhook",
                               webhook_secret=SECRET)
    crm.assert_error(client.get(info_url(wf_b["id"]), token=sess.tokens[role]), 403,
                     "INSUFFICIENT_PERMISSIONS")


def test_info_of_no_workflow_is_404(client, admin):
    crm.assert_error(client.get(info_url(NOWHERE_ID), token=admin), 404, "NOT_FOUND")


# ---- trigger with the drawn secret -----------------------------------------------------------


def test_trigger_is_202_queued_and_the_run_payload_is_the_body(client, admin, open_hook):
    body = {"patient": "P-17", "values": [1, 2.5, None], "nested": {"ok": True}, "text": "ü ß 中"}
    run_id = accepted(trigger(client, open_hook["id"], body, headers=with_secret(open_hook)))
    run = crm.wait_run(client, admin, run_id)
    crm.assert_run(run, id=run_id, workflow_id=open_hook["id"], status="succeeded",
                   trigger_type="webhook", depth=0, conditions_met=True, steps=[], error=None)
    assert run["trigger_payload"] == body, run


@pytest.mark.parametrize("raw", ["[1, 2, 3]", '"just text"', "42", "true", "null", '{"a": {}}'])
def test_any_json_value_is_a_payload(client, admin, open_hook, raw):
    run = crm.wait_run(client, admin, accepted(trigger(client, open_hook["id"], raw=raw.encode(),
                                                      headers=with_secret(open_hook))))
    assert run["status"] == "succeeded", run
    assert run["trigger_payload"] == json.loads(raw), run


def test_empty_body_is_the_empty_object(client, admin, open_hook):
    resp = client.request("POST", hook(open_hook["id"]),  # no body, no Content-Type
                          headers=with_secret(open_hook))
    run = crm.wait_run(client, admin, accepted(resp))
    assert run["trigger_payload"] == {}, run
    run = crm.wait_run(client, admin, accepted(trigger(client, open_hook["id"], raw=b"",
                                                       headers=with_secret(open_hook))))
    assert run["trigger_payload"] == {}, run


def test_a_bearer_token_is_not_needed_nor_harmful(client, admin, open_hook):
    run_id = accepted(client.request("POST", hook(open_hook["id"]), raw=b'{"x": 1}',
                                     headers=with_secret(open_hook, {
                                         "Authorization": "Bearer not-a-jwt"})))
    assert crm.wait_run(client, admin, run_id)["trigger_payload"] == {"x": 1}


@pytest.mark.parametrize("raw", [b'{"a": ', b"not json", b"{'a': 1}", b'{"a": 1} trailing',
                                 b"\xff\xfe{}"])
def test_invalid_json_is_422_json_invalid_and_queues_nothing(client, admin, open_hook, raw):
    before = run_ids(client, admin, open_hook["id"])
    resp = trigger(client, open_hook["id"], raw=raw, headers=with_secret(open_hook))
    crm.assert_validation(resp, (("body",), "json_invalid"))
    assert run_ids(client, admin, open_hook["id"]) == before


@pytest.mark.parametrize("raw,loc", [(b'{"a": "x\\u0000y"}', ("body", "a")),
                                     (b'{"list": [1, "\\u0000"]}', ("body", "list", 1))])
def test_nul_in_the_payload_is_422_and_queues_nothing(client, admin, open_hook, raw, loc):
    """PostgreSQL jsonb cannot hold U+0000: the payload is refused where it holds it."""
    before = run_ids(client, admin, open_hook["id"])
    resp = trigger(client, open_hook["id"], raw=raw, headers=with_secret(open_hook))
    crm.assert_validation(resp, (loc, "value_error"))
    assert run_ids(client, admin, open_hook["id"]) == before


def test_nul_in_a_manual_run_payload_is_422(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="manual")
    resp = client.post(crm.workflow_run_now_url(wf["id"]), {"note": "a\x00"}, token=admin)
    crm.assert_validation(resp, (("body", "note"), "value_error"))
    assert run_ids(client, admin, wf["id"]) == []


def test_body_over_the_limit_is_413(client, admin, open_hook):
    """The body limit is enforced before the handler: 413 with the secret and without it."""
    before = run_ids(client, admin, open_hook["id"])
    raw = b'{"p": "' + b"x" * BODY_LIMIT + b'"}'
    for headers in (with_secret(open_hook), None):
        crm.assert_error(trigger(client, open_hook["id"], raw=raw, headers=headers), 413,
                         "PAYLOAD_TOO_LARGE")
    assert run_ids(client, admin, open_hook["id"]) == before


def test_body_exactly_at_the_limit_is_accepted(client, admin, open_hook):
    head, tail = b'{"p": "', b'"}'
    raw = head + b"y" * (BODY_LIMIT - len(head) - len(tail)) + tail
    assert len(raw) == BODY_LIMIT
    run = crm.wait_run(client, admin, accepted(trigger(client, open_hook["id"], raw=raw,
                                                       headers=with_secret(open_hook))))
    assert run["trigger_payload"] == {"p": "y" * (BODY_LIMIT - len(head) - len(tail))}


def test_unknown_workflow_is_401_before_anything_else(client):
    crm.assert_error(trigger(client, NOWHERE_ID, {"a": 1}), 401, "INVALID_CREDENTIALS")
    crm.assert_error(trigger(client, NOWHERE_ID, raw=b"not json"), 401, "INVALID_CREDENTIALS")
    crm.assert_error(trigger(client, NOWHERE_ID, raw=b"{}", headers={"X-Webhook-Secret": SECRET}),
                     401, "INVALID_CREDENTIALS")


@pytest.mark.parametrize("trigger_type,extra", [("manual", {}), ("contact.created",
                                                                 {"is_active": False}),
                                                ("schedule", {"trigger_config": {
                                                    "cron": "0 0 1 1 *"}, "is_active": False})])
def test_workflow_that_is_not_a_webhook_is_409(client, admin, trigger_type, extra):
    wf = crm.create_workflow(client, admin, trigger_type=trigger_type, webhook_secret=SECRET,
                             **extra)
    good = {"X-Webhook-Secret": SECRET}
    crm.assert_error(trigger(client, wf["id"], {"a": 1}, headers=good), 409, "CONFLICT")
    crm.assert_error(trigger(client, wf["id"], raw=b"not json", headers=good), 409, "CONFLICT")
    assert crm.list_runs(client, admin, wf["id"]) == []


def test_inactive_webhook_workflow_is_409_and_active_again_202(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="webhook", is_active=False)
    crm.assert_error(trigger(client, wf["id"], {"a": 1}, headers=with_secret(wf)), 409,
                     "CONFLICT")
    crm.assert_error(trigger(client, wf["id"], raw=b"not json", headers=with_secret(wf)), 409,
                     "CONFLICT")
    assert crm.list_runs(client, admin, wf["id"]) == []
    crm.assert_json_response(client.patch(crm.workflow_url(wf["id"]), {"is_active": True},
                                          token=admin), 200)
    crm.wait_run(client, admin, accepted(trigger(client, wf["id"], {"a": 1},
                                                 headers=with_secret(wf))))


# ---- trigger with a secret ------------------------------------------------------------------

PAYLOAD = b'{"event": "lab.result", "value": 42}'


def wrong_same_length() -> str:
    other = "".join("a" if ch != "a" else "b" for ch in SECRET)
    assert len(other) == len(SECRET) and other != SECRET
    return other


SECRET_CASES = [
    ("no header", {}, 401),
    ("wrong secret of the same length", {"X-Webhook-Secret": wrong_same_length()}, 401),
    ("wrong shorter secret", {"X-Webhook-Secret": SECRET[:-1]}, 401),
    ("wrong longer secret", {"X-Webhook-Secret": SECRET + "x"}, 401),
    ("empty secret", {"X-Webhook-Secret": ""}, 401),
    ("right secret", {"X-Webhook-Secret": SECRET}, 202),
    ("right signature", {"X-Webhook-Signature": crm.inbound_webhook_signature(SECRET, PAYLOAD)},
     202),
    ("signature of another body", {"X-Webhook-Signature": crm.inbound_webhook_signature(
        SECRET, PAYLOAD + b" ")}, 401),
    ("signature with another secret", {"X-Webhook-Signature": crm.inbound_webhook_signature(
        wrong_same_length(), PAYLOAD)}, 401),
    ("signature without sha256=", {"X-Webhook-Signature": crm.inbound_webhook_signature(
        SECRET, PAYLOAD)[len("sha256="):]}, 401),
    ("signature truncated", {"X-Webhook-Signature": crm.inbound_webhook_signature(
        SECRET, PAYLOAD)[:-2]}, 401),
    ("the secret as the signature", {"X-Webhook-Signature": "sha256=" + SECRET}, 401),
    ("wrong secret but right signature", {
        "X-Webhook-Secret": wrong_same_length(),
        "X-Webhook-Signature": crm.inbound_webhook_signature(SECRET, PAYLOAD)}, 202),
]


@pytest.mark.parametrize("headers,status", [c[1:] for c in SECRET_CASES],
                         ids=[c[0] for c in SECRET_CASES])
def test_secret_checks(client, admin, secret_hook, headers, status):
    before = run_ids(client, admin, secret_hook["id"])
    resp = trigger(client, secret_hook["id"], raw=PAYLOAD, headers=headers)
    if status == 401:
        crm.assert_error(resp, 401, "INVALID_CREDENTIALS")
        assert run_ids(client, admin, secret_hook["id"]) == before, "a refused call queued a run"
    else:
        run = crm.wait_run(client, admin, accepted(resp))
        assert run["trigger_payload"] == json.loads(PAYLOAD), run


def standard_headers(msg_id: str, body: bytes, timestamp=None, secret=SECRET) -> dict:
    ts = int(time.time()) if timestamp is None else timestamp
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts),
            "webhook-signature": crm.sign_standard_webhook(secret, msg_id, ts, body)}


STANDARD_CASES = [
    ("fresh and signed", lambda: standard_headers("msg_a" + secrets.token_hex(4), PAYLOAD), 202),
    ("two signatures, the second right", lambda: {
        **standard_headers("msg_b" + secrets.token_hex(4), PAYLOAD),
        "webhook-signature": "v1,AAAA " + standard_headers("msg_c", PAYLOAD)["webhook-signature"]},
     401),  # the right one is for another id
    ("signed six minutes ago", lambda: standard_headers("msg_d", PAYLOAD,
                                                        int(time.time()) - 360), 401),
    ("signed six minutes ahead", lambda: standard_headers("msg_e", PAYLOAD,
                                                          int(time.time()) + 360), 401),
    ("another body", lambda: standard_headers("msg_f", PAYLOAD + b" "), 401),
    ("another secret", lambda: standard_headers("msg_g", PAYLOAD, secret=wrong_same_length()),
     401),
    ("no webhook-id", lambda: {k: v for k, v in standard_headers("msg_h", PAYLOAD).items()
                               if k != "webhook-id"}, 401),
    ("a timestamp that is not a number", lambda: {
        **standard_headers("msg_i", PAYLOAD), "webhook-timestamp": "soon"}, 401),
    # A stale Standard Webhooks signature is refused even with the plain secret beside it.
    ("stale signature beside the right secret", lambda: {
        **standard_headers("msg_j", PAYLOAD, int(time.time()) - 3600),
        "X-Webhook-Secret": SECRET}, 401),
]


@pytest.mark.parametrize("make,status", [c[1:] for c in STANDARD_CASES],
                         ids=[c[0] for c in STANDARD_CASES])
def test_standard_webhooks_signatures_are_checked_with_their_timestamp(
        client, admin, secret_hook, make, status):
    before = run_ids(client, admin, secret_hook["id"])
    resp = trigger(client, secret_hook["id"], raw=PAYLOAD, headers=make())
    if status == 401:
        crm.assert_error(resp, 401, "INVALID_CREDENTIALS")
        assert run_ids(client, admin, secret_hook["id"]) == before
    else:
        run = crm.wait_run(client, admin, accepted(resp))
        assert run["trigger_payload"] == json.loads(PAYLOAD), run


def test_a_replayed_standard_webhooks_message_starts_no_second_run(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="webhook", webhook_secret=SECRET)
    headers = standard_headers("msg_" + secrets.token_hex(6), PAYLOAD)
    first = accepted(trigger(client, wf["id"], raw=PAYLOAD, headers=headers))
    crm.wait_run(client, admin, first)
    for _ in range(3):  # the captured request sent again, within its 5 minutes
        assert accepted(trigger(client, wf["id"], raw=PAYLOAD, headers=headers)) == first
    assert run_ids(client, admin, wf["id"]) == [first]
    # A new message id is a new message.
    other = accepted(trigger(client, wf["id"], raw=PAYLOAD,
                             headers=standard_headers("msg_" + secrets.token_hex(6), PAYLOAD)))
    assert other != first


def test_secret_is_checked_before_the_state_and_the_body(client, admin):
    inactive = crm.create_workflow(client, admin, trigger_type="webhook", is_active=False,
                                   webhook_secret=SECRET)
    manual = crm.create_workflow(client, admin, trigger_type="manual", webhook_secret=SECRET)
    active = crm.create_workflow(client, admin, trigger_type="webhook", webhook_secret=SECRET)
    good, bad = {"X-Webhook-Secret": SECRET}, {"X-Webhook-Secret": wrong_same_length()}
    for wf in (inactive, manual):
        crm.assert_error(trigger(client, wf["id"], {"a": 1}), 401, "INVALID_CREDENTIALS")
        crm.assert_error(trigger(client, wf["id"], {"a": 1}, headers=bad), 401,
                         "INVALID_CREDENTIALS")
        crm.assert_error(trigger(client, wf["id"], {"a": 1}, headers=good), 409, "CONFLICT")
        crm.assert_error(trigger(client, wf["id"], raw=b"nope", headers=good), 409, "CONFLICT")
    crm.assert_error(trigger(client, active["id"], raw=b"nope"), 401, "INVALID_CREDENTIALS")
    crm.assert_validation(trigger(client, active["id"], raw=b"nope", headers=good),
                          (("body",), "json_invalid"))
    signed = {"X-Webhook-Signature": crm.inbound_webhook_signature(SECRET, b"nope")}
    crm.assert_validation(trigger(client, active["id"], raw=b"nope", headers=signed),
                          (("body",), "json_invalid"))
    for wf in (inactive, manual, active):
        assert crm.list_runs(client, admin, wf["id"]) == []


def test_signature_of_the_empty_body(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="webhook", webhook_secret=SECRET)
    resp = client.request("POST", hook(wf["id"]),
                          headers={"X-Webhook-Signature": crm.inbound_webhook_signature(SECRET,
                                                                                        b"")})
    assert crm.wait_run(client, admin, accepted(resp))["trigger_payload"] == {}


def test_setting_another_secret_closes_the_hook_to_the_old_one(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="webhook", webhook_secret=SECRET)
    crm.assert_error(trigger(client, wf["id"], {"a": 1}), 401, "INVALID_CREDENTIALS")
    crm.wait_run(client, admin, accepted(trigger(client, wf["id"], {"a": 1},
                                                 headers={"X-Webhook-Secret": SECRET})))
    other = "rotated-secret-" + secrets.token_hex(8)
    crm.assert_json_response(client.patch(crm.workflow_url(wf["id"]), {"webhook_secret": other},
                                          token=admin), 200)
    crm.assert_error(trigger(client, wf["id"], {"a": 2}, headers={"X-Webhook-Secret": SECRET}),
                     401, "INVALID_CREDENTIALS")
    crm.wait_run(client, admin, accepted(trigger(client, wf["id"], {"a": 3},
                                                 headers={"X-Webhook-Secret": other})))


# ---- a webhook workflow always has a secret (issue 31) --------------------------------------


@pytest.mark.parametrize("sent", [{}, {"webhook_secret": None}], ids=["absent", "null"])
def test_a_webhook_workflow_created_without_a_secret_gets_one_shown_once(client, admin, sent):
    resp = client.post(crm.WORKFLOWS, {"name": crm.unique("drawn"), "trigger_type": "webhook",
                                       **sent}, token=admin)
    created = crm.assert_json_response(resp, 201)
    crm.assert_workflow(created, secret_shown=True, has_secret=True)
    drawn = created["webhook_secret"]
    assert isinstance(drawn, str) and drawn.startswith("whsec_"), created
    stored = crm.get_workflow(client, admin, created["id"])
    assert "webhook_secret" not in stored and stored["has_secret"] is True, stored
    assert stored == crm.with_override(created, {"webhook_secret": crm.MISSING})
    for shown in (client.get(crm.workflow_url(created["id"]), token=admin),
                  client.get(crm.with_query(crm.WORKFLOWS, {"per_page": 100}), token=admin),
                  client.get(info_url(created["id"]), token=admin)):
        assert shown.status == 200, shown.describe()
        assert drawn.encode() not in shown.body, f"secret shown again: {shown.describe()}"
    crm.assert_error(trigger(client, created["id"], {"a": 1}), 401, "INVALID_CREDENTIALS")
    assert run_ids(client, admin, created["id"]) == [], "a refused call queued a run"
    run_id = accepted(trigger(client, created["id"], {"a": 1},
                              headers={"X-Webhook-Secret": drawn}))
    run = crm.wait_run(client, admin, run_id)
    assert run["workflow_id"] == created["id"] and run["trigger_payload"] == {"a": 1}, run
    assert run_ids(client, admin, created["id"]) == [run_id]


def test_an_unknown_workflow_is_answered_like_a_wrong_secret(client, admin, secret_hook):
    """Ids are sequential: an anonymous caller must not learn which exist (issue 31)."""

    def answer(resp):
        body = resp.json if isinstance(resp.json, dict) else {}
        return resp.status, body.get("code"), body.get("detail")

    gone = crm.create_workflow(client, admin, trigger_type="webhook", webhook_secret=SECRET)
    crm.assert_no_content(client.delete(crm.workflow_url(gone["id"]), token=admin))
    wrong = wrong_same_length()
    for headers in ({}, {"X-Webhook-Secret": wrong},
                    {"X-Webhook-Signature": crm.inbound_webhook_signature(wrong, PAYLOAD)}):
        refused = trigger(client, secret_hook["id"], raw=PAYLOAD, headers=headers)
        crm.assert_error(refused, 401, "INVALID_CREDENTIALS")
        assert refused.json["detail"] == "missing or wrong webhook secret or signature", \
            refused.describe()
        for unknown_id in (NOWHERE_ID, gone["id"]):
            unknown = trigger(client, unknown_id, raw=PAYLOAD, headers=headers)
            assert answer(unknown) == answer(refused), \
                f"{unknown.describe()} differs from {refused.describe()}"
    # A deleted workflow admits nobody, not even with the secret it had.
    crm.assert_error(trigger(client, gone["id"], raw=PAYLOAD,
                             headers={"X-Webhook-Secret": SECRET}), 401, "INVALID_CREDENTIALS")


@pytest.mark.parametrize("method", ["PATCH", "PUT"])
def test_a_null_secret_draws_a_new_one_shown_in_the_update_answer(client, admin, method):
    wf = crm.create_workflow(client, admin, trigger_type="webhook")
    old = wf["webhook_secret"]
    # An update that leaves the secret alone shows none.
    body = crm.assert_json_response(client.request(method, crm.workflow_url(wf["id"]), {
        "description": "kept"}, token=admin), 200)
    crm.assert_workflow(body, has_secret=True)
    body = crm.assert_json_response(client.request(method, crm.workflow_url(wf["id"]), {
        "webhook_secret": None}, token=admin), 200)
    crm.assert_workflow(body, secret_shown=True, has_secret=True, description="kept")
    new = body["webhook_secret"]
    assert new.startswith("whsec_") and new != old, body
    assert "webhook_secret" not in crm.get_workflow(client, admin, wf["id"])
    crm.assert_error(trigger(client, wf["id"], {"a": 1}, headers={"X-Webhook-Secret": old}), 401,
                     "INVALID_CREDENTIALS")
    crm.assert_error(trigger(client, wf["id"], {"a": 1}), 401, "INVALID_CREDENTIALS")
    assert run_ids(client, admin, wf["id"]) == []
    run = crm.wait_run(client, admin, accepted(trigger(client, wf["id"], {"a": 2},
                                                       headers={"X-Webhook-Secret": new})))
    assert run["trigger_payload"] == {"a": 2}, run


def test_becoming_a_webhook_workflow_draws_a_secret(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="manual")
    assert wf["has_secret"] is False and "webhook_secret" not in wf, wf
    body = crm.assert_json_response(client.patch(crm.workflow_url(wf["id"]), {
        "trigger_type": "webhook"}, token=admin), 200)
    crm.assert_workflow(body, secret_shown=True, has_secret=True, trigger_type="webhook")
    crm.assert_error(trigger(client, wf["id"], {"a": 1}), 401, "INVALID_CREDENTIALS")
    crm.wait_run(client, admin, accepted(trigger(client, wf["id"], {"a": 1},
                                                 headers={"X-Webhook-Secret":
                                                          body["webhook_secret"]})))


@pytest.mark.parametrize("trigger_type,extra", [("manual", {}),
                                                ("contact.created", {"is_active": False})])
def test_a_workflow_without_a_secret_admits_nobody(client, admin, trigger_type, extra):
    wf = crm.create_workflow(client, admin, trigger_type=trigger_type, **extra)
    assert wf["has_secret"] is False, wf
    for headers in ({}, {"X-Webhook-Secret": ""}, {"X-Webhook-Secret": SECRET},
                    {"X-Webhook-Signature": crm.inbound_webhook_signature("", b'{"a": 1}')}):
        crm.assert_error(trigger(client, wf["id"], {"a": 1}, headers=headers), 401,
                         "INVALID_CREDENTIALS")
    assert crm.list_runs(client, admin, wf["id"]) == []


# ---- what the run does ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab_field(client, admin) -> dict:
    resp = client.post("/api/v1/fields/contact/custom", {"name": "lab_result",
                                                         "field_type": "text"}, token=admin)
    return crm.assert_json_response(resp, 201)


@pytest.fixture(scope="module")
def lab_hook(client, admin, lab_field) -> dict:
    return crm.create_workflow(client, admin, name="Lab results", trigger_type="webhook",
                               webhook_secret=SECRET, actions=[{
                                   "type": "update_contact", "params": {
                                       "contact_id": "{{trigger.contact_id}}",
                                       "fields": {"custom_fields": {
                                           "lab_result": "{{trigger.result}}"}}}}])


def test_lab_result_webhook_sets_the_contacts_custom_field(client, admin, lab_hook):
    c = crm.create_contact(client, admin, first_name="Lab", custom_fields={"other": 1})
    body = json.dumps({"contact_id": c["id"], "result": "HbA1c 6.1%"}).encode()
    run_id = accepted(trigger(client, lab_hook["id"], raw=body, headers={
        "X-Webhook-Signature": crm.inbound_webhook_signature(SECRET, body)}))

    def stored():
        return crm.get_contact(client, admin, c["id"])["custom_fields"].get("lab_result")

    assert crm.eventually(lambda: stored() == "HbA1c 6.1%", RUN_TIMEOUT, 0.2), \
        crm.get_run(client, admin, run_id)
    assert crm.get_contact(client, admin, c["id"])["custom_fields"] == {
        "other": 1, "lab_result": "HbA1c 6.1%"}
    run = crm.wait_run(client, admin, run_id)
    assert run["status"] == "succeeded", run
    step = run["steps"][0]
    assert step["type"] == "update_contact" and step["status"] == "succeeded", run
    assert step["params"] == {"contact_id": c["id"], "fields": {
        "custom_fields": {"lab_result": "HbA1c 6.1%"}}}, step


def test_lab_result_with_a_value_the_field_refuses_fails_the_run(client, admin, lab_hook):
    c = crm.create_contact(client, admin, first_name="LabBad")
    run_id = accepted(trigger(client, lab_hook["id"], {"contact_id": c["id"], "result": 7},
                              headers={"X-Webhook-Secret": SECRET}))
    run = crm.wait_run(client, admin, run_id)
    assert run["status"] == "failed", run
    assert "lab_result" in run["error"], run
    assert "lab_result" not in crm.get_contact(client, admin, c["id"])["custom_fields"]


def test_lab_result_for_a_missing_contact_fails_the_run(client, admin, lab_hook):
    run_id = accepted(trigger(client, lab_hook["id"], {"contact_id": NOWHERE_ID, "result": "x"},
                              headers={"X-Webhook-Secret": SECRET}))
    run = crm.wait_run(client, admin, run_id)
    assert run["status"] == "failed", run
    assert "not found" in run["error"].lower(), run
    assert run["steps"][0]["status"] == "failed", run


def test_lab_result_for_another_tenants_contact_changes_nothing(client, admin, sess_b, lab_hook):
    c_b = crm.create_contact(client, sess_b.admin, first_name="Bee")
    run_id = accepted(trigger(client, lab_hook["id"], {"contact_id": c_b["id"], "result": "x"},
                              headers={"X-Webhook-Secret": SECRET}))
    run = crm.wait_run(client, admin, run_id)
    assert run["status"] == "failed", run
    assert crm.get_contact(client, sess_b.admin, c_b["id"])["custom_fields"] == {}


def test_run_without_a_contact_fails(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="webhook", actions=[
        {"type": "add_tag", "params": {"tag": "x"}}])
    run = crm.wait_run(client, admin, accepted(trigger(client, wf["id"], {"no": "contact"},
                                                       headers=with_secret(wf))))
    assert run["status"] == "failed" and run["error"], run


def test_payload_contact_id_picks_the_contact_of_a_contact_action(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="webhook", actions=[
        {"type": "add_tag", "params": {"tag": "by-payload"}},
        {"type": "set_status", "params": {"status": "qualified"}}])
    c = crm.create_contact(client, admin, first_name="ById")
    run = crm.wait_run(client, admin, accepted(trigger(client, wf["id"], {"contact_id": c["id"]},
                                                       headers=with_secret(wf))))
    assert run["status"] == "succeeded", run
    contact = crm.get_contact(client, admin, c["id"])
    assert contact["tags"] == ["by-payload"] and contact["status"] == "qualified", contact
    c2 = crm.create_contact(client, admin, first_name="ByObject")
    run = crm.wait_run(client, admin, accepted(trigger(client, wf["id"],
                                                       {"contact": {"id": c2["id"]}},
                                                       headers=with_secret(wf))))
    assert run["status"] == "succeeded", run
    assert crm.get_contact(client, admin, c2["id"])["tags"] == ["by-payload"]


def test_conditions_that_do_not_hold_succeed_without_steps(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="webhook",
                             conditions=[{"field": "kind", "op": "eq", "value": "lab"}],
                             actions=[{"type": "add_tag", "params": {"tag": "x"}}])
    run = crm.wait_run(client, admin, accepted(trigger(client, wf["id"], {"kind": "billing"},
                                                       headers=with_secret(wf))))
    crm.assert_run(run, status="succeeded", conditions_met=False, steps=[], error=None)


@pytest.mark.parametrize("depth", [1, 4])
def test_chain_depth_header_starts_the_run_at_that_depth(client, admin, open_hook, depth):
    run_id = accepted(trigger(client, open_hook["id"], {"a": 1},
                              headers=with_secret(open_hook, {"carecrm-chain-depth": str(depth)})))
    run = crm.wait_run(client, admin, run_id)
    assert run["status"] == "succeeded" and run["depth"] == depth, run


def test_chain_depth_header_at_the_limit_fails_the_run_without_actions(client, admin):
    c = crm.create_contact(client, admin, first_name="Deep")
    wf = crm.create_workflow(client, admin, trigger_type="webhook", actions=[
        {"type": "add_tag", "params": {"tag": "too-deep"}}])
    run_id = accepted(trigger(client, wf["id"], {"contact_id": c["id"]},
                              headers=with_secret(wf, {"carecrm-chain-depth": "5"})))
    run = crm.wait_run(client, admin, run_id)
    assert run["status"] == "failed" and run["depth"] == 5, run
    assert "depth" in run["error"].lower() and run["steps"] == [], run
    assert crm.get_contact(client, admin, c["id"])["tags"] == []


# ---- conditions against a webhook payload ---------------------------------------------------

ABSENT = object()  # a condition without "value"

CONDITION_CASES = [
    # eq / neq: numbers numerically, missing is null
    ("eq int float", [("a", "eq", 1)], {"a": 1.0}, True),
    ("eq number vs string", [("a", "eq", 1)], {"a": "1"}, False),
    ("eq string", [("a", "eq", "x")], {"a": "x"}, True),
    ("eq nested path", [("a.b.c", "eq", True)], {"a": {"b": {"c": True}}}, True),
    ("eq missing is null", [("missing", "eq", None)], {"a": 1}, True),
    ("eq missing vs value", [("missing", "eq", "x")], {}, False),
    ("neq differs", [("a", "neq", "x")], {"a": "y"}, True),
    ("neq same", [("a", "neq", "x")], {"a": "x"}, False),
    ("neq missing", [("missing", "neq", "x")], {}, True),
    # contains
    ("contains substring", [("s", "contains", "lab")], {"s": "a lab result"}, True),
    ("contains is case-sensitive", [("s", "contains", "Lab")], {"s": "a lab result"}, False),
    ("contains array element", [("tags", "contains", "vip")], {"tags": ["a", "vip"]}, True),
    ("contains needs a whole element", [("tags", "contains", "vi")], {"tags": ["vip"]}, False),
    ("contains on a number", [("n", "contains", "1")], {"n": 1}, False),
    ("contains on missing", [("missing", "contains", "x")], {}, False),
    # in
    ("in", [("a", "in", ["x", "y"])], {"a": "y"}, True),
    ("not in", [("a", "in", ["x"])], {"a": "z"}, False),
    ("in numerically", [("a", "in", [1, 2])], {"a": 2.0}, True),
    ("in on missing", [("missing", "in", [None, "x"])], {}, False),
    # gt / lt
    ("gt", [("n", "gt", 5)], {"n": 6}, True),
    ("gt equal", [("n", "gt", 5)], {"n": 5}, False),
    ("lt float", [("n", "lt", 5)], {"n": 4.5}, True),
    ("gt mixed types", [("n", "gt", "5")], {"n": 6}, False),
    ("gt timestamps", [("t", "gt", "2026-01-01T00:00:00.000000Z")],
     {"t": "2026-03-01T10:00:00.000000Z"}, True),
    ("lt strings by bytes", [("s", "lt", "b")], {"s": "a"}, True),
    ("lt uppercase first", [("s", "lt", "a")], {"s": "B"}, True),
    ("lt on missing", [("missing", "lt", 5)], {}, False),
    # exists
    ("exists", [("a", "exists", True)], {"a": 0}, True),
    ("exists on null", [("a", "exists", True)], {"a": None}, False),
    ("exists default true", [("a", "exists", ABSENT)], {"a": "x"}, True),
    ("exists default on missing", [("a", "exists", ABSENT)], {}, False),
    ("not exists", [("a", "exists", False)], {}, True),
    ("not exists on a value", [("a", "exists", False)], {"a": []}, False),
    # the contact fallback and cf.
    ("status in the contact", [("status", "eq", "qualified")],
     {"contact": {"status": "qualified"}}, True),
    ("cf. alias in the contact", [("cf.blood", "eq", "A+")],
     {"contact": {"custom_fields": {"blood": "A+"}}}, True),
    ("custom_fields path in the contact", [("custom_fields.blood", "eq", "A+")],
     {"contact": {"custom_fields": {"blood": "A+"}}}, True),
    ("tags in the contact", [("tags", "contains", "vip")], {"contact": {"tags": ["vip"]}}, True),
    ("the payload's own key wins", [("status", "eq", "x")],
     {"status": "x", "contact": {"status": "y"}}, True),
    # changed_to with a previous object
    ("changed_to", [("status", "changed_to", "qualified")],
     {"status": "qualified", "previous": {"status": "active"}}, True),
    ("changed_to unchanged", [("status", "changed_to", "qualified")],
     {"status": "qualified", "previous": {"status": "qualified"}}, False),
    ("changed_to other value", [("status", "changed_to", "qualified")],
     {"status": "active", "previous": {"status": "inactive"}}, False),
    # AND
    ("all hold", [("a", "eq", 1), ("b", "in", ["x"])], {"a": 1, "b": "x"}, True),
    ("one fails", [("a", "eq", 1), ("b", "in", ["x"])], {"a": 1, "b": "y"}, False),
]


def condition(field, op, value) -> dict:
    c = {"field": field, "op": op}
    if value is not ABSENT:
        c["value"] = value
    return c


@pytest.mark.parametrize("conds,payload,holds", [c[1:] for c in CONDITION_CASES],
                         ids=[c[0] for c in CONDITION_CASES])
def test_condition_ops(client, admin, conds, payload, holds):
    wf = crm.create_workflow(client, admin, trigger_type="webhook",
                             conditions=[condition(*c) for c in conds])
    run = crm.wait_run(client, admin, accepted(trigger(client, wf["id"], payload,
                                                       headers=with_secret(wf))))
    assert run["status"] == "succeeded", run
    assert run["conditions_met"] is holds, f"{conds} on {payload}: {run}"
