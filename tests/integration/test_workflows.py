"""Workflows (contract §7, docs/automation.md "Workflows", "Conditions", "Actions", "Runs"): the
definitions API (create, read, update, delete, list) with its validation, roles and tenant
isolation; record-event triggers end to end (status changes, tags, conditions, templates, a
failing action, the chain depth limit); manual and schedule triggers; http_request actions
against a local receiver (Standard Webhooks signature, failures, no redirects); delays; the
runs API.

Tests that create contacts use a tenant of their own (`fresh`): a tenant's record-event
workflows react to every contact of the tenant. Tenant A (`sess`) holds only definitions and
manual runs, never a contact."""
import copy
import json
import datetime
import secrets
import time

import pytest

import crm

PUBLIC_URL = "https://crm.example.test"
SERVER_ENV = {"CARECRM_PUBLIC_URL": PUBLIC_URL, "CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}

WORKFLOWS = crm.WORKFLOWS
NOWHERE_ID = crm.NOWHERE_ID
MISSING = crm.MISSING
UPDATE_METHODS = ["PUT", "PATCH"]
SECRET = "wf-secret-" + secrets.token_hex(8)  # 26 characters
RUN_TIMEOUT = 20.0
UTC = datetime.timezone.utc


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    """A tenant of its own (admin only) for a test whose workflows react to contact events."""
    return crm.tenant_session(client, cli_env)


# ---- helpers --------------------------------------------------------------------------------


def url(workflow_id) -> str:
    return crm.workflow_url(workflow_id)


def tag_action(tag, **params) -> dict:
    return {"type": "add_tag", "params": {"tag": tag, **params}}


def patch_contact(client, token, contact_id, body) -> dict:
    resp = client.patch(crm.contact_url(contact_id), body, token=token)
    return crm.assert_json_response(resp, 200)


def add_contact_tags(client, token, contact_id, *tags) -> None:
    resp = client.post(crm.contact_url(contact_id) + "/tags", {"tags": list(tags)}, token=token)
    crm.assert_json_response(resp, 200)


def tags(client, token, contact_id) -> list:
    return crm.get_contact(client, token, contact_id)["tags"]


def payload_contact_id(payload):
    if isinstance(payload, dict):
        if "contact_id" in payload:
            return payload["contact_id"]
        if isinstance(payload.get("contact"), dict):
            return payload["contact"].get("id")
    return None


def workflow_total(client, token) -> int:
    return crm.list_total(client, token, WORKFLOWS)


def rejected_at(resp, *prefixes, msg: str | None = None) -> list:
    """422 whose every item has a loc starting with one of `prefixes`, each prefix reported at
    least once; with `msg`, some item's msg contains it (case-insensitive)."""
    items = crm.validation_items(resp)
    locs = [tuple(i["loc"]) for i in items]
    for loc in locs:
        assert any(loc[:len(p)] == tuple(p) for p in prefixes), \
            f"unexpected loc {loc} (want under {prefixes}): {resp.describe()}"
    for p in prefixes:
        assert any(loc[:len(p)] == tuple(p) for loc in locs), \
            f"nothing reported under {p}: {resp.describe()}"
    if msg is not None:
        assert any(msg.lower() in i["msg"].lower() for i in items), \
            f"no message mentions {msg!r}: {resp.describe()}"
    return items


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(UTC)


def ts(dt: datetime.datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def cron_values(text: str, lo: int, hi: int) -> set:
    values = set()
    for part in text.split(","):
        rng, _, step = part.partition("/")
        step = int(step) if step else 1
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            a, b = (int(x) for x in rng.split("-"))
        else:
            a = b = int(rng)
        values.update(range(a, b + 1, step))
    return values


def cron_next(expr: str, after: datetime.datetime) -> datetime.datetime:
    """The first whole minute strictly after `after` matching `expr` (Vixie day rule); an
    implementation of its own, independent of the server's."""
    m, h, dom, mon, dow = expr.split()
    minutes, hours = sorted(cron_values(m, 0, 59)), sorted(cron_values(h, 0, 23))
    days, months = cron_values(dom, 1, 31), cron_values(mon, 1, 12)
    weekdays = {d % 7 for d in cron_values(dow, 0, 7)}
    start = after.astimezone(UTC).replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)
    day = start.date()
    for _ in range(5 * 366):
        dom_ok, dow_ok = day.day in days, (day.weekday() + 1) % 7 in weekdays
        day_ok = (dom_ok and dow_ok) if (dom == "*" or dow == "*") else (dom_ok or dow_ok)
        if day.month in months and day_ok:
            for hh in hours:
                for mm in minutes:
                    candidate = datetime.datetime(day.year, day.month, day.day, hh, mm,
                                                  tzinfo=UTC)
                    if candidate >= start:
                        return candidate
        day += datetime.timedelta(days=1)
    raise AssertionError(f"no fire time for {expr}")


def runs_stop_growing(client, token, workflow_ids, settle: float = 3.0,
                      timeout: float = 30.0) -> list:
    """Polls the runs of the workflows until their number has not changed for `settle` s and
    they are all finished; returns them."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        runs = [r for w in workflow_ids for r in crm.list_runs(client, token, w)]
        key = (len(runs), all(r["status"] in crm.FINISHED for r in runs))
        if key != last:
            last, since = key, time.monotonic()
        elif key[1] and time.monotonic() - since >= settle:
            return runs
        time.sleep(0.25)
    raise AssertionError(f"runs of {workflow_ids} kept changing for {timeout:.0f} s: {last}")


# ---- create and read ------------------------------------------------------------------------


def test_create_is_201_with_location_and_the_workflow_shape(client, admin):
    body = {"name": "Qualified follow-up", "description": "Tag qualified contacts",
            "trigger_type": "contact.status_changed",
            "trigger_config": {"from": "active", "to": "qualified"},
            "conditions": [{"field": "email", "op": "exists", "value": True}],
            "actions": [tag_action("vip"), {"type": "set_status", "params": {"status": "active"}}],
            "is_active": False, "webhook_secret": SECRET}
    resp = client.post(WORKFLOWS, body, token=admin)
    created = crm.assert_json_response(resp, 201)
    crm.assert_workflow(created, name=body["name"], description=body["description"],
                        trigger_type="contact.status_changed",
                        trigger_config=body["trigger_config"], conditions=body["conditions"],
                        actions=body["actions"], is_active=False, has_secret=True,
                        is_webhook_trigger=False, webhook_url=None, next_run_at=None)
    assert resp.header("Location") == url(created["id"]), resp.describe()
    assert SECRET.encode() not in resp.body, "the webhook secret was returned"
    assert crm.get_workflow(client, admin, created["id"]) == created


def test_defaults_on_create(client, admin):
    wf = crm.create_workflow(client, admin, name="Defaults only", trigger_type="manual")
    crm.assert_workflow(wf, name="Defaults only", description=None, trigger_config={},
                        conditions=[], actions=[], is_active=True, has_secret=False,
                        is_webhook_trigger=False, webhook_url=None, next_run_at=None)
    assert wf["created_at"] == wf["updated_at"]


def test_webhook_workflow_has_the_absolute_webhook_url(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="webhook")
    assert wf["is_webhook_trigger"] is True
    assert wf["webhook_url"] == f"{PUBLIC_URL}/api/v1/webhooks/{wf['id']}", wf
    assert crm.get_workflow(client, admin, wf["id"])["webhook_url"] == wf["webhook_url"]


def test_the_secret_is_never_returned_anywhere(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="webhook", webhook_secret=SECRET)
    assert wf["has_secret"] is True
    responses = [client.get(url(wf["id"]), token=admin),
                 client.get(crm.with_query(WORKFLOWS, {"per_page": 100}), token=admin),
                 client.patch(url(wf["id"]), {"description": "changed"}, token=admin),
                 client.put(url(wf["id"]), {"name": "renamed " + wf["name"]}, token=admin),
                 client.get(crm.webhook_info_url(wf["id"]), token=admin)]
    for resp in responses:
        assert resp.status == 200, resp.describe()
        assert SECRET.encode() not in resp.body, f"secret leaked: {resp.describe()}"
    assert crm.get_workflow(client, admin, wf["id"])["has_secret"] is True


@pytest.mark.parametrize("expr", ["0 0 1 1 *", "*/15 * * * *", "30 6 * * 0", "30 6 * * 7",
                                  "0 12 13 * 5", "0 9-17/4 * * 1-5", "5,35 1 * 2,8 *",
                                  "0 0 29 2 *"])
def test_cron_schedule_plans_the_next_fire_time(client, admin, expr):
    before = utc_now()
    wf = crm.create_workflow(client, admin, trigger_type="schedule", trigger_config={"cron": expr},
                             is_active=False)
    assert wf["next_run_at"] is None, "an inactive schedule has no next_run_at"
    resp = client.patch(url(wf["id"]), {"is_active": True}, token=admin)
    after = utc_now()
    body = crm.assert_json_response(resp, 200)
    crm.assert_workflow(body, is_active=True)
    want = {ts(cron_next(expr, before)), ts(cron_next(expr, after))}
    assert body["next_run_at"] in want, f"{expr}: want {want}, got {body['next_run_at']}"
    assert crm.get_workflow(client, admin, wf["id"])["next_run_at"] == body["next_run_at"]
    crm.assert_no_content(client.delete(url(wf["id"]), token=admin))


def test_interval_schedule_plans_within_the_interval_and_a_change_replans(client, admin):
    before = utc_now()
    wf = crm.create_workflow(client, admin, trigger_type="schedule",
                             trigger_config={"interval_seconds": 31536000, "payload": {"a": 1}})
    after = utc_now()
    crm.assert_workflow(wf, trigger_config={"interval_seconds": 31536000, "payload": {"a": 1}})
    next_run = crm.parse_timestamp(wf["next_run_at"])
    assert before - datetime.timedelta(seconds=1) <= next_run <= \
        after + datetime.timedelta(seconds=31536001), wf
    before = utc_now()
    body = crm.assert_json_response(client.patch(url(wf["id"]), {
        "trigger_config": {"cron": "0 0 1 1 *"}}, token=admin), 200)
    after = utc_now()
    assert body["next_run_at"] in {ts(cron_next("0 0 1 1 *", before)),
                                   ts(cron_next("0 0 1 1 *", after))}, body
    body = crm.assert_json_response(client.patch(url(wf["id"]), {"is_active": False},
                                                 token=admin), 200)
    assert body["next_run_at"] is None, body
    crm.assert_no_content(client.delete(url(wf["id"]), token=admin))


# ---- update and delete ----------------------------------------------------------------------


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_changes_only_the_fields_sent(client, admin, method):
    wf = crm.create_workflow(client, admin, name="Partial", description="first",
                             trigger_type="manual", conditions=[
                                 {"field": "x", "op": "eq", "value": 1}],
                             actions=[tag_action("a")], webhook_secret=SECRET)
    body = crm.assert_json_response(client.request(method, url(wf["id"]),
                                                   {"description": "second"}, token=admin), 200)
    crm.assert_workflow(body)
    assert body["updated_at"] >= wf["updated_at"]
    want = dict(wf, description="second", updated_at=body["updated_at"])
    assert body == want
    assert crm.get_workflow(client, admin, wf["id"]) == body

    actions = [tag_action("b"), {"type": "delay", "params": {"minutes": 5}}]
    body = crm.assert_json_response(client.request(method, url(wf["id"]), {
        "actions": actions, "is_active": False, "trigger_type": "webhook"}, token=admin), 200)
    crm.assert_workflow(body, name="Partial", description="second", actions=actions,
                        is_active=False, trigger_type="webhook", is_webhook_trigger=True,
                        conditions=wf["conditions"], has_secret=True)
    assert body["webhook_url"] == f"{PUBLIC_URL}/api/v1/webhooks/{wf['id']}"
    assert crm.get_workflow(client, admin, wf["id"]) == body


def test_the_secret_can_be_replaced_and_removed_with_null(client, admin):
    """Removed with null from a workflow that is not a webhook's; a webhook workflow always has
    one: null draws a new one, shown once in that answer (issue 31)."""
    wf = crm.create_workflow(client, admin, trigger_type="webhook", webhook_secret=SECRET)
    body = crm.assert_json_response(client.patch(url(wf["id"]), {
        "webhook_secret": "another-secret-of-enough-length"}, token=admin), 200)
    crm.assert_workflow(body, has_secret=True)
    body = crm.assert_json_response(client.patch(url(wf["id"]), {"webhook_secret": None},
                                                 token=admin), 200)
    crm.assert_workflow(body, secret_shown=True, has_secret=True)
    assert crm.get_workflow(client, admin, wf["id"])["has_secret"] is True
    info = crm.assert_json_response(client.get(crm.webhook_info_url(wf["id"]), token=admin), 200)
    assert info["has_secret"] is True
    manual = crm.create_workflow(client, admin, trigger_type="manual", webhook_secret=SECRET)
    body = crm.assert_json_response(client.patch(url(manual["id"]), {"webhook_secret": None},
                                                 token=admin), 200)
    crm.assert_workflow(body, has_secret=False)
    assert crm.get_workflow(client, admin, manual["id"])["has_secret"] is False
    info = crm.assert_json_response(client.get(crm.webhook_info_url(manual["id"]), token=admin),
                                    200)
    assert info["has_secret"] is False


def test_delete_is_204_and_then_the_workflow_and_its_runs_are_404(client, admin):
    wf = crm.create_workflow(client, admin)
    run_id = crm.start_run(client, admin, wf["id"])
    crm.wait_run(client, admin, run_id)
    total = workflow_total(client, admin)
    crm.assert_no_content(client.delete(url(wf["id"]), token=admin))
    for method, path in [("GET", url(wf["id"])), ("PATCH", url(wf["id"])),
                         ("DELETE", url(wf["id"])), ("GET", crm.workflow_runs_url(wf["id"])),
                         ("POST", crm.workflow_run_now_url(wf["id"])),
                         ("GET", crm.webhook_info_url(wf["id"])), ("GET", crm.run_url(run_id))]:
        body = {"name": "x"} if method == "PATCH" else None
        crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")
    assert workflow_total(client, admin) == total - 1


# ---- list -----------------------------------------------------------------------------------


def test_list_pages_newest_first_and_filters(client, fresh):
    t = fresh.admin
    w1 = crm.create_workflow(client, t, trigger_type="manual")
    w2 = crm.create_workflow(client, t, trigger_type="webhook")
    w3 = crm.create_workflow(client, t, trigger_type="webhook", is_active=False)
    w4 = crm.create_workflow(client, t, trigger_type="contact.created", is_active=False)
    w5 = crm.create_workflow(client, t, trigger_type="schedule", is_active=False,
                             trigger_config={"interval_seconds": 60})
    # The create answers of w2 and w3 showed their drawn secrets; the list never does.
    everything = [crm.with_override(w, {"webhook_secret": crm.MISSING})
                  for w in (w5, w4, w3, w2, w1)]

    def page(params):
        body = crm.list_page(client, t, WORKFLOWS, params)
        crm.assert_page(body)
        for item in body["items"]:
            crm.assert_workflow(item)
        return body

    body = page({"per_page": 2})
    assert (body["total"], body["pages"], body["page"], body["per_page"]) == (5, 3, 1, 2), body
    assert body["items"] == everything[:2]
    assert page({"per_page": 2, "page": 2})["items"] == everything[2:4]
    assert page({"per_page": 2, "page": 3})["items"] == everything[4:]
    assert page({"per_page": 2, "page": 4})["items"] == []
    assert page({})["items"] == everything
    assert [i["id"] for i in page({"trigger_type": "webhook"})["items"]] == [w3["id"], w2["id"]]
    assert [i["id"] for i in page({"is_active": "false"})["items"]] == \
        [w5["id"], w4["id"], w3["id"]]
    assert [i["id"] for i in page({"is_active": "true"})["items"]] == [w2["id"], w1["id"]]
    both = page({"trigger_type": "webhook", "is_active": "false"})
    assert [i["id"] for i in both["items"]] == [w3["id"]] and both["total"] == 1
    empty = page({"trigger_type": "deal.created"})
    assert empty["items"] == [] and empty["total"] == 0 and empty["pages"] == 0


@pytest.mark.parametrize("params,loc", [
    ({"page": 0}, ("query", "page")),
    ({"per_page": 0}, ("query", "per_page")),
    ({"per_page": 101}, ("query", "per_page")),
    ({"trigger_type": "contact.exploded"}, ("query", "trigger_type")),
    ({"is_active": "maybe"}, ("query", "is_active")),
])
def test_invalid_list_parameters_are_422(client, admin, params, loc):
    crm.assert_validation_locs(client.get(crm.with_query(WORKFLOWS, params), token=admin), loc)


# ---- validation -----------------------------------------------------------------------------


class At:
    """Expected 422: every item under one of these loc prefixes (and each prefix reported);
    optionally some message containing `msg`."""

    def __init__(self, *prefixes, msg=None):
        self.prefixes, self.msg = prefixes, msg


def action(type_, **params) -> list:
    return [{"type": type_, "params": params}]


def sched(**config) -> dict:
    return {"trigger_type": "schedule", "trigger_config": config, "is_active": False}


CFG = ("body", "trigger_config")
A0P = ("body", "actions", 0, "params")

INVALID_CREATE = [
    ("name missing", {"name": MISSING}, [(("body", "name"), "missing")]),
    ("name empty", {"name": ""}, [(("body", "name"), "string_too_short")]),
    ("name blank", {"name": "   "}, [(("body", "name"), "string_too_short")]),
    ("name 201", {"name": "n" * 201}, [(("body", "name"), "string_too_long")]),
    ("name int", {"name": 5}, [(("body", "name"), "string_type")]),
    ("description 2001", {"description": "d" * 2001},
     [(("body", "description"), "string_too_long")]),
    ("trigger_type missing", {"trigger_type": MISSING}, [(("body", "trigger_type"), "missing")]),
    ("trigger_type unknown", {"trigger_type": "contact.exploded"},
     [(("body", "trigger_type"), "enum")]),
    ("trigger_type capitalised", {"trigger_type": "Manual"}, [(("body", "trigger_type"), "enum")]),
    ("trigger_type empty", {"trigger_type": ""}, [(("body", "trigger_type"), "enum")]),
    ("is_active string", {"is_active": "perhaps"}, At(("body", "is_active"))),
    ("webhook_secret 15", {"webhook_secret": "s" * 15},
     [(("body", "webhook_secret"), "string_too_short")]),
    ("webhook_secret 257", {"webhook_secret": "s" * 257},
     [(("body", "webhook_secret"), "string_too_long")]),
    ("webhook_secret int", {"webhook_secret": 1234567890123456789}, At(("body", "webhook_secret"))),
    ("id", {"id": 1}, [(("body", "id"), "extra_forbidden")]),
    ("created_at", {"created_at": "2020-01-01T00:00:00.000000Z"},
     [(("body", "created_at"), "extra_forbidden")]),
    ("has_secret", {"has_secret": True}, [(("body", "has_secret"), "extra_forbidden")]),
    ("unknown key", {"colour": "red"}, [(("body", "colour"), "extra_forbidden")]),
    # trigger_config
    ("tag_added tag of 51 characters", {"trigger_type": "contact.tag_added",
                                        "trigger_config": {"tag": "t" * 51}},
     [(("body", "trigger_config", "tag"), "string_too_long")]),
    ("extra key in manual config", {"trigger_config": {"foo": 1}},
     [(("body", "trigger_config", "foo"), "extra_forbidden")]),
    ("to on contact.created", {"trigger_type": "contact.created", "is_active": False,
                               "trigger_config": {"to": "qualified"}},
     [(("body", "trigger_config", "to"), "extra_forbidden")]),
    ("extra key in status_changed config", {"trigger_type": "contact.status_changed",
                                            "is_active": False,
                                            "trigger_config": {"to": "qualified", "when": 1}},
     [(("body", "trigger_config", "when"), "extra_forbidden")]),
    ("unknown status in to", {"trigger_type": "contact.status_changed", "is_active": False,
                              "trigger_config": {"to": "archived"}}, At(CFG + ("to",))),
    ("trigger_config list", {"trigger_config": []}, At(CFG)),
    ("schedule without interval or cron", sched(), At(CFG)),
    ("schedule with interval and cron", sched(interval_seconds=60, cron="* * * * *"), At(CFG)),
    ("interval 4", sched(interval_seconds=4), At(CFG + ("interval_seconds",))),
    ("interval 0", sched(interval_seconds=0), At(CFG + ("interval_seconds",))),
    ("interval over a year", sched(interval_seconds=31536001), At(CFG + ("interval_seconds",))),
    ("interval string", sched(interval_seconds="60"), At(CFG + ("interval_seconds",))),
    ("interval fraction", sched(interval_seconds=5.5), At(CFG + ("interval_seconds",))),
    ("cron four fields", sched(cron="* * * *"), At(CFG + ("cron",))),
    ("cron six fields", sched(cron="0 * * * * *"), At(CFG + ("cron",))),
    ("cron minute 60", sched(cron="60 * * * *"), At(CFG + ("cron",))),
    ("cron hour 24", sched(cron="0 24 * * *"), At(CFG + ("cron",))),
    ("cron day 32", sched(cron="0 0 32 * *"), At(CFG + ("cron",))),
    ("cron day 0", sched(cron="0 0 0 * *"), At(CFG + ("cron",))),
    ("cron month 13", sched(cron="0 0 1 13 *"), At(CFG + ("cron",))),
    ("cron weekday 8", sched(cron="0 0 * * 8"), At(CFG + ("cron",))),
    ("cron step 0", sched(cron="*/0 * * * *"), At(CFG + ("cron",))),
    ("cron reversed range", sched(cron="0 5-3 * * *"), At(CFG + ("cron",))),
    ("cron words", sched(cron="every minute"), At(CFG + ("cron",))),
    ("cron empty", sched(cron=""), At(CFG + ("cron",))),
    ("schedule payload string", sched(interval_seconds=60, payload="x"),
     At(CFG + ("payload",))),
    ("schedule extra key", sched(interval_seconds=60, every="day"),
     [(("body", "trigger_config", "every"), "extra_forbidden")]),
    # conditions
    ("conditions object", {"conditions": {"field": "x", "op": "eq", "value": 1}},
     At(("body", "conditions"))),
    ("condition op unknown", {"conditions": [{"field": "status", "op": "like", "value": "a"}]},
     [(("body", "conditions", 0, "op"), "enum")]),
    ("condition op missing", {"conditions": [{"field": "status", "value": "a"}]},
     At(("body", "conditions", 0))),
    ("condition field missing", {"conditions": [{"op": "eq", "value": "a"}]},
     At(("body", "conditions", 0))),
    ("condition extra key", {"conditions": [{"field": "x", "op": "eq", "value": 1, "or": 2}]},
     At(("body", "conditions", 0))),
    ("second condition bad", {"conditions": [{"field": "x", "op": "eq", "value": 1},
                                             {"field": "y", "op": "~", "value": 1}]},
     At(("body", "conditions", 1))),
    ("51 conditions", {"conditions": [{"field": "x", "op": "eq", "value": i} for i in range(51)]},
     At(("body", "conditions"))),
    # actions
    ("actions object", {"actions": {"type": "add_tag"}}, At(("body", "actions"))),
    ("action type unknown", {"actions": action("send_email", to="x")},
     [(("body", "actions", 0, "type"), "enum")]),
    ("action type missing", {"actions": [{"params": {"tag": "x"}}]}, At(("body", "actions", 0))),
    ("third action bad", {"actions": [tag_action("a"), tag_action("b"),
                                      {"type": "explode", "params": {}}]},
     At(("body", "actions", 2))),
    ("51 actions", {"actions": [tag_action(f"t{i}") for i in range(51)]}, At(("body", "actions"))),
    ("update_contact without fields", {"actions": action("update_contact")}, At(A0P)),
    ("update_contact fields string", {"actions": action("update_contact", fields="x")},
     At(A0P)),
    ("update_contact unknown field", {"actions": action("update_contact",
                                                        fields={"nickname": "Bob"})}, At(A0P)),
    ("update_contact id field", {"actions": action("update_contact", fields={"id": 5})},
     At(A0P)),
    ("add_tag without tag", {"actions": action("add_tag")}, At(A0P)),
    # A literal tag is a contact's tag (at most 50 characters): one a run could never add is
    # refused when the workflow is saved, not when it runs.
    ("add_tag of 51 characters", {"actions": action("add_tag", tag="t" * 51)},
     [((*A0P, "tag"), "string_too_long")]),
    ("set_status without status", {"actions": action("set_status")}, At(A0P)),
    ("http_request ftp url", {"actions": action("http_request", url="ftp://example.com/x")},
     At(A0P)),
    ("http_request without url", {"actions": action("http_request", method="POST")}, At(A0P)),
    ("http_request url without host", {"actions": action("http_request", url="http://")},
     At(A0P)),
    ("http_request method TRACE", {"actions": action("http_request", url="http://example.com",
                                                     method="TRACE")}, At(A0P)),
    ("http_request timeout 31", {"actions": action("http_request", url="http://example.com",
                                                   timeout_seconds=31)}, At(A0P)),
    ("http_request timeout 0", {"actions": action("http_request", url="http://example.com",
                                                  timeout_seconds=0)}, At(A0P)),
    ("http_request 21 headers", {"actions": action(
        "http_request", url="http://example.com",
        headers={f"X-H{i}": "v" for i in range(21)})}, At(A0P)),
    ("http_request header not a string", {"actions": action(
        "http_request", url="http://example.com", headers={"X-N": 5})}, At(A0P)),
    ("delay over 30 days in seconds", {"actions": action("delay", seconds=30 * 86400 + 1)},
     At(A0P)),
    ("delay over 30 days in minutes", {"actions": action("delay", minutes=30 * 1440 + 1)},
     At(A0P)),
    ("delay over 30 days in hours", {"actions": action("delay", hours=721)}, At(A0P)),
    ("delay with two units", {"actions": action("delay", seconds=5, minutes=1)}, At(A0P)),
    ("delay without a unit", {"actions": action("delay")}, At(A0P)),
    ("delay 0", {"actions": action("delay", seconds=0)}, At(A0P)),
    ("delay negative", {"actions": action("delay", minutes=-1)}, At(A0P)),
    ("delay string", {"actions": action("delay", seconds="10")}, At(A0P)),
    ("delay days", {"actions": action("delay", days=1)}, At(A0P)),
    # several at once
    ("every failure at once", {"name": MISSING, "trigger_type": "nope",
                               "webhook_secret": "short", "id": 3},
     [(("body", "name"), "missing"), (("body", "trigger_type"), "enum"),
      (("body", "webhook_secret"), "string_too_short"), (("body", "id"), "extra_forbidden")]),
    ("condition and action at once", {"conditions": [{"field": "x", "op": "like", "value": 1}],
                                      "actions": [tag_action("ok"),
                                                  {"type": "nope", "params": {}}]},
     At(("body", "conditions", 0), ("body", "actions", 1))),
]


def build_body(override: dict) -> dict:
    return crm.with_override({"name": crm.unique("invalid"), "trigger_type": "manual"}, override)


def check_rejection(resp, expected) -> None:
    if isinstance(expected, At):
        rejected_at(resp, *expected.prefixes, msg=expected.msg)
    else:
        crm.assert_validation(resp, *expected)


@pytest.mark.parametrize("override,expected", [c[1:] for c in INVALID_CREATE],
                         ids=[c[0] for c in INVALID_CREATE])
def test_invalid_create_is_422_and_stores_nothing(client, admin, override, expected):
    before = workflow_total(client, admin)
    check_rejection(client.post(WORKFLOWS, build_body(override), token=admin), expected)
    assert workflow_total(client, admin) == before, "a rejected workflow was stored"


def test_ai_reply_params_are_checked_and_nothing_is_stored(client, admin):
    before = workflow_total(client, admin)
    body = build_body({"actions": [tag_action("ok"),
                                   {"type": "ai_reply", "params": {"agent_id": "seven"}}]})
    rejected_at(client.post(WORKFLOWS, body, token=admin),
                ("body", "actions", 1, "params", "agent_id"))
    assert workflow_total(client, admin) == before


@pytest.mark.parametrize("raw", ['{"name": "x", "trigger_type": ', "name=x", ""])
def test_malformed_json_is_422_json_invalid(client, admin, raw):
    before = workflow_total(client, admin)
    resp = client.post(WORKFLOWS, raw=raw, token=admin)
    if raw:
        crm.assert_validation(resp, (("body",), "json_invalid"))
    else:
        crm.validation_items(resp)  # no body at all: some 422
    assert workflow_total(client, admin) == before


VALID_EDGES = [
    ("name 200", {"name": "n" * 200}),
    ("name 1", {"name": "n"}),
    ("description 2000", {"description": "d" * 2000}),
    ("description null", {"description": None}),
    ("secret 16", {"webhook_secret": "s" * 16}),
    ("secret 256", {"webhook_secret": "s" * 256}),
    ("secret null", {"webhook_secret": None}),
    ("50 conditions", {"conditions": [{"field": "x", "op": "neq", "value": i}
                                      for i in range(50)]}),
    ("50 actions", {"actions": [tag_action(f"t{i}") for i in range(50)]}),
    ("every op", {"conditions": [
        {"field": "a", "op": "eq", "value": 1}, {"field": "b", "op": "neq", "value": "x"},
        {"field": "c", "op": "contains", "value": "y"}, {"field": "d", "op": "in",
                                                          "value": [1, 2]},
        {"field": "e", "op": "gt", "value": 3}, {"field": "f", "op": "lt", "value": "z"},
        {"field": "g", "op": "exists", "value": False},
        {"field": "status", "op": "changed_to", "value": "qualified"}]}),
    ("every available action", {"actions": [
        {"type": "update_contact", "params": {"fields": {"last_name": "X",
                                                         "custom_fields": {"k": "v"}}}},
        {"type": "update_contact", "params": {"contact_id": "{{trigger.contact_id}}",
                                              "fields": {"email": "{{trigger.email}}"}}},
        {"type": "set_status", "params": {"status": "qualified"}},
        {"type": "add_tag", "params": {"tags": ["a", "b"]}},
        {"type": "remove_tag", "params": {"tag": "a", "contact_id": 5}},
        {"type": "http_request", "params": {"url": "https://example.com/hook", "method": "PUT",
                                            "headers": {"X-A": "1"}, "body": {"x": [1]},
                                            "timeout_seconds": 30}},
        {"type": "http_request", "params": {"url": "http://example.com", "method": "GET",
                                            "timeout_seconds": 1}},
        {"type": "delay", "params": {"seconds": 1}},
        {"type": "delay", "params": {"hours": 720}},
        {"type": "delay", "params": {"minutes": 43200}},
        {"type": "delay", "params": {"seconds": 2592000}}]}),
    ("20 headers", {"actions": action("http_request", url="http://example.com",
                                      headers={f"X-H{i}": "v" for i in range(20)})}),
    ("interval 5", sched(interval_seconds=5)),
    ("interval a year", sched(interval_seconds=31536000)),
    ("cron with lists, ranges, steps", sched(cron="0,30 8-18/2 1-15 1,6-12 1-5")),
    ("schedule payload", sched(cron="0 0 * * *", payload={"kind": "nightly"})),
    ("status_changed from and to", {"trigger_type": "contact.status_changed", "is_active": False,
                                    "trigger_config": {"from": "active", "to": "inactive"}}),
    ("tag_added tag", {"trigger_type": "contact.tag_added", "is_active": False,
                       "trigger_config": {"tag": "vip"}}),
]


def write_only_headers(actions):
    """The actions as the API shows them: http_request header values are write-only (null)."""
    shown = copy.deepcopy(actions)
    for a in shown:
        if a.get("type") == "http_request" and "headers" in a.get("params", {}):
            a["params"]["headers"] = {k: None for k in a["params"]["headers"]}
    return shown


@pytest.mark.parametrize("override", [c[1] for c in VALID_EDGES], ids=[c[0] for c in VALID_EDGES])
def test_valid_edges_are_accepted_and_stored_as_sent(client, admin, override):
    body = build_body(override)
    wf = crm.create_workflow(client, admin, **body)
    for key in ("name", "description", "conditions", "actions", "trigger_config"):
        if key in override:
            want = write_only_headers(override[key]) if key == "actions" else override[key]
            assert wf[key] == want, f"{key}: sent {override[key]!r}, got {wf[key]!r}"
    assert wf["has_secret"] is (override.get("webhook_secret") is not None)
    assert crm.get_workflow(client, admin, wf["id"]) == wf


@pytest.fixture(scope="module")
def target(client, admin) -> dict:
    """A workflow of tenant A that only refused updates address."""
    return crm.create_workflow(client, admin, name="Target", trigger_type="manual",
                               actions=[tag_action("t")], webhook_secret=SECRET)


INVALID_UPDATE = [
    ("name empty", {"name": ""}, [(("body", "name"), "string_too_short")]),
    ("trigger_type unknown", {"trigger_type": "nope"}, [(("body", "trigger_type"), "enum")]),
    ("extra key in trigger_config", {"trigger_config": {"foo": 1}},
     [(("body", "trigger_config", "foo"), "extra_forbidden")]),
    ("condition op", {"conditions": [{"field": "x", "op": "like", "value": 1}]},
     [(("body", "conditions", 0, "op"), "enum")]),
    ("ai_reply with an unknown param", {"actions": [{"type": "ai_reply", "params": {"x": 1}}]},
     [(("body", "actions", 0, "params", "x"), "extra_forbidden")]),
    ("deal action without its required params", {"actions": [{"type": "create_deal", "params": {}}]},
     [(("body", "actions", 0, "params", "title"), "missing")]),
    ("secret too short", {"webhook_secret": "short"},
     [(("body", "webhook_secret"), "string_too_short")]),
    ("id", {"id": 5}, [(("body", "id"), "extra_forbidden")]),
    ("valid name with an invalid field", {"name": "Would change", "actions": [
        {"type": "delay", "params": {"hours": 9999}}]}, At(A0P)),
]


@pytest.mark.parametrize("method", UPDATE_METHODS)
@pytest.mark.parametrize("body,expected", [c[1:] for c in INVALID_UPDATE],
                         ids=[c[0] for c in INVALID_UPDATE])
def test_invalid_update_is_422_and_changes_nothing(client, admin, target, method, body, expected):
    check_rejection(client.request(method, url(target["id"]), body, token=admin), expected)
    assert crm.get_workflow(client, admin, target["id"]) == target


# ---- authentication, roles, tenants ---------------------------------------------------------


def routes(workflow_id, run_id) -> dict:
    return {
        "list": ("GET", WORKFLOWS, None),
        "create": ("POST", WORKFLOWS, {"name": crm.unique("role"), "trigger_type": "manual"}),
        "get": ("GET", url(workflow_id), None),
        "put": ("PUT", url(workflow_id), {"description": "by role"}),
        "patch": ("PATCH", url(workflow_id), {"description": "by role"}),
        "delete": ("DELETE", url(workflow_id), None),
        "runs": ("GET", crm.workflow_runs_url(workflow_id), None),
        "run": ("POST", crm.workflow_run_now_url(workflow_id), None),
        "run_get": ("GET", crm.run_url(run_id), None),
        "info": ("GET", crm.webhook_info_url(workflow_id), None),
    }


ROUTES = list(routes(1, 1))
ITEM_ROUTES = [r for r in ROUTES if r not in ("list", "create")]
MANAGER_STATUS = {"list": 200, "create": 201, "get": 200, "put": 200, "patch": 200, "delete": 204,
                  "runs": 200, "run": 202, "run_get": 200, "info": 200}


def manual_with_run(client, token) -> tuple[dict, int]:
    wf = crm.create_workflow(client, token, trigger_type="manual", description="original")
    run_id = crm.start_run(client, token, wf["id"])
    crm.wait_run(client, token, run_id)
    return crm.get_workflow(client, token, wf["id"]), run_id


@pytest.mark.parametrize("route", ROUTES)
def test_routes_without_token_are_401(client, admin, route):
    wf, run_id = manual_with_run(client, admin)
    method, path, body = routes(wf["id"], run_id)[route]
    crm.assert_error(client.request(method, path, body), 401, "INVALID_CREDENTIALS")
    assert crm.get_workflow(client, admin, wf["id"]) == wf


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("role", ["viewer", "agent"])
def test_viewers_and_agents_are_403_and_change_nothing(client, sess, role, route):
    admin = sess.admin
    wf, run_id = manual_with_run(client, admin)
    total = workflow_total(client, admin)
    method, path, body = routes(wf["id"], run_id)[route]
    crm.assert_error(client.request(method, path, body, token=sess.tokens[role]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_workflow(client, admin, wf["id"]) == wf
    assert workflow_total(client, admin) == total
    assert len(crm.list_runs(client, admin, wf["id"])) == 1


@pytest.mark.parametrize("route", ROUTES)
def test_managers_manage_workflows(client, sess, route):
    admin, manager = sess.admin, sess.tokens["manager"]
    wf, run_id = manual_with_run(client, admin)
    method, path, body = routes(wf["id"], run_id)[route]
    resp = client.request(method, path, body, token=manager)
    want = MANAGER_STATUS[route]
    if want == 204:
        crm.assert_no_content(resp)
        crm.assert_error(client.get(url(wf["id"]), token=admin), 404, "NOT_FOUND")
        return
    got = crm.assert_json_response(resp, want)
    if route in ("get",):
        assert got == wf
    elif route in ("put", "patch"):
        assert crm.get_workflow(client, admin, wf["id"])["description"] == "by role"
    elif route == "create":
        crm.assert_workflow(got, name=body["name"])
        assert crm.get_workflow(client, admin, got["id"]) == got
    elif route == "run":
        crm.wait_run(client, admin, got["run_id"])
        assert len(crm.list_runs(client, admin, wf["id"])) == 2
    elif route == "run_get":
        crm.assert_run(got, id=run_id, workflow_id=wf["id"])
    elif route == "runs":
        assert [r["id"] for r in got["items"]] == [run_id]


@pytest.fixture(scope="module")
def workflow_b(client, sess_b) -> dict:
    """A manual workflow of tenant B with one finished run."""
    wf, run_id = manual_with_run(client, sess_b.admin)
    return {"workflow": wf, "run_id": run_id}


@pytest.mark.parametrize("route", ITEM_ROUTES)
@pytest.mark.parametrize("role", ["admin", "manager"])
def test_another_tenants_workflow_is_403_and_unchanged(client, sess, sess_b, workflow_b, role,
                                                       route):
    wf, run_id = workflow_b["workflow"], workflow_b["run_id"]
    method, path, body = routes(wf["id"], run_id)[route]
    crm.assert_error(client.request(method, path, body, token=sess.tokens[role]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_workflow(client, sess_b.admin, wf["id"]) == wf
    assert [r["id"] for r in crm.list_runs(client, sess_b.admin, wf["id"])] == [run_id]


def test_lists_never_show_another_tenants_workflows(client, admin, workflow_b):
    ids = {w["id"] for w in crm.list_all(client, admin, WORKFLOWS)}
    assert workflow_b["workflow"]["id"] not in ids


@pytest.mark.parametrize("route", ITEM_ROUTES)
def test_ids_of_no_tenant_are_404(client, admin, route):
    method, path, body = routes(NOWHERE_ID, NOWHERE_ID)[route]
    crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")


# ---- record events end to end ---------------------------------------------------------------


def test_status_change_to_qualified_tags_the_contact(client, fresh):
    t = fresh.admin
    wf = crm.create_workflow(client, t, trigger_type="contact.status_changed",
                             trigger_config={"to": "qualified"}, actions=[tag_action("vip")])
    c = crm.create_contact(client, t, first_name="Quinn", tags=["lead"])
    patch_contact(client, t, c["id"], {"status": "inactive"})  # another status: no run
    patch_contact(client, t, c["id"], {"status": "qualified"})
    assert crm.eventually(lambda: "vip" in tags(client, t, c["id"]), RUN_TIMEOUT, 0.2), \
        f"the contact was not tagged: {crm.list_runs(client, t, wf['id'])}"
    runs = crm.wait_runs(client, t, wf["id"], 1)
    # The outbox is taken in order: the change to inactive was seen before, and made no run.
    assert len(runs) == 1, runs
    run = crm.get_run(client, t, runs[0]["id"])
    crm.assert_run(run, workflow_id=wf["id"], status="succeeded",
                   trigger_type="contact.status_changed", depth=0, conditions_met=True,
                   error=None)
    assert payload_contact_id(run["trigger_payload"]) == c["id"], run
    assert run["trigger_payload"]["contact"]["status"] == "qualified", run
    assert len(run["steps"]) == 1, run
    step = run["steps"][0]
    crm.assert_step(step, index=0)
    assert (step["type"], step["status"], step["params"], step["error"]) == \
        ("add_tag", "succeeded", {"tag": "vip"}, None), step
    crm.assert_timestamp(step["started_at"])
    crm.assert_timestamp(step["finished_at"])
    assert run["created_at"] <= run["started_at"] <= run["finished_at"], run
    assert sorted(tags(client, t, c["id"])) == ["lead", "vip"]


def test_status_changed_from_and_to_filters(client, fresh):
    t = fresh.admin
    wf = crm.create_workflow(client, t, trigger_type="contact.status_changed",
                             trigger_config={"from": "inactive", "to": "active"},
                             actions=[tag_action("welcome-back")])
    c = crm.create_contact(client, t, first_name="Fiona")  # active
    patch_contact(client, t, c["id"], {"status": "qualified"})   # active -> qualified: no
    patch_contact(client, t, c["id"], {"status": "inactive"})    # qualified -> inactive: no
    patch_contact(client, t, c["id"], {"status": "active"})      # inactive -> active: yes
    runs = crm.wait_runs(client, t, wf["id"], 1)
    assert len(runs) == 1 and runs[0]["status"] == "succeeded", runs
    assert crm.eventually(lambda: "welcome-back" in tags(client, t, c["id"]), RUN_TIMEOUT)


def test_tag_added_trigger_chains_into_a_status_changed_workflow(client, fresh):
    t = fresh.admin
    promote = crm.create_workflow(client, t, trigger_type="contact.tag_added",
                                  trigger_config={"tag": "promote"},
                                  actions=[{"type": "set_status",
                                            "params": {"status": "qualified"}}])
    tagger = crm.create_workflow(client, t, trigger_type="contact.status_changed",
                                 trigger_config={"to": "qualified"}, actions=[tag_action("vip")])
    c = crm.create_contact(client, t, first_name="Chain")
    add_contact_tags(client, t, c["id"], "other")  # another tag: no run
    add_contact_tags(client, t, c["id"], "promote")

    def done():
        contact = crm.get_contact(client, t, c["id"])
        return contact["status"] == "qualified" and "vip" in contact["tags"]

    assert crm.eventually(done, RUN_TIMEOUT, 0.2), (crm.get_contact(client, t, c["id"]),
                                                    crm.list_runs(client, t, promote["id"]),
                                                    crm.list_runs(client, t, tagger["id"]))
    first = crm.wait_runs(client, t, promote["id"], 1)
    second = crm.wait_runs(client, t, tagger["id"], 1)
    assert len(first) == 1 and first[0]["status"] == "succeeded", first
    assert first[0]["depth"] == 0 and first[0]["trigger_type"] == "contact.tag_added", first
    assert len(second) == 1 and second[0]["status"] == "succeeded", second
    assert second[0]["depth"] == 1, f"a change made by a run carries depth + 1: {second}"


def test_conditions_that_do_not_hold_create_no_run(client, fresh):
    t = fresh.admin
    wf = crm.create_workflow(client, t, trigger_type="contact.created", conditions=[
        {"field": "status", "op": "eq", "value": "qualified"},
        {"field": "cf.plan", "op": "eq", "value": "gold"}], actions=[tag_action("gold")])
    c1 = crm.create_contact(client, t, first_name="NoPlan", status="qualified")
    c2 = crm.create_contact(client, t, first_name="NotQualified", custom_fields={"plan": "gold"})
    c3 = crm.create_contact(client, t, first_name="Both", status="qualified",
                            custom_fields={"plan": "gold"})
    runs = crm.wait_runs(client, t, wf["id"], 1)
    # Events are taken in order: c1's and c2's were evaluated before c3's.
    assert len(runs) == 1, runs
    assert payload_contact_id(runs[0]["trigger_payload"]) == c3["id"], runs
    assert crm.eventually(lambda: "gold" in tags(client, t, c3["id"]), RUN_TIMEOUT)
    assert tags(client, t, c1["id"]) == [] and tags(client, t, c2["id"]) == []


def test_changed_to_holds_only_on_the_change(client, fresh):
    t = fresh.admin
    wf = crm.create_workflow(client, t, trigger_type="contact.updated", conditions=[
        {"field": "status", "op": "changed_to", "value": "inactive"}],
        actions=[tag_action("lapsed")])
    c = crm.create_contact(client, t, first_name="Lapse")
    patch_contact(client, t, c["id"], {"last_name": "One"})       # status not changed: no
    patch_contact(client, t, c["id"], {"status": "inactive"})     # changed to inactive: yes
    runs = crm.wait_runs(client, t, wf["id"], 1)
    assert len(runs) == 1, runs
    assert crm.eventually(lambda: "lapsed" in tags(client, t, c["id"]), RUN_TIMEOUT)
    patch_contact(client, t, c["id"], {"last_name": "Two"})       # still inactive: no
    patch_contact(client, t, c["id"], {"status": "inactive"})     # sent, unchanged: no
    patch_contact(client, t, c["id"], {"status": "active"})       # changed to active: no
    patch_contact(client, t, c["id"], {"status": "inactive"})     # changed to inactive: yes
    runs = crm.wait_runs(client, t, wf["id"], 2)
    time.sleep(1.5)  # the tag changes made by the runs are contact.updated events too
    runs = crm.list_runs(client, t, wf["id"])
    assert len(runs) == 2, runs
    assert all(r["status"] == "succeeded" for r in runs), runs
    assert [r["trigger_payload"]["contact"]["status"] for r in runs] == ["inactive", "inactive"]


def test_contact_created_workflow_fills_fields_from_templates(client, fresh):
    t = fresh.admin
    wf = crm.create_workflow(client, t, name="Greeter", trigger_type="contact.created",
                             actions=[{"type": "update_contact", "params": {"fields": {
                                 "last_name": "{{contact.first_name}} Jr",
                                 "custom_fields": {
                                     "greeting": "Hello {{contact.first_name}}!",
                                     "cid": "{{contact.id}}",
                                     "wf": "{{workflow.name}}",
                                     "gap": "<{{contact.nothing}}>",
                                     "tags_text": "tags: {{contact.tags}}"}}}}])
    c = crm.create_contact(client, t, first_name="Tom", tags=["x"])

    def filled():
        return crm.get_contact(client, t, c["id"])["last_name"] == "Tom Jr"

    assert crm.eventually(filled, RUN_TIMEOUT, 0.2), crm.list_runs(client, t, wf["id"])
    contact = crm.get_contact(client, t, c["id"])
    assert contact["custom_fields"] == {"greeting": "Hello Tom!", "cid": c["id"], "wf": "Greeter",
                                        "gap": "<>", "tags_text": 'tags: ["x"]'}, contact
    run = crm.wait_runs(client, t, wf["id"], 1)[0]
    run = crm.get_run(client, t, run["id"])
    assert run["status"] == "succeeded", run
    fields = run["steps"][0]["params"]["fields"]
    assert fields["last_name"] == "Tom Jr" and fields["custom_fields"]["cid"] == c["id"], run


def test_failing_action_fails_the_run_and_the_workflow_keeps_working(client, fresh):
    t = fresh.admin
    wf = crm.create_workflow(client, t, trigger_type="contact.created", actions=[
        {"type": "update_contact", "params": {"fields": {"email": "{{contact.first_name}}"}}},
        tag_action("after-email")])
    bad = crm.create_contact(client, t, first_name="not-an-email")
    run = crm.wait_run(client, t, crm.wait_runs(client, t, wf["id"], 1)[0]["id"])
    assert run["status"] == "failed", run
    assert "email" in run["error"].lower(), run
    assert run["steps"][0]["status"] == "failed" and "email" in run["steps"][0]["error"].lower()
    assert not any(s["index"] == 1 and s["status"] == "succeeded" for s in run["steps"]), run
    contact = crm.get_contact(client, t, bad["id"])
    assert contact["email"] is None and contact["tags"] == [], contact

    good_email = crm.unique_email("templated")
    good = crm.create_contact(client, t, first_name=good_email)
    runs = crm.wait_runs(client, t, wf["id"], 2)
    newest = crm.get_run(client, t, runs[0]["id"])
    assert newest["status"] == "succeeded", newest
    assert payload_contact_id(newest["trigger_payload"]) == good["id"]
    contact = crm.get_contact(client, t, good["id"])
    assert contact["email"] == good_email and contact["tags"] == ["after-email"], contact


def test_a_chain_of_workflows_stops_at_depth_5(client, fresh):
    t = fresh.admin
    ping = crm.create_workflow(client, t, name="ping", trigger_type="contact.status_changed",
                               trigger_config={"to": "qualified"},
                               actions=[{"type": "set_status",
                                         "params": {"status": "unqualified"}}])
    pong = crm.create_workflow(client, t, name="pong", trigger_type="contact.status_changed",
                               trigger_config={"to": "unqualified"},
                               actions=[{"type": "set_status", "params": {"status": "qualified"}}])
    c = crm.create_contact(client, t, first_name="PingPong")
    patch_contact(client, t, c["id"], {"status": "qualified"})

    def depth_failure():
        runs = crm.list_runs(client, t, ping["id"]) + crm.list_runs(client, t, pong["id"])
        return any(r["status"] == "failed" for r in runs)

    assert crm.eventually(depth_failure, RUN_TIMEOUT + 10, 0.25), \
        (crm.list_runs(client, t, ping["id"]), crm.list_runs(client, t, pong["id"]))
    runs = runs_stop_growing(client, t, [ping["id"], pong["id"]])
    assert len(runs) <= 10, f"the chain did not stop: {len(runs)} runs"
    failed = [r for r in runs if r["status"] == "failed"]
    assert len(failed) == 1, runs
    stopped = crm.get_run(client, t, failed[0]["id"])
    assert "depth" in stopped["error"].lower(), stopped
    assert stopped["depth"] == 5 and stopped["steps"] == [], stopped
    assert sorted(r["depth"] for r in runs if r["status"] == "succeeded") == [0, 1, 2, 3, 4], runs
    # The run at depth 5 ran no action: the last change (by the depth-4 run of ping) stays.
    assert stopped["workflow_id"] == pong["id"], stopped
    assert crm.get_contact(client, t, c["id"])["status"] == "unqualified"


# ---- manual and schedule triggers -----------------------------------------------------------


def test_manual_run_is_202_queued_and_then_succeeds(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="manual")
    run_id = crm.start_run(client, admin, wf["id"])
    run = crm.wait_run(client, admin, run_id)
    crm.assert_run(run, id=run_id, workflow_id=wf["id"], status="succeeded", trigger_type="manual",
                   depth=0, conditions_met=True, steps=[], error=None, resume_at=None)


def test_manual_run_whose_conditions_do_not_hold_succeeds_without_steps(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="manual",
                             conditions=[{"field": "nothing.here", "op": "exists"}],
                             actions=[tag_action("never")])  # would fail: no contact
    run = crm.wait_run(client, admin, crm.start_run(client, admin, wf["id"]))
    crm.assert_run(run, status="succeeded", conditions_met=False, steps=[], error=None)


@pytest.mark.parametrize("trigger_type,extra", [
    ("webhook", {}), ("contact.created", {}),
    ("schedule", {"trigger_config": {"cron": "0 0 1 1 *"}})])
def test_running_a_workflow_that_is_not_manual_is_409(client, admin, trigger_type, extra):
    wf = crm.create_workflow(client, admin, trigger_type=trigger_type, **extra)
    crm.assert_error(client.post(crm.workflow_run_now_url(wf["id"]), token=admin), 409,
                     "CONFLICT")
    assert crm.list_runs(client, admin, wf["id"]) == []


def test_running_an_inactive_workflow_is_409(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="manual", is_active=False)
    crm.assert_error(client.post(crm.workflow_run_now_url(wf["id"]), token=admin), 409,
                     "CONFLICT")
    assert crm.list_runs(client, admin, wf["id"]) == []


def test_interval_schedule_runs_every_interval(client, fresh):
    t = fresh.admin
    wf = crm.create_workflow(client, t, trigger_type="schedule",
                             trigger_config={"interval_seconds": 5,
                                             "payload": {"source": "timer"}})
    try:
        runs = crm.wait_runs(client, t, wf["id"], 1, timeout=15)
        run = crm.get_run(client, t, runs[-1]["id"])
        crm.assert_run(run, status="succeeded", trigger_type="schedule", workflow_id=wf["id"])
        assert run["trigger_payload"].get("source") == "timer", run
        runs = crm.wait_runs(client, t, wf["id"], 2, timeout=20)
        oldest, next_one = crm.parse_timestamp(runs[-1]["created_at"]), \
            crm.parse_timestamp(runs[-2]["created_at"])
        assert (next_one - oldest).total_seconds() >= 4.0, \
            f"runs of a 5 s schedule {(next_one - oldest).total_seconds()} s apart: {runs}"
        later = crm.get_workflow(client, t, wf["id"])
        assert later["next_run_at"] > runs[0]["created_at"], (later, runs[0])
    finally:
        crm.assert_no_content(client.delete(url(wf["id"]), token=t))


# ---- http_request ---------------------------------------------------------------------------


def test_http_request_is_sent_and_signed_with_the_workflow_secret(client, admin):
    with crm.Receiver([200]) as rcv:
        wf = crm.create_workflow(client, admin, name="Signer", trigger_type="manual",
                                 webhook_secret=SECRET, actions=[{"type": "http_request", "params": {
                                     "url": rcv.url("/signed?x=1"), "headers": {"X-Test": "yes"},
                                     "body": {"run": "{{run.id}}", "wf": "{{workflow.name}}",
                                              "wid": "{{workflow.id}}", "n": 7}}}])
        run_id = crm.start_run(client, admin, wf["id"])
        req = rcv.wait_for(1, RUN_TIMEOUT)[0]
        run = crm.wait_run(client, admin, run_id)
    assert req.method == "POST" and req.path == "/signed?x=1", req.describe()
    assert req.header("X-Test") == "yes", req.describe()
    assert req.json == {"run": run_id, "wf": "Signer", "wid": wf["id"], "n": 7}, req.describe()
    assert crm.verify_standard_webhook(SECRET, req.headers, req.body), \
        f"signature does not verify: {req.describe()}"
    assert not crm.verify_standard_webhook(SECRET + "x", req.headers, req.body)
    assert abs(int(req.header("webhook-timestamp")) - time.time()) < 60, req.describe()
    depth = req.header("carecrm-chain-depth")
    assert depth is not None and depth.isdigit(), req.describe()
    assert run["status"] == "succeeded", run
    assert run["steps"][0]["type"] == "http_request" and run["steps"][0]["status"] == "succeeded"
    assert run["steps"][0]["result"]["status_code"] == 200, run
    assert len(rcv.requests) == 1
    # The header's value was sent, and is shown nowhere: not in the workflow, not in the step.
    assert wf["actions"][0]["params"]["headers"] == {"X-Test": None}, wf
    assert crm.get_workflow(client, admin, wf["id"])["actions"] == wf["actions"]
    assert run["steps"][0]["params"]["headers"] == {"X-Test": None}, run


def test_http_request_without_a_secret_is_unsigned_and_uses_the_method(client, admin):
    with crm.Receiver([204]) as rcv:
        wf = crm.create_workflow(client, admin, trigger_type="manual", actions=[
            {"type": "http_request", "params": {"url": rcv.url("/put"), "method": "PUT",
                                                "body": ["a", 1]}},
            {"type": "http_request", "params": {"url": rcv.url("/get"), "method": "GET"}}])
        run = crm.wait_run(client, admin, crm.start_run(client, admin, wf["id"]))
        reqs = rcv.wait_for(2, 5)
    assert run["status"] == "succeeded", run
    assert [(r.method, r.path) for r in reqs] == [("PUT", "/put"), ("GET", "/get")], reqs
    assert reqs[0].json == ["a", 1], reqs[0].describe()
    assert reqs[0].header("webhook-signature") is None, reqs[0].describe()
    assert [s["result"]["status_code"] for s in run["steps"]] == [204, 204], run


def test_http_request_default_body_is_the_trigger_envelope(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as rcv:
        crm.create_workflow(client, t, trigger_type="contact.created", actions=[
            {"type": "http_request", "params": {"url": rcv.url("/envelope")}}])
        c = crm.create_contact(client, t, first_name="Envelope")
        req = rcv.wait_for(1, RUN_TIMEOUT)[0]
    body = req.json
    assert req.method == "POST", req.describe()
    assert isinstance(body, dict) and set(body) == {"type", "timestamp", "data"}, req.describe()
    assert body["type"] == "contact.created", body
    crm.assert_timestamp(body["timestamp"])
    assert payload_contact_id(body["data"]) == c["id"], body
    assert body["data"]["contact"]["first_name"] == "Envelope", body


def test_http_request_answered_500_fails_the_run_and_stops_it(client, admin):
    with crm.Receiver([500]) as rcv:
        wf = crm.create_workflow(client, admin, trigger_type="manual", actions=[
            {"type": "http_request", "params": {"url": rcv.url("/first")}},
            {"type": "http_request", "params": {"url": rcv.url("/second")}}])
        run = crm.wait_run(client, admin, crm.start_run(client, admin, wf["id"]))
        assert run["status"] == "failed", run
        assert "500" in run["error"], run
        assert run["steps"][0]["status"] == "failed" and "500" in run["steps"][0]["error"], run
        assert [r.path for r in rcv.requests] == ["/first"], "the action after the failure ran"


def test_http_request_does_not_follow_redirects(client, admin):
    with crm.Receiver([(302, {"Location": "/elsewhere"}, b""), 200]) as rcv:
        wf = crm.create_workflow(client, admin, trigger_type="manual", actions=[
            {"type": "http_request", "params": {"url": rcv.url("/moved")}}])
        run = crm.wait_run(client, admin, crm.start_run(client, admin, wf["id"]))
        assert run["status"] == "failed", run
        assert "302" in run["error"], run
        assert [r.path for r in rcv.requests] == ["/moved"], rcv.requests


def test_http_request_to_a_closed_port_fails_the_run(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="manual", actions=[
        {"type": "http_request", "params": {"url": crm.closed_port_url(), "timeout_seconds": 5}}])
    run = crm.wait_run(client, admin, crm.start_run(client, admin, wf["id"]))
    assert run["status"] == "failed" and run["error"], run
    assert run["steps"][0]["status"] == "failed", run


@pytest.mark.parametrize("timeout", [1, 1.0])  # 1.0 passes the reader as 1 does
def test_http_request_timeout_fails_the_step_after_that_many_seconds(client, admin, timeout):
    # The run waits the action's timeout, not the client's default 10 s.
    with crm.Receiver(hang=True) as rcv:
        wf = crm.create_workflow(client, admin, trigger_type="manual", actions=[
            {"type": "http_request", "params": {"url": rcv.url("/slow"),
                                                "timeout_seconds": timeout}}])
        run = crm.wait_run(client, admin, crm.start_run(client, admin, wf["id"]))
        assert run["status"] == "failed", run
        assert len(rcv.requests) == 1
        assert "timed out after 1000 ms" in json.dumps(run), run


# ---- delay ----------------------------------------------------------------------------------


def test_delay_makes_the_run_wait_and_then_finish(client, fresh):
    t = fresh.admin
    wf = crm.create_workflow(client, t, trigger_type="contact.created", actions=[
        tag_action("before"), {"type": "delay", "params": {"seconds": 3}}, tag_action("after")])
    c = crm.create_contact(client, t, first_name="Patience")
    runs = crm.wait_runs(client, t, wf["id"], 1, finished=False)
    waiting = crm.wait_run(client, t, runs[0]["id"], statuses=("waiting",))
    crm.assert_timestamp(waiting["resume_at"])
    assert waiting["finished_at"] is None, waiting
    assert tags(client, t, c["id"]) == ["before"], "the step after the delay ran early"
    run = crm.wait_run(client, t, runs[0]["id"])
    assert run["status"] == "succeeded", run
    assert [(s["index"], s["type"], s["status"]) for s in run["steps"]] == \
        [(0, "add_tag", "succeeded"), (1, "delay", "succeeded"), (2, "add_tag", "succeeded")], run
    gap = crm.parse_timestamp(run["steps"][2]["started_at"]) - \
        crm.parse_timestamp(run["steps"][1]["started_at"])
    assert gap.total_seconds() >= 2.9, f"the delay lasted {gap.total_seconds()} s: {run}"
    assert sorted(tags(client, t, c["id"])) == ["after", "before"]


def test_deleting_a_workflow_stops_its_waiting_run(client, admin):
    with crm.Receiver([200]) as rcv:
        wf = crm.create_workflow(client, admin, trigger_type="manual", actions=[
            {"type": "delay", "params": {"seconds": 3}},
            {"type": "http_request", "params": {"url": rcv.url("/too-late")}}])
        run_id = crm.start_run(client, admin, wf["id"])
        crm.wait_run(client, admin, run_id, statuses=("waiting",))
        crm.assert_no_content(client.delete(url(wf["id"]), token=admin))
        crm.assert_error(client.get(crm.run_url(run_id), token=admin), 404, "NOT_FOUND")
        time.sleep(5)
        assert rcv.requests == [], "the deleted workflow's run went on"


# ---- runs API -------------------------------------------------------------------------------


def test_runs_page_newest_first_filter_by_status_and_keep_their_actions(client, admin):
    wf = crm.create_workflow(client, admin, trigger_type="manual", actions=[])
    ok = crm.start_run(client, admin, wf["id"])
    # A run keeps the actions its workflow had when it was created.
    crm.assert_json_response(client.patch(url(wf["id"]), {"actions": [tag_action("x")]},
                                          token=admin), 200)
    bad1 = crm.start_run(client, admin, wf["id"])  # add_tag without a contact: fails
    bad2 = crm.start_run(client, admin, wf["id"])
    for run_id in (ok, bad1, bad2):
        crm.wait_run(client, admin, run_id)
    assert crm.get_run(client, admin, ok)["status"] == "succeeded"
    assert crm.get_run(client, admin, ok)["steps"] == []
    for run_id in (bad1, bad2):
        run = crm.get_run(client, admin, run_id)
        assert run["status"] == "failed" and run["steps"][0]["type"] == "add_tag", run

    def page(params):
        body = crm.assert_json_response(client.get(crm.workflow_runs_url(wf["id"], params),
                                                   token=admin), 200)
        crm.assert_page(body)
        return body

    body = page({"per_page": 2})
    assert (body["total"], body["pages"]) == (3, 2), body
    assert [r["id"] for r in body["items"]] == [bad2, bad1], body
    assert [r["id"] for r in page({"per_page": 2, "page": 2})["items"]] == [ok]
    assert page({"per_page": 2, "page": 3})["items"] == []
    for item in page({})["items"]:
        assert item["workflow_id"] == wf["id"] and item["status"] in crm.FINISHED, item
    assert [r["id"] for r in page({"status": "failed"})["items"]] == [bad2, bad1]
    assert [r["id"] for r in page({"status": "succeeded"})["items"]] == [ok]
    assert page({"status": "waiting"})["total"] == 0


@pytest.mark.parametrize("params,loc", [({"status": "done"}, ("query", "status")),
                                        ({"per_page": 101}, ("query", "per_page")),
                                        ({"page": 0}, ("query", "page"))])
def test_invalid_runs_parameters_are_422(client, admin, params, loc):
    wf = crm.create_workflow(client, admin)
    crm.assert_validation_locs(client.get(crm.workflow_runs_url(wf["id"], params), token=admin),
                               loc)
