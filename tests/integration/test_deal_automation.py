"""Deal events and automation (docs/pipeline.md "Events and automation", docs/automation.md):
deal events delivered to webhook subscriptions (signed per Standard Webhooks, the won/lost
events beside stage_changed, deal.updated with what changed), deal triggers with their
trigger_config filters (`pipeline_id`, `from`, `to`) whose contact actions work on the deal's
contact, and the workflow actions create_deal and move_deal (templates, the run's id in the
deal's history, failures, definitions refused at create).

Every test uses a tenant of its own (`fresh`): a tenant's workflows and subscriptions see every
event of the tenant. Absence ("no run for that move") is checked after a later event that
matches has been handled: the outbox is taken in order."""
import secrets

import pytest

import crm

SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}

SECRET = "deal-hook-" + secrets.token_hex(8)  # 26 characters
TIMEOUT = 20.0
ENVELOPE_KEYS = {"type", "timestamp", "data"}


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


# ---- helpers --------------------------------------------------------------------------------


def sid(pipeline, name) -> int:
    return crm.stage_named(pipeline, name)["id"]


def tag_action(tag) -> dict:
    return {"type": "add_tag", "params": {"tag": tag}}


def tags(client, token, contact_id) -> list:
    return crm.get_contact(client, token, contact_id)["tags"]


def only_run(client, token, workflow_id) -> dict:
    runs = crm.wait_runs(client, token, workflow_id, 1, TIMEOUT)
    assert len(runs) == 1, f"want exactly one run: {runs}"
    return crm.get_run(client, token, runs[0]["id"])


def envelope(req) -> dict:
    body = req.json
    assert isinstance(body, dict) and set(body) == ENVELOPE_KEYS, req.describe()
    crm.assert_timestamp(body["timestamp"])
    return body


def deliveries(client, token, subscription_id) -> list[dict]:
    """Every delivery of a subscription (oldest first) as {"event", "data"}."""
    out = []
    for item in reversed(crm.list_deliveries(client, token, subscription_id)):
        payload = item["payload"]
        if isinstance(payload, dict) and set(payload) == ENVELOPE_KEYS:
            payload = payload["data"]
        out.append({"event": item["event"], "data": payload})
    return out


# ---- webhook subscriptions ------------------------------------------------------------------


def test_stage_change_is_delivered_signed_to_a_subscription(client, fresh):
    t = fresh.admin
    sales = crm.default_pipeline(client, t)
    lead, qual = sid(sales, "Lead"), sid(sales, "Qualified")
    with crm.Receiver([200]) as rcv:
        sub = crm.create_subscription(client, t, url=rcv.url(), events=["deal.stage_changed"],
                                      secret=SECRET)
        contact = crm.create_contact(client, t, first_name="Hook")
        deal = crm.create_deal(client, t, contact_id=contact["id"], amount="10")
        crm.move_deal(client, t, deal["id"], qual)
        req = rcv.wait_for(1, TIMEOUT)[0]
        done = crm.wait_deliveries(client, t, sub["id"],
                                   lambda ds: len(ds) == 1 and ds[0]["status"] == "succeeded",
                                   TIMEOUT)
        assert len(rcv.requests) == 1, "the creation is not a subscribed event"
    assert req.method == "POST" and req.path == "/hook", req.describe()
    assert crm.verify_standard_webhook(SECRET, req.headers, req.body, tolerance=60), \
        f"signature does not verify: {req.describe()}"
    body = envelope(req)
    assert body["type"] == "deal.stage_changed", body
    data = body["data"]
    assert (data["deal_id"], data["contact_id"], data["tenant_id"]) == \
        (deal["id"], contact["id"], fresh.tenant.tenant_id), data
    assert (data["from_stage_id"], data["to_stage_id"]) == (lead, qual), data
    crm.assert_deal(data["deal"], id=deal["id"], stage_id=qual, status="open", amount="10.00",
                    contact_id=contact["id"])
    crm.assert_delivery(done[0], subscription_id=sub["id"], event="deal.stage_changed",
                        webhook_id=req.header("webhook-id"), status="succeeded")


def test_win_and_loss_send_won_and_lost_beside_stage_changed(client, fresh):
    t = fresh.admin
    sales = crm.default_pipeline(client, t)
    won, lost, qual = sid(sales, "Won"), sid(sales, "Lost"), sid(sales, "Qualified")
    with crm.Receiver([200]) as rcv:
        sub = crm.create_subscription(client, t, url=rcv.url(), secret=SECRET,
                                      events=["deal.stage_changed", "deal.won", "deal.lost"])
        opened, winner, loser = (crm.create_deal(client, t, title=n)["id"]
                                 for n in ("Opened", "Winner", "Loser"))
        crm.move_deal(client, t, opened, qual)
        crm.move_deal(client, t, winner, won)
        crm.move_deal(client, t, loser, lost, lost_reason="Price")
        # The last event's delivery exists once every earlier event was dispatched.
        got = []

        def lost_dispatched():
            got[:] = deliveries(client, t, sub["id"])
            return any(d["event"] == "deal.lost" for d in got)

        assert crm.eventually(lost_dispatched, TIMEOUT, 0.2), got
        reqs = rcv.wait_for(5, TIMEOUT)
    seen = sorted((d["event"], d["data"]["deal_id"]) for d in got)
    assert seen == sorted([("deal.stage_changed", opened), ("deal.stage_changed", winner),
                           ("deal.won", winner), ("deal.stage_changed", loser),
                           ("deal.lost", loser)]), got
    for d in got:
        if d["event"] in ("deal.won", "deal.lost"):
            data = d["data"]
            want = (won, "won") if d["event"] == "deal.won" else (lost, "lost")
            assert (data["to_stage_id"], data["deal"]["status"]) == want, data
            assert data["from_stage_id"] == sid(sales, "Lead"), data
            crm.assert_timestamp(data["deal"]["closed_at"])
    assert all(crm.verify_standard_webhook(SECRET, r.headers, r.body) for r in reqs)
    assert sorted(envelope(r)["type"] for r in reqs) == sorted(e for e, _ in seen)


def test_deal_updated_names_what_changed_also_when_its_contact_is_deleted(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as rcv:
        crm.create_subscription(client, t, url=rcv.url(), events=["deal.updated"], secret=SECRET)
        contact = crm.create_contact(client, t, first_name="Leaving")
        deal = crm.create_deal(client, t, amount="1", contact_id=contact["id"])
        crm.assert_json_response(client.patch(crm.deal_url(deal["id"]), {"amount": "2"},
                                              token=t), 200)
        crm.assert_no_content(client.delete(crm.contact_url(contact["id"]), token=t))
        reqs = rcv.wait_for(2, TIMEOUT)
    assert all(envelope(r)["type"] == "deal.updated" for r in reqs), reqs
    datas = [envelope(r)["data"] for r in reqs]
    first = [d for d in datas if d.get("changed") == ["amount"]]
    second = [d for d in datas if "contact_id" in (d.get("changed") or [])]
    assert len(first) == 1 and len(second) == 1, datas
    first, second = first[0], second[0]
    assert first["deal_id"] == deal["id"] and first["changed"] == ["amount"], first
    assert first["previous"] == {"amount": "1.00"} and first["deal"]["amount"] == "2.00", first
    assert second["deal_id"] == deal["id"] and "contact_id" in second["changed"], second
    assert second["previous"]["contact_id"] == contact["id"], second
    assert second["deal"]["contact_id"] is None, second


# ---- deal triggers --------------------------------------------------------------------------


def test_move_to_the_won_stage_runs_the_workflow_that_tags_the_deals_contact(client, fresh):
    t = fresh.admin
    sales = crm.default_pipeline(client, t)
    qual, won = sid(sales, "Qualified"), sid(sales, "Won")
    wf = crm.create_workflow(client, t, trigger_type="deal.stage_changed",
                             trigger_config={"to": won}, actions=[tag_action("customer")])
    contact = crm.create_contact(client, t, first_name="Winnie", tags=["lead"])
    deal = crm.create_deal(client, t, contact_id=contact["id"], amount="900")
    crm.move_deal(client, t, deal["id"], qual)  # another stage: no run
    crm.move_deal(client, t, deal["id"], won)
    assert crm.eventually(lambda: "customer" in tags(client, t, contact["id"]), TIMEOUT, 0.2), \
        crm.list_runs(client, t, wf["id"])
    run = only_run(client, t, wf["id"])
    crm.assert_run(run, workflow_id=wf["id"], status="succeeded",
                   trigger_type="deal.stage_changed", conditions_met=True, error=None)
    payload = run["trigger_payload"]
    assert (payload["deal_id"], payload["contact_id"]) == (deal["id"], contact["id"]), payload
    assert (payload["from_stage_id"], payload["to_stage_id"]) == (qual, won), payload
    assert [(s["type"], s["status"]) for s in run["steps"]] == [("add_tag", "succeeded")], run
    assert sorted(tags(client, t, contact["id"])) == ["customer", "lead"]


def test_trigger_config_pipeline_id_limits_the_runs_to_that_pipeline(client, fresh):
    t = fresh.admin
    sales = crm.default_pipeline(client, t)
    other = crm.create_pipeline(client, t, name="Implants")
    wf = crm.create_workflow(client, t, trigger_type="deal.stage_changed",
                             trigger_config={"pipeline_id": other["id"]},
                             actions=[tag_action("implants")])
    c_sales, c_other = (crm.create_contact(client, t, first_name=n)["id"] for n in ("S", "O"))
    in_sales = crm.create_deal(client, t, contact_id=c_sales)
    in_other = crm.create_deal(client, t, contact_id=c_other, pipeline_id=other["id"])
    crm.move_deal(client, t, in_sales["id"], sid(sales, "Proposal"))
    crm.move_deal(client, t, in_other["id"], sid(other, "Proposal"))
    run = only_run(client, t, wf["id"])
    assert run["status"] == "succeeded" and run["trigger_payload"]["deal_id"] == in_other["id"]
    assert crm.eventually(lambda: "implants" in tags(client, t, c_other), TIMEOUT, 0.2)
    assert "implants" not in tags(client, t, c_sales)


def test_trigger_config_from_and_to_must_both_match(client, fresh):
    t = fresh.admin
    sales = crm.default_pipeline(client, t)
    lead, qual, prop = (sid(sales, n) for n in ("Lead", "Qualified", "Proposal"))
    wf = crm.create_workflow(client, t, trigger_type="deal.stage_changed",
                             trigger_config={"from": lead, "to": prop},
                             actions=[tag_action("skipped-ahead")])
    c1, c2 = (crm.create_contact(client, t, first_name=n)["id"] for n in ("Step", "Jump"))
    stepwise = crm.create_deal(client, t, contact_id=c1)
    jumper = crm.create_deal(client, t, contact_id=c2)
    crm.move_deal(client, t, stepwise["id"], qual)   # from Lead, not to Proposal
    crm.move_deal(client, t, stepwise["id"], prop)   # to Proposal, not from Lead
    crm.move_deal(client, t, jumper["id"], prop)     # Lead -> Proposal
    run = only_run(client, t, wf["id"])
    assert run["trigger_payload"]["deal_id"] == jumper["id"], run
    assert crm.eventually(lambda: "skipped-ahead" in tags(client, t, c2), TIMEOUT, 0.2)
    assert "skipped-ahead" not in tags(client, t, c1)


@pytest.mark.parametrize("trigger,hit,misses", [("deal.won", "Won", ("Lost", "Qualified")),
                                                ("deal.lost", "Lost", ("Won", "Qualified"))])
def test_won_and_lost_triggers_run_only_for_that_outcome(client, fresh, trigger, hit, misses):
    t = fresh.admin
    sales = crm.default_pipeline(client, t)
    wf = crm.create_workflow(client, t, trigger_type=trigger, actions=[tag_action("closed")])
    contacts = [crm.create_contact(client, t, first_name=f"C{i}")["id"] for i in range(3)]
    deals = [crm.create_deal(client, t, contact_id=c)["id"] for c in contacts]
    for deal_id, stage in zip(deals, misses + (hit,)):
        crm.move_deal(client, t, deal_id, sid(sales, stage))
    run = only_run(client, t, wf["id"])
    assert (run["status"], run["trigger_type"]) == ("succeeded", trigger), run
    assert run["trigger_payload"]["deal_id"] == deals[2], run
    assert run["trigger_payload"]["to_stage_id"] == sid(sales, hit), run
    assert crm.eventually(lambda: "closed" in tags(client, t, contacts[2]), TIMEOUT, 0.2)
    assert all("closed" not in tags(client, t, c) for c in contacts[:2])


# ---- create_deal and move_deal actions ------------------------------------------------------


def test_create_deal_action_creates_a_deal_for_the_new_contact(client, fresh):
    t = fresh.admin
    sales = crm.default_pipeline(client, t)
    wf = crm.create_workflow(client, t, trigger_type="contact.created", actions=[
        {"type": "create_deal", "params": {"title": "{{trigger.contact.first_name}} plan",
                                           "amount": "250", "currency": "BRL"}}])
    contact = crm.create_contact(client, t, first_name="Ada")
    run = crm.get_run(client, t, crm.wait_runs(client, t, wf["id"], 1, TIMEOUT)[0]["id"])
    crm.assert_run(run, status="succeeded", trigger_type="contact.created")
    step = run["steps"][0]
    assert (step["type"], step["status"]) == ("create_deal", "succeeded"), step
    assert step["params"]["title"] == "Ada plan", step
    page = crm.list_page(client, t, crm.contact_deals_url(contact["id"]))
    crm.assert_page(page, total=1)
    deal = page["items"][0]
    crm.assert_deal(deal, title="Ada plan", amount="250.00", currency="BRL",
                    contact_id=contact["id"], pipeline_id=sales["id"],
                    stage_id=sid(sales, "Lead"), status="open")
    assert step["result"]["deal_id"] == deal["id"], step
    [created] = crm.deal_history(client, t, deal["id"])
    crm.assert_history_item(created, kind="created", to_stage_id=sid(sales, "Lead"),
                            to_amount="250.00", user_id=None, workflow_run_id=run["id"])


def test_move_deal_action_moves_the_triggering_deal_and_names_the_run(client, fresh):
    t = fresh.admin
    sales = crm.default_pipeline(client, t)
    lead, won = sid(sales, "Lead"), sid(sales, "Won")
    wf = crm.create_workflow(client, t, trigger_type="deal.created", actions=[
        {"type": "move_deal", "params": {"stage_id": won}}])
    deal = crm.create_deal(client, t, amount="75")
    assert deal["stage_id"] == lead

    def moved():
        got = crm.get_deal(client, t, deal["id"])
        return got if got["status"] == "won" else None

    got = crm.eventually(moved, TIMEOUT, 0.2)
    assert got, crm.list_runs(client, t, wf["id"])
    assert got["stage_id"] == won
    crm.assert_timestamp(got["closed_at"])
    run = crm.get_run(client, t, crm.wait_runs(client, t, wf["id"], 1, TIMEOUT)[0]["id"])
    crm.assert_run(run, status="succeeded", trigger_type="deal.created")
    result = run["steps"][0]["result"]
    assert (result["deal_id"], result["stage_id"], result["status"]) == (deal["id"], won, "won")
    created, change = crm.deal_history(client, t, deal["id"])
    crm.assert_history_item(created, kind="created", user_id=fresh.tenant.admin_id,
                            workflow_run_id=None)
    crm.assert_history_item(change, kind="stage_changed", from_stage_id=lead, to_stage_id=won,
                            user_id=None, workflow_run_id=run["id"])


def test_move_deal_to_a_stage_of_another_pipeline_fails_the_run(client, fresh):
    t = fresh.admin
    other = crm.create_pipeline(client, t, name="Elsewhere")
    wf = crm.create_workflow(client, t, trigger_type="deal.created", actions=[
        {"type": "move_deal", "params": {"stage_id": sid(other, "Won")}}, tag_action("never")])
    contact = crm.create_contact(client, t, first_name="Stays")
    deal = crm.create_deal(client, t, contact_id=contact["id"])
    run = crm.get_run(client, t, crm.wait_runs(client, t, wf["id"], 1, TIMEOUT)[0]["id"])
    crm.assert_run(run, status="failed")
    assert [(s["type"], s["status"]) for s in run["steps"]][:1] == [("move_deal", "failed")], run
    assert all(s["type"] != "add_tag" or s["status"] != "succeeded" for s in run["steps"]), run
    assert crm.get_deal(client, t, deal["id"]) == deal
    assert [h["kind"] for h in crm.deal_history(client, t, deal["id"])] == ["created"]
    assert "never" not in tags(client, t, contact["id"])


@pytest.mark.parametrize("action,param", [({"type": "create_deal", "params": {}}, "title"),
                                          ({"type": "create_deal",
                                            "params": {"amount": "10"}}, "title"),
                                          ({"type": "move_deal", "params": {}}, "stage_id")])
def test_deal_action_without_its_required_param_is_422(client, admin, action, param):
    before = crm.list_total(client, admin, crm.WORKFLOWS)
    resp = client.post(crm.WORKFLOWS, {"name": crm.unique("bad"), "trigger_type": "deal.created",
                                       "actions": [action]}, token=admin)
    crm.assert_validation(resp, (("body", "actions", 0, "params", param), "missing"))
    assert crm.list_total(client, admin, crm.WORKFLOWS) == before
