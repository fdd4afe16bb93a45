"""Regression tests for faults found in review of the automation and messaging actors: each one
failed (or hung) before its fix.

- Deleting a workflow while its runs wait on an http_request must give their run slots back:
  a tenant has 16, and leaked slots stopped every later run of the tenant.
- A subscription switched off while its deliveries were failing must not leave them pending
  for ever at the head of the delivery queue, where they blocked every other subscription.
- Two messages from a new Telegram chat arriving at once must find one contact and one
  conversation, not create one each.
"""
import json
import time

import pytest

import crm

SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true",
              "CARECRM_OUTBOUND_TIMEOUT": "3",
              "CARECRM_WEBHOOK_RETRY_BASE": "0.2",
              "CARECRM_WEBHOOK_RETRY_MAX": "1",
              "CARECRM_WEBHOOK_RETRY_WINDOW": "600"}

SECRET = "regression-secret-0123456789"


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


def test_deleting_workflows_with_requests_in_flight_frees_their_run_slots(client, fresh):
    t = fresh.admin
    with crm.Receiver(hang=True) as hanging:
        # 20 runs, more than the 16 that may step at once, each waiting on a receiver that
        # never answers; their workflows are deleted while the requests are in flight.
        for _ in range(4):
            wf = crm.create_workflow(client, t, trigger_type="webhook", actions=[
                {"type": "http_request", "params": {"url": hanging.url("/slow")}}])
            for _ in range(5):
                crm.assert_json_response(client.post(
                    crm.webhook_trigger_url(wf["id"]), {},
                    headers={"X-Webhook-Secret": wf["webhook_secret"]}), 202)
            assert crm.eventually(lambda: len(hanging.requests) > 0, 10)
            resp = client.delete(crm.workflow_url(wf["id"]), token=t)
            assert resp.status == 204, resp.describe()
        contact = crm.create_contact(client, t, first_name="Still", last_name="Served")
        later = crm.create_workflow(client, t, trigger_type="manual", actions=[
            {"type": "add_tag", "params": {"tag": "served", "contact_id": contact["id"]}}])
        run = crm.assert_json_response(
            client.post(crm.workflow_url(later["id"]) + "/run", {}, token=t), 202)
        # The hanging requests time out after 3 s; the new run must not wait on anything.
        finished = crm.wait_run(client, t, run["run_id"], timeout=20)
        assert finished["status"] == "succeeded", finished
        got = crm.assert_json_response(client.get(f"/api/v1/contacts/{contact['id']}", token=t), 200)
        assert "served" in got["tags"], got


def test_switching_off_a_failing_subscription_does_not_block_the_others(client, fresh):
    t = fresh.admin
    with crm.Receiver([500]) as failing, crm.Receiver([200]) as good:
        bad = crm.assert_json_response(client.post("/api/v1/webhook-subscriptions", {
            "url": failing.url("/fail"), "events": ["contact.created"], "secret": SECRET},
            token=t), 201)
        for i in range(12):
            crm.create_contact(client, t, first_name=f"Queued{i}")
        # Every one of the 12 deliveries tried at least once (not 12 requests, which retries of
        # the first ones can make before the last event is dispatched): all 12 exist before the
        # switch-off, which stops events dispatched after it from making deliveries at all.
        def tried():
            return len({r.header("webhook-id") for r in failing.requests})
        assert crm.eventually(lambda: tried() >= 12, 15), tried()
        crm.assert_json_response(
            client.patch(f"/api/v1/webhook-subscriptions/{bad['id']}", {"is_active": False},
                         token=t), 200)
        fine = crm.assert_json_response(client.post("/api/v1/webhook-subscriptions", {
            "url": good.url("/ok"), "events": ["contact.created"], "secret": SECRET},
            token=t), 201)
        created = crm.create_contact(client, t, first_name="Delivered")
        # The good subscription gets its event although the switched-off one had older
        # deliveries due all the time.
        crm.wait_deliveries(client, t, fine["id"],
                            lambda ds: len(ds) == 1 and ds[0]["status"] == "succeeded")
        bodies = [json.loads(r.body) for r in good.requests]
        assert [b["data"]["contact_id"] for b in bodies] == [created["id"]], bodies
        # And the switched-off one's deliveries end failed: none stays pending.
        crm.wait_deliveries(client, t, bad["id"],
                            lambda ds: len(ds) == 12 and
                            all(d["status"] == "failed" for d in ds))
        # Attempts already on the wire at the switch-off may still land; after that, none.
        time.sleep(1.0)
        seen = len(failing.requests)
        time.sleep(2.0)
        assert len(failing.requests) == seen, "attempts went on after the switch-off"


def test_first_messages_of_a_new_telegram_chat_at_once_make_one_contact(client, fresh):
    t = fresh.admin
    chan = crm.create_channel(client, t, type="telegram", webhook_secret=SECRET,
                              config={"bot_token": crm.bot_token()})
    chat = int(time.time() * 1000) % 1_000_000_000

    def post(i):
        update = crm.telegram_update(update_id=i, message_id=100 + i, chat_id=chat,
                                     text=f"hello {i}", first_name="Burst", last_name="Sender")
        return crm.post_telegram_webhook(client, chan["id"], SECRET, update)

    acks = [crm.assert_json_response(r, 200) for r in crm.run_parallel(post, list(range(8)),
                                                                      workers=8)]
    assert len({a["message_id"] for a in acks}) == 8, acks
    assert len({a["contact_id"] for a in acks}) == 1, acks
    assert len({a["conversation_id"] for a in acks}) == 1, acks
    conv = crm.get_conversation(client, t, acks[0]["conversation_id"])
    assert conv["unread_count"] == 8, conv


def _metric(server, name: str, **labels) -> float:
    resp = server.metrics_client().get("/metrics")
    assert resp.status == 200, resp.describe()
    for n, ls, v in crm.parse_prometheus(resp.body.decode()):
        if n == name and all(ls.get(k) == w for k, w in labels.items()):
            return v
    raise AssertionError(f"{name}{labels} not exported")


def test_metrics_count_runs_deliveries_and_messages(server, client, fresh):
    """Operators see automation go through (or not) on /metrics."""
    t = fresh.admin
    before = {
        "runs_ok": _metric(server, "carecrm_workflow_runs_total", status="succeeded"),
        "runs_failed": _metric(server, "carecrm_workflow_runs_total", status="failed"),
        "delivered": _metric(server, "carecrm_webhook_attempts_total", result="delivered"),
        "received": _metric(server, "carecrm_channel_messages_total", status="received"),
    }
    with crm.Receiver([200]) as rcv:
        crm.assert_json_response(client.post("/api/v1/webhook-subscriptions", {
            "url": rcv.url("/m"), "events": ["contact.created"], "secret": SECRET},
            token=t), 201)
        contact = crm.create_contact(client, t, first_name="Metered")
        ok = crm.create_workflow(client, t, actions=[
            {"type": "add_tag", "params": {"tag": "m", "contact_id": contact["id"]}}])
        bad = crm.create_workflow(client, t, actions=[
            {"type": "add_tag", "params": {"tag": "m", "contact_id": 999_999_999}}])
        for wf in (ok, bad):
            run = crm.assert_json_response(
                client.post(crm.workflow_url(wf["id"]) + "/run", {}, token=t), 202)
            crm.wait_run(client, t, run["run_id"])
        chan = crm.create_channel(client, t, webhook_secret=SECRET)
        crm.inbound(client, chan["id"], SECRET, {"phone": crm.unique_phone()}, "metered")
        assert crm.eventually(lambda: len(rcv.requests) >= 1, 15)
        assert crm.eventually(
            lambda: _metric(server, "carecrm_webhook_attempts_total",
                            result="delivered") >= before["delivered"] + 1, 10)
    assert _metric(server, "carecrm_workflow_runs_total",
                   status="succeeded") >= before["runs_ok"] + 1
    assert _metric(server, "carecrm_workflow_runs_total",
                   status="failed") >= before["runs_failed"] + 1
    assert _metric(server, "carecrm_channel_messages_total",
                   status="received") >= before["received"] + 1
