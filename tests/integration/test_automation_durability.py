"""Durability of automation across a crash (contract §7 "Runs are durable", "At-least-once from a
durable outbox"; docs/automation.md "Durable"): after `kill -9` of carecrm and a new server on
the same database, every event committed before the kill is delivered, a run waiting on a delay
finishes, accepted webhook runs finish, and a schedule that missed fire times while the service
was down produces one run, not one per miss.

Each test kills this module's server and starts it again (same Server object, new port): use
`server.client()` after a restart, never the module's `client`."""
import datetime
import time

import pytest

import crm

SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true",
              "CARECRM_WEBHOOK_RETRY_BASE": "0.2",
              "CARECRM_WEBHOOK_RETRY_MAX": "1"}

SECRET = "durable-secret-0123456789"
TIMEOUT = 30.0  # after a restart: start-up, the automation poll, then the work itself


@pytest.fixture
def fresh(server, cli_env) -> crm.TenantSession:
    return crm.tenant_session(server.client(), cli_env)


def restart(server) -> crm.Client:
    """kill -9, then a new `carecrm serve` on the same database; returns a client for it."""
    server.kill()
    assert not server.running
    server.start()
    return server.client()


def contact_of(req):
    body = req.json
    data = body.get("data") if isinstance(body, dict) else None
    if isinstance(data, dict):
        if "contact_id" in data:
            return data["contact_id"]
        if isinstance(data.get("contact"), dict):
            return data["contact"].get("id")
    return None


def diagnostics(database, tenant_id) -> str:
    try:
        outbox = database.query(f"SELECT count(*) FROM outbox WHERE tenant_id = {tenant_id}")
        deliveries = database.query("SELECT status, count(*) FROM webhook_deliveries "
                                    f"WHERE tenant_id = {tenant_id} GROUP BY status")
        runs = database.query("SELECT status, count(*) FROM workflow_runs "
                              f"WHERE tenant_id = {tenant_id} GROUP BY status")
        return (f"outbox rows: {outbox.strip()}; deliveries: {deliveries.strip()!r}; "
                f"runs: {runs.strip()!r}")
    except RuntimeError as e:
        return f"(diagnostics failed: {e})"


def delivered_contacts(rcv) -> set:
    return {contact_of(r) for r in rcv.requests if r.status == 200}


def test_pending_deliveries_and_a_waiting_run_survive_kill_9(server, fresh, database):
    t = fresh.admin
    client = server.client()
    with crm.Receiver([503]) as rcv:  # down: every attempt fails until it is switched to 200
        sub = crm.create_subscription(client, t, url=rcv.url(), events=["contact.created"],
                                      secret=SECRET)
        wf = crm.create_workflow(client, t, trigger_type="contact.created",
                                 conditions=[{"field": "first_name", "op": "eq",
                                              "value": "Waiting"}],
                                 actions=[{"type": "add_tag", "params": {"tag": "before"}},
                                          {"type": "delay", "params": {"seconds": 3}},
                                          {"type": "add_tag", "params": {"tag": "after"}}])
        waiting = crm.create_contact(client, t, first_name="Waiting")
        ids = {waiting["id"]} | {crm.create_contact(client, t, first_name=f"Pending{i}")["id"]
                                 for i in range(5)}
        runs = crm.wait_runs(client, t, wf["id"], 1, finished=False)
        run = crm.wait_run(client, t, runs[0]["id"], statuses=("waiting",))
        # Every delivery was tried at least once and failed: they are pending.
        assert crm.eventually(lambda: {contact_of(r) for r in rcv.requests} >= ids, 20.0, 0.1), \
            [r.describe() for r in rcv.requests]
        assert delivered_contacts(rcv) == set()

        server.kill()  # SIGKILL
        rcv.set_responses([200])  # the receiver comes back while carecrm is down
        server.start()
        client = server.client()

        assert crm.eventually(lambda: delivered_contacts(rcv) >= ids, TIMEOUT, 0.2), \
            (f"delivered {delivered_contacts(rcv)} of {ids}; "
             f"{diagnostics(database, fresh.tenant.tenant_id)}")
        done = crm.wait_run(client, t, run["id"], timeout=TIMEOUT)
        assert done["status"] == "succeeded", done
        assert [s["status"] for s in done["steps"]] == ["succeeded"] * 3, done
        contact = crm.get_contact(client, t, waiting["id"])
        assert sorted(contact["tags"]) == ["after", "before"], contact
        items = crm.wait_deliveries(client, t, sub["id"],
                                    lambda ds: len(ds) == len(ids) and
                                    all(d["status"] == "succeeded" for d in ds), TIMEOUT)
    # One delivery per event, each with its own webhook-id kept across the restart.
    by_delivery = {}
    for r in rcv.requests:
        by_delivery.setdefault(r.header("webhook-id"), set()).add(contact_of(r))
    assert len(by_delivery) == len(ids), by_delivery
    assert all(len(contacts) == 1 for contacts in by_delivery.values()), by_delivery
    assert {d["webhook_id"] for d in items} == set(by_delivery)
    assert all(crm.verify_standard_webhook(SECRET, r.headers, r.body) for r in rcv.requests)


def test_events_committed_just_before_kill_9_are_all_delivered(server, fresh, database):
    t = fresh.admin
    client = server.client()
    with crm.Receiver([200]) as rcv:
        crm.create_subscription(client, t, url=rcv.url(), events=["contact.created"],
                                secret=SECRET)
        created = crm.run_parallel(
            lambda i: crm.create_contact(client, t, first_name=f"Burst{i}")["id"],
            list(range(50)), 8)
        server.kill()  # immediately: most events are still in the outbox
        before_restart = len(delivered_contacts(rcv))
        server.start()
        assert crm.eventually(lambda: delivered_contacts(rcv) >= set(created), TIMEOUT, 0.2), \
            (f"{len(delivered_contacts(rcv) & set(created))} of 50 delivered "
             f"({before_restart} before the restart); "
             f"{diagnostics(database, fresh.tenant.tenant_id)}")
    assert set(created) == delivered_contacts(rcv) - {None}


def test_accepted_webhook_runs_finish_after_kill_9(server, fresh, database):
    t = fresh.admin
    client = server.client()
    wf = crm.create_workflow(client, t, trigger_type="webhook", actions=[
        {"type": "add_tag", "params": {"tag": "hooked", "contact_id": "{{trigger.contact_id}}"}}])
    contacts = [crm.create_contact(client, t, first_name=f"Hook{i}")["id"] for i in range(10)]
    run_ids = []
    for cid in contacts:
        resp = client.post(crm.webhook_trigger_url(wf["id"]), {"contact_id": cid},
                           headers={"X-Webhook-Secret": wf["webhook_secret"]})
        body = crm.assert_json_response(resp, 202)
        run_ids.append(body["run_id"])
    client = restart(server)
    for run_id in run_ids:
        run = crm.wait_run(client, t, run_id, timeout=TIMEOUT)
        assert run["status"] == "succeeded", (run, diagnostics(database, fresh.tenant.tenant_id))
    for cid in contacts:
        assert crm.get_contact(client, t, cid)["tags"] == ["hooked"], cid


def test_missed_schedule_fire_times_make_one_run(server, fresh):
    t = fresh.admin
    client = server.client()
    wf = crm.create_workflow(client, t, trigger_type="schedule",
                             trigger_config={"interval_seconds": 5})
    try:
        crm.wait_runs(client, t, wf["id"], 1, timeout=TIMEOUT)
        server.kill()
        killed_at = time.time()
        time.sleep(16)  # three fire times pass while the service is down
        server.start()
        client = server.client()

        def after_restart():
            return [r for r in crm.list_runs(client, t, wf["id"])
                    if crm.parse_timestamp(r["created_at"]).timestamp() > killed_at]

        assert crm.eventually(lambda: len(after_restart()) >= 1, TIMEOUT, 0.2), \
            "the schedule did not fire after the restart"
        time.sleep(2.5)
        runs = sorted(after_restart(), key=lambda r: r["created_at"])
        stamps = [crm.parse_timestamp(r["created_at"]).timestamp() for r in runs]
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        assert all(g >= 3.0 for g in gaps), \
            f"missed fire times made several runs at once: {[r['created_at'] for r in runs]}"
        assert crm.get_workflow(client, t, wf["id"])["next_run_at"] > runs[-1]["created_at"]
    finally:
        if server.running:
            server.client().delete(crm.workflow_url(wf["id"]), token=t)


def test_a_task_due_while_carecrm_was_down_fires_task_overdue_once(server, fresh, database):
    """docs/tasks.md "Overdue": the mark and the event share a transaction, and the sweeper wakes
    a tenant whose task fell due while no actor of it was live."""
    t = fresh.admin
    client = server.client()
    with crm.Receiver([200]) as rcv:
        crm.create_subscription(client, t, url=rcv.url(), events=["task.overdue"], secret=SECRET)
        due = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
        task = crm.assert_json_response(client.post("/api/v1/tasks", {
            "title": "Call back with the result", "due_at": due.isoformat()}, token=t), 201)
        server.kill()
        time.sleep(2.5)  # it falls due while nothing runs
        server.start()
        got = rcv.wait_for(1, TIMEOUT)
        assert got[0].json["type"] == "task.overdue" and \
            got[0].json["data"]["task_id"] == task["id"], got[0].json
        # Marked once: another crash and start fire nothing more (a delivery may be sent again
        # after a crash, at least once, under its own webhook-id).
        restart(server)
        time.sleep(3)
        assert len({r.header("webhook-id") for r in rcv.requests}) == 1, \
            [r.json for r in rcv.requests]
    marked = database.query(f"SELECT overdue_at IS NOT NULL FROM tasks WHERE id = {task['id']}")
    assert marked.strip() == "t", marked
    events = database.query("SELECT count(*) FROM outbox WHERE event = 'task.overdue' AND "
                            f"(payload->>'task_id')::bigint = {task['id']}")
    assert events.strip() == "1", events
