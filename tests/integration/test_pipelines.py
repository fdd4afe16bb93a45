"""Pipelines and stages (contract §8, docs/pipeline.md "Roles", "Pipelines and stages", "Board
and summary"): the default "Sales" pipeline of a new tenant, pipeline CRUD and the default
pipeline rules, the stage rules (at least one open, exactly one won and one lost, unique names),
adding, renaming, reordering and removing stages (with ?move_to= for a stage holding deals),
the role matrix, tenant isolation, the board (counts, exact sums per currency, board order,
paging per stage) and the forecast summary (weighted sums rounded half-up once per currency,
filters).

Tests that change the stages or count deals use a pipeline of their own, or a tenant of their
own (`fresh`) when they touch the default pipeline."""
import secrets

import pytest

import crm

PIPELINES = crm.PIPELINES
NOWHERE_ID = crm.NOWHERE_ID
MISSING = crm.MISSING
UPDATE_METHODS = ["PUT", "PATCH"]


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


@pytest.fixture
def pipe(client, admin) -> dict:
    """A pipeline of tenant A with the six default stages, for one test."""
    return crm.create_pipeline(client, admin)


@pytest.fixture(scope="module")
def pipe_b(client, sess_b) -> dict:
    """A pipeline of tenant B holding one deal; only B's admin ever changes it."""
    p = crm.create_pipeline(client, sess_b.admin, name="Tenant B pipeline")
    crm.create_deal(client, sess_b.admin, title="B deal", pipeline_id=p["id"], amount="5")
    return crm.get_pipeline(client, sess_b.admin, p["id"])


def url(pipeline_id) -> str:
    return crm.pipeline_url(pipeline_id)


def sid(pipeline: dict, name: str) -> int:
    return crm.stage_named(pipeline, name)["id"]


def names(pipeline: dict) -> list[str]:
    return [s["name"] for s in pipeline["stages"]]


def total(client, token) -> int:
    return crm.list_total(client, token, PIPELINES)


def stages_body(*spec) -> list[dict]:
    """("Name", kind) or ("Name", kind, probability) -> stage items."""
    out = []
    for item in spec:
        stage = {"name": item[0]}
        if item[1] != "open":
            stage["kind"] = item[1]
        if len(item) > 2:
            stage["probability"] = item[2]
        out.append(stage)
    return out


VALID_STAGES = stages_body(("New", "open"), ("Closed won", "won"), ("Closed lost", "lost"))


# ---- the default pipeline -------------------------------------------------------------------


def test_new_tenant_has_exactly_one_default_sales_pipeline_with_the_six_stages(client, fresh):
    body = crm.list_page(client, fresh.admin, PIPELINES)
    crm.assert_page(body, total=1, page=1)
    sales = body["items"][0]
    crm.assert_pipeline(sales, name="Sales", is_default=True)
    assert crm.stage_shape(sales) == crm.DEFAULT_STAGES
    assert crm.get_pipeline(client, fresh.admin, sales["id"]) == sales
    for stage in sales["stages"]:
        got = crm.assert_json_response(
            client.get(crm.stage_url(sales["id"], stage["id"]), token=fresh.admin), 200)
        assert got == stage


def test_every_tenant_has_its_own_default_pipeline(client, admin, sess_b):
    mine, theirs = crm.default_pipeline(client, admin), crm.default_pipeline(client, sess_b.admin)
    assert mine["id"] != theirs["id"]
    assert not {s["id"] for s in mine["stages"]} & {s["id"] for s in theirs["stages"]}


# ---- create, read, list ---------------------------------------------------------------------


def test_create_without_stages_gets_the_default_stages_201_with_location(client, admin):
    resp = client.post(PIPELINES, {"name": "Implants"}, token=admin)
    body = crm.assert_json_response(resp, 201)
    crm.assert_pipeline(body, name="Implants", is_default=False)
    assert resp.header("Location") == url(body["id"]), resp.describe()
    assert crm.stage_shape(body) == crm.DEFAULT_STAGES
    sales = crm.default_pipeline(client, admin)
    assert not {s["id"] for s in body["stages"]} & {s["id"] for s in sales["stages"]}
    assert crm.get_pipeline(client, admin, body["id"]) == body


def test_create_with_stages_keeps_their_order_and_default_probabilities(client, admin):
    stages = stages_body(("Enquiry", "open"), ("Consult", "open", 40), ("Paid", "won"),
                         ("Declined", "lost"), ("Follow-up", "open", 5))
    body = crm.create_pipeline(client, admin, name="Custom", stages=stages)
    assert crm.stage_shape(body) == [("Enquiry", 0, "open"), ("Consult", 40, "open"),
                                     ("Paid", 100, "won"), ("Declined", 0, "lost"),
                                     ("Follow-up", 5, "open")]
    assert crm.get_pipeline(client, admin, body["id"]) == body


def test_three_stages_and_100_character_names_are_accepted(client, admin):
    body = crm.create_pipeline(client, admin, name="p" * 100,
                               stages=stages_body(("s" * 100, "open"), ("W", "won"), ("L", "lost")))
    assert body["name"] == "p" * 100 and body["stages"][0]["name"] == "s" * 100


def _many(n):
    return [{"name": f"S{i}"} for i in range(n - 2)] + [{"name": "W", "kind": "won"},
                                                         {"name": "L", "kind": "lost"}]


STAGE_RULE_BREAKS = [
    ("two stages", stages_body(("A", "open"), ("W", "won"))),
    ("51 stages", _many(51)),
    ("no won", stages_body(("A", "open"), ("B", "open"), ("L", "lost"))),
    ("no lost", stages_body(("A", "open"), ("B", "open"), ("W", "won"))),
    ("two won", stages_body(("A", "open"), ("W1", "won"), ("W2", "won"), ("L", "lost"))),
    ("two lost", stages_body(("A", "open"), ("W", "won"), ("L1", "lost"), ("L2", "lost"))),
    ("no open", stages_body(("W", "won"), ("L", "lost"), ("X", "lost"))),
    ("same name", stages_body(("Lead", "open"), ("lead", "open"), ("W", "won"), ("L", "lost"))),
    ("not a list", {"name": "A"}),
]


@pytest.mark.parametrize("stages", [s for _, s in STAGE_RULE_BREAKS],
                         ids=[n for n, _ in STAGE_RULE_BREAKS])
def test_stages_breaking_the_rules_are_422_at_stages(client, admin, stages):
    before = total(client, admin)
    resp = client.post(PIPELINES, {"name": "Broken", "stages": stages}, token=admin)
    crm.assert_validation_locs(resp, ("body", "stages"))
    assert total(client, admin) == before


def test_fifty_stages_are_accepted(client, admin):
    body = crm.create_pipeline(client, admin, stages=_many(50))
    assert len(body["stages"]) == 50


S = ("body", "stages")
INVALID_CREATE = [
    ({"name": MISSING}, [(("body", "name"), "missing")]),
    ({"name": ""}, [(("body", "name"), "string_too_short")]),
    ({"name": "n" * 101}, [(("body", "name"), "string_too_long")]),
    ({"name": 7}, [(("body", "name"), "string_type")]),
    ({"is_default": "yes"}, [(("body", "is_default"), "bool_parsing")]),
    ({"color": "red"}, [(("body", "color"), "extra_forbidden")]),
    ({"id": 1, "created_at": "2020-01-01T00:00:00.000000Z"},
     [(("body", "id"), "extra_forbidden"), (("body", "created_at"), "extra_forbidden")]),
    ({"stages": [{"name": "A", "probability": 101}] + VALID_STAGES},
     [((*S, 0, "probability"), "less_than_equal")]),
    ({"stages": [{"name": "A", "probability": -1}] + VALID_STAGES},
     [((*S, 0, "probability"), "greater_than_equal")]),
    ({"stages": [{"name": "A", "kind": "maybe"}] + VALID_STAGES}, [((*S, 0, "kind"), "enum")]),
    ({"stages": [{"name": ""}] + VALID_STAGES}, [((*S, 0, "name"), "string_too_short")]),
    ({"stages": [{"probability": 5}] + VALID_STAGES}, [((*S, 0, "name"), "missing")]),
    ({"stages": [{"name": "A", "color": "red"}] + VALID_STAGES},
     [((*S, 0, "color"), "extra_forbidden")]),
]


@pytest.mark.parametrize("override,expected", INVALID_CREATE)
def test_invalid_pipeline_create_is_422_and_stores_nothing(client, admin, override, expected):
    before = total(client, admin)
    body = crm.with_override({"name": "Valid " + secrets.token_hex(3)}, override)
    crm.assert_validation(client.post(PIPELINES, body, token=admin), *expected)
    assert total(client, admin) == before


def test_pipeline_list_pages_in_id_order(client, fresh):
    t = fresh.admin
    sales = crm.default_pipeline(client, t)
    made = [crm.create_pipeline(client, t, name=f"P{i}") for i in range(2)]
    ids = [sales["id"]] + [p["id"] for p in made]
    first = crm.list_page(client, t, PIPELINES, {"page": 1, "per_page": 2})
    second = crm.list_page(client, t, PIPELINES, {"page": 2, "per_page": 2})
    crm.assert_page(first, total=3, page=1, per_page=2)
    crm.assert_page(second, total=3, page=2, per_page=2)
    assert [p["id"] for p in first["items"] + second["items"]] == sorted(ids) == ids
    assert first["items"][1] == made[0]
    for query, loc in (({"page": 0}, "page"), ({"per_page": 101}, "per_page"),
                       ({"per_page": 0}, "per_page")):
        crm.assert_validation_locs(client.get(crm.with_query(PIPELINES, query), token=t),
                                   ("query", loc))


# ---- update, default, delete ----------------------------------------------------------------


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_rename_changes_only_the_name(client, admin, pipe, method):
    body = crm.assert_json_response(
        client.request(method, url(pipe["id"]), {"name": "Renamed"}, token=admin), 200)
    crm.assert_pipeline(body)
    assert body == {**pipe, "name": "Renamed", "updated_at": body["updated_at"]}
    assert body["updated_at"] > pipe["updated_at"]
    assert crm.get_pipeline(client, admin, pipe["id"]) == body


@pytest.mark.parametrize("body,expected", [
    ({"name": ""}, [(("body", "name"), "string_too_short")]),
    ({"name": None}, [(("body", "name"), "string_type")]),
    ({"name": "n" * 101}, [(("body", "name"), "string_too_long")]),
    ({"is_default": "no"}, [(("body", "is_default"), "bool_parsing")]),
    ({"stages": VALID_STAGES}, [(("body", "stages"), "extra_forbidden")]),
    ({"id": 9}, [(("body", "id"), "extra_forbidden")]),
])
def test_invalid_pipeline_update_is_422_and_changes_nothing(client, admin, pipe, body, expected):
    crm.assert_validation(client.patch(url(pipe["id"]), body, token=admin), *expected)
    assert crm.get_pipeline(client, admin, pipe["id"]) == pipe


def test_default_pipeline_rules(client, fresh):
    t = fresh.admin
    sales = crm.default_pipeline(client, t)
    crm.assert_error(client.delete(url(sales["id"]), token=t), 409, "CONFLICT")
    crm.assert_error(client.patch(url(sales["id"]), {"is_default": False}, token=t), 409,
                     "CONFLICT")
    assert crm.get_pipeline(client, t, sales["id"]) == sales

    second = crm.create_pipeline(client, t, name="Second")
    assert second["is_default"] is False
    body = crm.assert_json_response(client.patch(url(second["id"]), {"is_default": True},
                                                 token=t), 200)
    crm.assert_pipeline(body, id=second["id"], is_default=True)
    assert crm.get_pipeline(client, t, sales["id"])["is_default"] is False
    assert crm.default_pipeline(client, t)["id"] == second["id"]
    # A deal without pipeline_id goes to the default pipeline's first open stage.
    deal = crm.create_deal(client, t)
    assert (deal["pipeline_id"], deal["stage_id"]) == (second["id"], second["stages"][0]["id"])

    crm.assert_no_content(client.delete(url(sales["id"]), token=t))  # no longer the default
    crm.assert_error(client.get(url(sales["id"]), token=t), 404, "NOT_FOUND")
    crm.assert_error(client.delete(url(second["id"]), token=t), 409, "CONFLICT")

    third = crm.create_pipeline(client, t, name="Third", is_default=True)
    assert third["is_default"] is True
    assert crm.get_pipeline(client, t, second["id"])["is_default"] is False
    assert [p["id"] for p in crm.list_pipelines(client, t) if p["is_default"]] == [third["id"]]
    # is_default false on a pipeline that is not the default changes nothing.
    same = crm.assert_json_response(client.patch(url(second["id"]), {"is_default": False},
                                                 token=t), 200)
    assert same["is_default"] is False


def test_delete_pipeline_that_holds_deals_is_409_until_they_are_gone(client, admin, pipe):
    deal = crm.create_deal(client, admin, pipeline_id=pipe["id"])
    crm.assert_error(client.delete(url(pipe["id"]), token=admin), 409, "CONFLICT")
    assert crm.get_pipeline(client, admin, pipe["id"]) == pipe
    assert crm.get_deal(client, admin, deal["id"]) == deal
    crm.assert_no_content(client.delete(crm.deal_url(deal["id"]), token=admin))
    crm.assert_no_content(client.delete(url(pipe["id"]), token=admin))
    crm.assert_error(client.get(url(pipe["id"]), token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.get(crm.stage_url(pipe["id"], pipe["stages"][0]["id"]), token=admin),
                     404, "NOT_FOUND")
    assert pipe["id"] not in {p["id"] for p in crm.list_pipelines(client, admin)}
    crm.assert_validation_locs(client.post(crm.DEALS, {"title": "Late", "pipeline_id": pipe["id"]},
                                           token=admin), ("body", "pipeline_id"))


# ---- stages ---------------------------------------------------------------------------------


def add_stage(client, token, pipeline_id, **fields) -> dict:
    resp = client.post(crm.stages_url(pipeline_id), fields, token=token)
    body = crm.assert_json_response(resp, 201)
    crm.assert_stage(body, pipeline_id=pipeline_id, name=fields["name"])
    assert resp.header("Location") == crm.stage_url(pipeline_id, body["id"]), resp.describe()
    return body


def test_added_stage_goes_after_the_last_open_stage(client, admin, pipe):
    stage = add_stage(client, admin, pipe["id"], name="Treatment")
    after = crm.get_pipeline(client, admin, pipe["id"])
    assert names(after) == ["Lead", "Qualified", "Proposal", "Negotiation", "Treatment", "Won",
                            "Lost"]
    assert crm.stage_named(after, "Treatment") == stage
    assert (stage["position"], stage["probability"], stage["kind"]) == (4, 0, "open")
    assert crm.assert_json_response(client.get(crm.stage_url(pipe["id"], stage["id"]),
                                               token=admin), 200) == stage


def test_added_stage_follows_the_last_open_stage_even_past_won(client, admin):
    p = crm.create_pipeline(client, admin, stages=stages_body(
        ("A", "open"), ("W", "won"), ("B", "open"), ("L", "lost")))
    add_stage(client, admin, p["id"], name="C", probability=30)
    after = crm.get_pipeline(client, admin, p["id"])
    assert crm.stage_shape(after) == [("A", 0, "open"), ("W", 100, "won"), ("B", 0, "open"),
                                      ("C", 30, "open"), ("L", 0, "lost")]


def test_added_stage_at_a_position_shifts_the_others(client, admin, pipe):
    stage = add_stage(client, admin, pipe["id"], name="Referral", position=0, probability=5)
    after = crm.get_pipeline(client, admin, pipe["id"])
    assert names(after)[:3] == ["Referral", "Lead", "Qualified"] and stage["position"] == 0
    assert [s["id"] for s in after["stages"][1:]] == [s["id"] for s in pipe["stages"]]


@pytest.mark.parametrize("fields", [{"name": "Second win", "kind": "won"},
                                    {"name": "Second loss", "kind": "lost"},
                                    {"name": "qualified"}, {"name": "LEAD"}])
def test_adding_a_stage_that_breaks_the_rules_is_409(client, admin, pipe, fields):
    crm.assert_error(client.post(crm.stages_url(pipe["id"]), fields, token=admin), 409,
                     "CONFLICT")
    assert crm.get_pipeline(client, admin, pipe["id"]) == pipe


@pytest.mark.parametrize("body,expected", [
    ({}, [(("body", "name"), "missing")]),
    ({"name": ""}, [(("body", "name"), "string_too_short")]),
    ({"name": "n" * 101}, [(("body", "name"), "string_too_long")]),
    ({"name": "X", "probability": 101}, [(("body", "probability"), "less_than_equal")]),
    ({"name": "X", "probability": "50"}, [(("body", "probability"), "int_parsing")]),
    ({"name": "X", "kind": "closed"}, [(("body", "kind"), "enum")]),
    ({"name": "X", "position": -1}, [(("body", "position"), "greater_than_equal")]),
    ({"name": "X", "colour": "red"}, [(("body", "colour"), "extra_forbidden")]),
])
def test_invalid_stage_body_is_422(client, admin, pipe, body, expected):
    crm.assert_validation(client.post(crm.stages_url(pipe["id"]), body, token=admin), *expected)
    stage = pipe["stages"][1]
    if body:  # the same rules on update (name is optional there)
        crm.assert_validation(client.patch(crm.stage_url(pipe["id"], stage["id"]), body,
                                           token=admin), *expected)
    assert crm.get_pipeline(client, admin, pipe["id"]) == pipe


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_rename_and_reweight_a_stage(client, admin, pipe, method):
    qualified = crm.stage_named(pipe, "Qualified")
    body = crm.assert_json_response(client.request(
        method, crm.stage_url(pipe["id"], qualified["id"]),
        {"name": "Discovery", "probability": 30}, token=admin), 200)
    assert body == {**qualified, "name": "Discovery", "probability": 30}
    after = crm.get_pipeline(client, admin, pipe["id"])
    assert crm.stage_named(after, "Discovery") == body
    # Its own name in another case is not a duplicate; another stage's name is.
    lead = crm.stage_named(pipe, "Lead")
    renamed = crm.assert_json_response(client.patch(crm.stage_url(pipe["id"], lead["id"]),
                                                    {"name": "LEAD"}, token=admin), 200)
    assert renamed["name"] == "LEAD"
    crm.assert_error(client.patch(crm.stage_url(pipe["id"], lead["id"]), {"name": "discovery"},
                                  token=admin), 409, "CONFLICT")
    assert crm.stage_named(crm.get_pipeline(client, admin, pipe["id"]), "LEAD") == renamed


def test_reorder_stages_by_position(client, admin, pipe):
    proposal, lead = crm.stage_named(pipe, "Proposal"), crm.stage_named(pipe, "Lead")
    body = crm.assert_json_response(client.patch(crm.stage_url(pipe["id"], proposal["id"]),
                                                 {"position": 0}, token=admin), 200)
    assert body == {**proposal, "position": 0}
    assert names(crm.get_pipeline(client, admin, pipe["id"])) == [
        "Proposal", "Lead", "Qualified", "Negotiation", "Won", "Lost"]
    crm.assert_json_response(client.patch(crm.stage_url(pipe["id"], lead["id"]),
                                          {"position": 5}, token=admin), 200)
    after = crm.get_pipeline(client, admin, pipe["id"])
    assert names(after) == ["Proposal", "Qualified", "Negotiation", "Won", "Lost", "Lead"]
    # The first open stage is now Proposal: a new deal goes there.
    deal = crm.create_deal(client, admin, pipeline_id=pipe["id"])
    assert deal["stage_id"] == proposal["id"]


@pytest.mark.parametrize("stage_name,kind", [("Qualified", "won"), ("Lead", "lost"),
                                             ("Won", "open"), ("Lost", "won")])
def test_kind_change_that_breaks_the_rules_is_409(client, admin, pipe, stage_name, kind):
    stage = crm.stage_named(pipe, stage_name)
    crm.assert_error(client.patch(crm.stage_url(pipe["id"], stage["id"]), {"kind": kind},
                                  token=admin), 409, "CONFLICT")
    assert crm.get_pipeline(client, admin, pipe["id"]) == pipe


def test_stage_holding_deals_keeps_its_kind_but_may_be_renamed_and_reweighted(client, admin,
                                                                              pipe):
    won = crm.stage_named(pipe, "Won")
    deal = crm.create_deal(client, admin, pipeline_id=pipe["id"], stage_id=won["id"])
    crm.assert_error(client.patch(crm.stage_url(pipe["id"], won["id"]), {"kind": "open"},
                                  token=admin), 409, "CONFLICT")
    assert crm.get_pipeline(client, admin, pipe["id"]) == pipe
    body = crm.assert_json_response(client.patch(
        crm.stage_url(pipe["id"], won["id"]), {"name": "Signed", "probability": 90, "kind": "won"},
        token=admin), 200)
    assert body == {**won, "name": "Signed", "probability": 90}
    assert crm.get_deal(client, admin, deal["id"])["status"] == "won"


def test_delete_empty_stage_renumbers_the_rest(client, admin, pipe):
    qualified = crm.stage_named(pipe, "Qualified")
    crm.assert_no_content(client.delete(crm.stage_url(pipe["id"], qualified["id"]), token=admin))
    after = crm.get_pipeline(client, admin, pipe["id"])
    assert names(after) == ["Lead", "Proposal", "Negotiation", "Won", "Lost"]
    crm.assert_error(client.get(crm.stage_url(pipe["id"], qualified["id"]), token=admin), 404,
                     "NOT_FOUND")
    deal = crm.create_deal(client, admin, pipeline_id=pipe["id"])
    crm.assert_validation_locs(client.post(crm.move_url(deal["id"]), {"stage_id": qualified["id"]},
                                           token=admin), ("body", "stage_id"))


@pytest.mark.parametrize("which", ["Won", "Lost"])
def test_deleting_the_won_or_lost_stage_is_409(client, admin, pipe, which):
    crm.assert_error(client.delete(crm.stage_url(pipe["id"], sid(pipe, which)), token=admin), 409,
                     "CONFLICT")
    assert crm.get_pipeline(client, admin, pipe["id"]) == pipe


def test_deleting_the_last_open_stage_is_409(client, admin):
    p = crm.create_pipeline(client, admin, stages=VALID_STAGES)
    crm.assert_error(client.delete(crm.stage_url(p["id"], sid(p, "New")), token=admin), 409,
                     "CONFLICT")
    assert crm.get_pipeline(client, admin, p["id"]) == p


def test_delete_stage_holding_deals_needs_move_to_and_moves_them(client, sess, pipe):
    admin, manager = sess.admin, sess.tokens["manager"]
    p = pipe
    held = [crm.create_deal(client, admin, pipeline_id=p["id"], stage_id=sid(p, "Qualified"),
                            amount=a, currency="BRL") for a in ("10", "20")]
    path = crm.stage_url(p["id"], sid(p, "Qualified"))
    crm.assert_error(client.delete(path, token=manager), 409, "CONFLICT")
    other = crm.default_pipeline(client, admin)
    for bad in (sid(other, "Proposal"), sid(p, "Qualified"), NOWHERE_ID):
        crm.assert_validation_locs(
            client.delete(crm.stage_url(p["id"], sid(p, "Qualified"), {"move_to": bad}),
                          token=manager), ("query", "move_to"))
    crm.assert_validation_locs(client.delete(path + "?move_to=abc", token=manager),
                               ("query", "move_to"))
    assert crm.get_pipeline(client, admin, p["id"]) == p
    assert [crm.get_deal(client, admin, d["id"]) for d in held] == held

    crm.assert_no_content(client.delete(crm.stage_url(p["id"], sid(p, "Qualified"),
                                                      {"move_to": sid(p, "Proposal")}),
                                        token=manager))
    after = crm.get_pipeline(client, admin, p["id"])
    assert names(after) == ["Lead", "Proposal", "Negotiation", "Won", "Lost"]
    manager_id = sess.users["manager"]["id"]
    for d in held:
        moved = crm.get_deal(client, admin, d["id"])
        assert (moved["stage_id"], moved["status"]) == (sid(p, "Proposal"), "open"), moved
        last = crm.deal_history(client, admin, d["id"])[-1]
        crm.assert_history_item(last, kind="stage_changed", from_stage_id=sid(p, "Qualified"),
                                to_stage_id=sid(p, "Proposal"), user_id=manager_id)
    proposal = [c for c in crm.get_board(client, admin, p["id"])
                if c["stage"]["id"] == sid(p, "Proposal")][0]
    assert proposal["count"] == 2 and proposal["sums"] == {"BRL": "30.00"}
    assert {c["id"] for c in proposal["deals"]} == {d["id"] for d in held}

    # Into the won stage: the deals are won and closed.
    crm.assert_no_content(client.delete(crm.stage_url(p["id"], sid(p, "Proposal"),
                                                      {"move_to": sid(p, "Won")}), token=admin))
    for d in held:
        won = crm.get_deal(client, admin, d["id"])
        assert (won["stage_id"], won["status"]) == (sid(p, "Won"), "won"), won
        crm.assert_timestamp(won["closed_at"])


# ---- ids, roles, tenants --------------------------------------------------------------------


def test_stage_of_another_pipeline_of_the_tenant_is_404(client, admin, pipe):
    other = crm.default_pipeline(client, admin)["stages"][0]["id"]
    path = crm.stage_url(pipe["id"], other)
    crm.assert_error(client.get(path, token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.patch(path, {"name": "Hijack"}, token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.delete(path, token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.get(crm.board_url(pipe["id"], {"stage_id": other}), token=admin),
                     404, "NOT_FOUND")
    crm.assert_error(client.get(crm.stage_url(pipe["id"], NOWHERE_ID), token=admin), 404,
                     "NOT_FOUND")


def _routes(pipeline_id, stage_id):
    return {
        "get": ("GET", url(pipeline_id), None),
        "put": ("PUT", url(pipeline_id), {"name": "Hijacked"}),
        "patch": ("PATCH", url(pipeline_id), {"name": "Hijacked"}),
        "delete": ("DELETE", url(pipeline_id), None),
        "board": ("GET", crm.board_url(pipeline_id), None),
        "summary": ("GET", crm.summary_url(pipeline_id), None),
        "add_stage": ("POST", crm.stages_url(pipeline_id), {"name": "Injected"}),
        "get_stage": ("GET", crm.stage_url(pipeline_id, stage_id), None),
        "patch_stage": ("PATCH", crm.stage_url(pipeline_id, stage_id), {"name": "Hijacked"}),
        "delete_stage": ("DELETE", crm.stage_url(pipeline_id, stage_id), None),
    }


@pytest.mark.parametrize("route", list(_routes(1, 1)))
@pytest.mark.parametrize("role", ["viewer", "admin"])
def test_another_tenants_pipeline_is_403_and_unchanged(client, sess, sess_b, pipe_b, role, route):
    method, path, body = _routes(pipe_b["id"], pipe_b["stages"][1]["id"])[route]
    crm.assert_error(client.request(method, path, body, token=sess.tokens[role]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_pipeline(client, sess_b.admin, pipe_b["id"]) == pipe_b


def test_another_tenants_stage_under_my_pipeline_is_403(client, admin, pipe, pipe_b):
    path = crm.stage_url(pipe["id"], pipe_b["stages"][0]["id"])
    crm.assert_error(client.get(path, token=admin), 403, "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.patch(path, {"name": "X"}, token=admin), 403,
                     "INSUFFICIENT_PERMISSIONS")


def test_pipeline_list_never_shows_another_tenants(client, admin, sess_b, pipe_b):
    mine = {p["id"] for p in crm.list_pipelines(client, admin)}
    theirs = {p["id"] for p in crm.list_pipelines(client, sess_b.admin)}
    assert pipe_b["id"] in theirs and not mine & theirs


@pytest.mark.parametrize("route", list(_routes(1, 1)))
def test_pipeline_of_no_tenant_is_404(client, admin, route):
    method, path, body = _routes(NOWHERE_ID, NOWHERE_ID)[route]
    crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")


@pytest.mark.parametrize("route", ["list", "create"] + list(_routes(1, 1)))
def test_pipeline_routes_without_token_are_401(client, route):
    method, path, body = ({"list": ("GET", PIPELINES, None),
                           "create": ("POST", PIPELINES, {"name": "X"})}.get(route) or
                          _routes(1, 1)[route])
    crm.assert_error(client.request(method, path, body), 401, "INVALID_CREDENTIALS")


@pytest.mark.parametrize("method,path", [("GET", "/api/v1/pipelines/abc"),
                                         ("PATCH", "/api/v1/pipelines/1.5"),
                                         ("GET", "/api/v1/pipelines/abc/board")])
def test_non_integer_pipeline_id_is_422(client, admin, method, path):
    crm.assert_validation(client.request(method, path, {} if method == "PATCH" else None,
                                         token=admin), (("path", "id"), "int_parsing"))


READ_ROUTES = ["list", "get", "get_stage", "board", "summary"]
WRITE_ROUTES = {"create": 201, "put": 200, "patch": 200, "delete": 204, "add_stage": 201,
                "patch_stage": 200, "delete_stage": 204}


@pytest.mark.parametrize("route", READ_ROUTES + list(WRITE_ROUTES))
@pytest.mark.parametrize("role", crm.ROLES)
def test_role_matrix_for_pipelines(client, sess, role, route):
    admin, token = sess.admin, sess.tokens[role]
    target = crm.create_pipeline(client, admin)
    extra = crm.stage_named(target, "Negotiation")  # an empty open stage
    method, path, body = ({"list": ("GET", PIPELINES, None),
                           "create": ("POST", PIPELINES, {"name": "Role " + role})}.get(route) or
                          _routes(target["id"], extra["id"])[route])
    resp = client.request(method, path, body, token=token)
    if route in READ_ROUTES:
        crm.assert_json_response(resp, 200)
        if route == "get":
            assert resp.json == target
        return
    if role in ("viewer", "agent"):
        crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
        assert crm.get_pipeline(client, admin, target["id"]) == target
        assert "Role " + role not in {p["name"] for p in crm.list_pipelines(client, admin)}
        return
    want = WRITE_ROUTES[route]
    if want == 204:
        crm.assert_no_content(resp)
        gone = url(target["id"]) if route == "delete" else crm.stage_url(target["id"], extra["id"])
        crm.assert_error(client.get(gone, token=admin), 404, "NOT_FOUND")
    else:
        crm.assert_json_response(resp, want)


# ---- board ----------------------------------------------------------------------------------


def column(columns, stage_id) -> dict:
    found = [c for c in columns if c["stage"]["id"] == stage_id]
    assert len(found) == 1, f"no single column for stage {stage_id}: {columns}"
    return found[0]


def card_ids(col) -> list[int]:
    return [c["id"] for c in col["deals"]]


def test_board_counts_exact_sums_and_board_order(client, sess, pipe):
    admin, viewer = sess.admin, sess.tokens["viewer"]
    p = pipe
    lead, qual, won = sid(p, "Lead"), sid(p, "Qualified"), sid(p, "Won")
    big = "9999999999999.99"
    lead_deals = [crm.create_deal(client, admin, pipeline_id=p["id"], amount=a, currency=c)
                  for a, c in (("0.10", "BRL"), ("0.20", "BRL"), (big, "USD"), (big, "USD"),
                               (big, "USD"))]
    lead_deals.append(crm.create_deal(client, admin, pipeline_id=p["id"]))  # no amount: USD
    q = crm.create_deal(client, admin, pipeline_id=p["id"], stage_id=qual, amount="100",
                        currency="BRL")
    w = crm.create_deal(client, admin, pipeline_id=p["id"], stage_id=won, amount="5.5",
                        currency="EUR")

    columns = crm.get_board(client, viewer, p["id"])
    assert [c["stage"] for c in columns] == p["stages"], "columns in stage position order"
    lc = column(columns, lead)
    assert lc["count"] == 6 and lc["has_more"] is False
    assert lc["sums"] == {"BRL": "0.30", "USD": "29999999999999.97"}
    assert card_ids(lc) == [d["id"] for d in lead_deals]
    for card, deal in zip(lc["deals"], lead_deals):
        crm.assert_deal_card(card, deal)
    assert (column(columns, qual)["count"], column(columns, qual)["sums"]) == (1, {"BRL": "100.00"})
    assert column(columns, won)["sums"] == {"EUR": "5.50"}
    empty = column(columns, sid(p, "Proposal"))
    assert (empty["count"], empty["sums"], empty["deals"], empty["has_more"]) == (0, {}, [], False)

    # Moves keep counts, sums and order: within the stage to the front, in from another stage.
    d1, d6 = lead_deals[0], lead_deals[5]
    crm.move_deal(client, admin, d6["id"], lead, position=0)
    crm.move_deal(client, admin, q["id"], lead, position=2)
    columns = crm.get_board(client, viewer, p["id"])
    lc = column(columns, lead)
    assert card_ids(lc) == [d6["id"], d1["id"], q["id"]] + [d["id"] for d in lead_deals[1:5]]
    assert lc["count"] == 7 and lc["sums"] == {"BRL": "100.30", "USD": "29999999999999.97"}
    qc = column(columns, qual)
    assert (qc["count"], qc["sums"], qc["deals"]) == (0, {}, [])
    crm.move_deal(client, admin, d1["id"], lead, position=99)  # past the end: last
    crm.move_deal(client, admin, w["id"], lead)                # no position: last
    assert card_ids(column(crm.get_board(client, viewer, p["id"]), lead))[-2:] == \
        [d1["id"], w["id"]]
    crm.assert_no_content(client.delete(crm.deal_url(w["id"]), token=admin))
    lc = column(crm.get_board(client, viewer, p["id"]), lead)
    assert lc["count"] == 7 and "EUR" not in lc["sums"] and w["id"] not in card_ids(lc)


def test_board_pages_per_stage(client, admin, pipe):
    p = pipe
    lead = sid(p, "Lead")
    ids = [crm.create_deal(client, admin, pipeline_id=p["id"], amount="1")["id"] for _ in range(5)]
    crm.create_deal(client, admin, pipeline_id=p["id"], stage_id=sid(p, "Qualified"))

    def lead_col(params):
        return column(crm.get_board(client, admin, p["id"], params), lead)

    first = lead_col({"per_stage": 2})
    assert (card_ids(first), first["has_more"], first["count"]) == (ids[:2], True, 5)
    assert first["sums"] == {"USD": "5.00"}, "sums cover the whole stage, not the page"
    middle = lead_col({"per_stage": 2, "offset": 2})
    assert (card_ids(middle), middle["has_more"]) == (ids[2:4], True)
    last = lead_col({"per_stage": 2, "offset": 4})
    assert (card_ids(last), last["has_more"]) == (ids[4:], False)
    past = lead_col({"offset": 5})
    assert (past["deals"], past["has_more"], past["count"]) == ([], False, 5)
    assert card_ids(lead_col({})) == ids  # default per_stage 20
    only = crm.get_board(client, admin, p["id"], {"stage_id": lead, "per_stage": 1, "offset": 1})
    assert len(only) == 1 and card_ids(only[0]) == ids[1:2] and only[0]["has_more"] is True
    assert only[0]["stage"] == crm.stage_named(p, "Lead")


@pytest.mark.parametrize("params,loc", [({"per_stage": 0}, "per_stage"),
                                        ({"per_stage": 101}, "per_stage"),
                                        ({"per_stage": "x"}, "per_stage"),
                                        ({"offset": -1}, "offset"),
                                        ({"stage_id": "abc"}, "stage_id")])
def test_invalid_board_query_is_422(client, admin, params, loc):
    p = crm.default_pipeline(client, admin)
    crm.assert_validation_locs(client.get(crm.board_url(p["id"], params), token=admin),
                               ("query", loc))


# ---- summary --------------------------------------------------------------------------------


def summary_row(summary, stage_id) -> dict:
    found = [r for r in summary["stages"] if r["stage_id"] == stage_id]
    assert len(found) == 1, f"no single summary row for stage {stage_id}: {summary}"
    return found[0]


def test_summary_weighted_sums_are_rounded_half_up_once_per_currency(client, sess, pipe):
    admin, agent = sess.admin, sess.tokens["agent"]
    p = pipe

    def deal(stage, amount=None, currency="BRL"):
        fields = {"pipeline_id": p["id"], "stage_id": sid(p, stage), "currency": currency}
        if amount is not None:
            fields["amount"] = amount
        crm.create_deal(client, admin, **fields)

    for _ in range(3):
        deal("Qualified", "0.02")        # 25 %: 3 x 0.005 = 0.015 -> 0.02 (each alone: 0.01)
    deal("Lead", "0.05")                 # 10 %: 0.005 -> 0.01
    deal("Lead", "1000", "USD")          # 10 %: 100.00
    deal("Lead")                         # counts, adds nothing
    deal("Proposal", "0.01")             # 50 %: 0.005 -> 0.01
    deal("Won", "10", "USD")             # 100 %
    deal("Lost", "7", "USD")             # 0 %

    summary = crm.get_summary(client, agent, p["id"])
    assert [(r["stage_id"], r["name"], r["kind"], r["probability"]) for r in summary["stages"]] \
        == [(s["id"], s["name"], s["kind"], s["probability"]) for s in p["stages"]]
    want = {
        "Lead": (3, {"BRL": "0.05", "USD": "1000.00"}, {"BRL": "0.01", "USD": "100.00"}),
        "Qualified": (3, {"BRL": "0.06"}, {"BRL": "0.02"}),
        "Proposal": (1, {"BRL": "0.01"}, {"BRL": "0.01"}),
        "Negotiation": (0, {}, {}),
        "Won": (1, {"USD": "10.00"}, {"USD": "10.00"}),
    }
    for name, (count, sums, weighted) in want.items():
        row = summary_row(summary, sid(p, name))
        assert (row["count"], row["sums"], row["weighted"]) == (count, sums, weighted), row
    lost = summary_row(summary, sid(p, "Lost"))
    assert (lost["count"], lost["sums"]) == (1, {"USD": "7.00"}), lost
    assert lost["weighted"] in ({"USD": "0.00"}, {}), lost
    # Totals: BRL 0.015 + 0.005 + 0.005 = 0.025 -> 0.03 rounded once (not 0.02+0.01+0.01).
    assert summary["totals"] == {"count": 9, "sums": {"BRL": "0.12", "USD": "1017.00"},
                                 "weighted": {"BRL": "0.03", "USD": "110.00"}}


def test_summary_filters_by_owner_and_expected_close(client, sess, pipe):
    admin = sess.admin
    agent_id, manager_id = sess.users["agent"]["id"], sess.users["manager"]["id"]
    p = pipe
    for stage, amount, owner, close in (("Lead", "100", agent_id, "2026-01-01"),
                                        ("Lead", "200", manager_id, "2026-02-01"),
                                        ("Qualified", "300", agent_id, "2026-03-01"),
                                        ("Qualified", "400", agent_id, None)):
        fields = {"pipeline_id": p["id"], "stage_id": sid(p, stage), "amount": amount,
                  "owner_id": owner}
        if close:
            fields["expected_close_date"] = close
        crm.create_deal(client, admin, **fields)

    def totals(params):
        return crm.get_summary(client, admin, p["id"], params)["totals"]

    def usd(count, total, weighted):
        return {"count": count, "sums": {"USD": total}, "weighted": {"USD": weighted}}

    assert totals({}) == usd(4, "1000.00", "205.00")
    by_agent = crm.get_summary(client, admin, p["id"], {"owner_id": agent_id})
    assert by_agent["totals"] == usd(3, "800.00", "185.00")
    assert summary_row(by_agent, sid(p, "Qualified"))["sums"] == {"USD": "700.00"}
    assert totals({"owner_id": manager_id}) == usd(1, "200.00", "20.00")
    assert totals({"expected_close_after": "2026-02-01"}) == usd(2, "500.00", "95.00")
    assert totals({"expected_close_before": "2026-02-01"}) == usd(2, "300.00", "30.00")
    assert totals({"expected_close_after": "2026-01-01",
                   "expected_close_before": "2026-01-01"}) == usd(1, "100.00", "10.00")
    assert totals({"owner_id": agent_id, "expected_close_before": "2026-02-28"}) == \
        usd(1, "100.00", "10.00")
    nobody = totals({"owner_id": sess.users["viewer"]["id"]})
    assert nobody == {"count": 0, "sums": {}, "weighted": {}}
    for params, loc in (({"owner_id": "x"}, "owner_id"),
                        ({"expected_close_after": "2026-02-30"}, "expected_close_after"),
                        ({"expected_close_before": "01/02/2026"}, "expected_close_before")):
        crm.assert_validation_locs(client.get(crm.summary_url(p["id"], params), token=admin),
                                   ("query", loc))
