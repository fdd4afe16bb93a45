"""Deals (contract §8, docs/pipeline.md "Deals", "History"): create, read, update (PUT =
PATCH), delete; amounts as exact decimal strings, currencies, references, every validation rule;
status and closed_at from the stage's kind; moves with a board position; the history (also of
two concurrent moves); the list with filters, sorting and paging; a contact's deals and what a
contact's deletion does to them; bulk create with Idempotency-Key; CSV export; custom fields of
entity `deal`; the role matrix; tenant isolation; a restart."""
import csv
import decimal
import io
import json
import secrets
import types

import pytest

import crm

DEALS = crm.DEALS
NOWHERE_ID = crm.NOWHERE_ID
MISSING = crm.MISSING
UPDATE_METHODS = ["PUT", "PATCH"]


@pytest.fixture(scope="module")
def sales(client, admin) -> dict:
    """Tenant A's default pipeline (its stages are never changed in this file)."""
    return crm.default_pipeline(client, admin)


@pytest.fixture(scope="module")
def other_pipe(client, admin) -> dict:
    return crm.create_pipeline(client, admin, name="Other pipeline")


@pytest.fixture(scope="module")
def b(client, sess_b) -> types.SimpleNamespace:
    """Tenant B's records; only B's admin ever changes them."""
    t = sess_b.admin
    contact = crm.create_contact(client, t, first_name="Bea")
    company = crm.create_company(client, t, name="B Clinic")
    pipe = crm.default_pipeline(client, t)
    deal = crm.create_deal(client, t, title="B deal", amount="10", contact_id=contact["id"])
    return types.SimpleNamespace(contact=contact, company=company, pipeline=pipe,
                                 deal=crm.get_deal(client, t, deal["id"]),
                                 admin_id=sess_b.tenant.admin_id)


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


def sid(pipeline, name) -> int:
    return crm.stage_named(pipeline, name)["id"]


def url(deal_id) -> str:
    return crm.deal_url(deal_id)


def search_total(client, token, text) -> int:
    return crm.list_page(client, token, DEALS, {"search": text, "per_page": 1})["total"]


def idem(key) -> dict:
    return {"Idempotency-Key": key}


# ---- create and read ------------------------------------------------------------------------


def test_create_minimal_deal_is_201_with_location_and_defaults(client, admin, sales):
    resp = client.post(DEALS, {"title": "Implant plan"}, token=admin)
    body = crm.assert_json_response(resp, 201)
    crm.assert_deal(body, title="Implant plan", amount=None, currency="USD", contact_id=None,
                    company_id=None, pipeline_id=sales["id"], stage_id=sid(sales, "Lead"),
                    expected_close_date=None, status="open", lost_reason=None,
                    custom_fields={}, closed_at=None)
    assert resp.header("Location") == url(body["id"]), resp.describe()
    assert crm.get_deal(client, admin, body["id"]) == body


def test_create_with_every_field(client, sess, sales):
    admin = sess.admin
    contact = crm.create_contact(client, admin, first_name="Paula")
    company = crm.create_company(client, admin)
    fields = {"title": "  Full treatment  ", "amount": "1500", "currency": "BRL",
              "contact_id": contact["id"], "company_id": company["id"],
              "owner_id": sess.users["agent"]["id"], "pipeline_id": sales["id"],
              "stage_id": sid(sales, "Proposal"), "expected_close_date": "2026-12-31",
              "lost_reason": "n/a", "custom_fields": {"note": "free"}}
    body = crm.create_deal(client, sess.tokens["agent"], **fields)
    crm.assert_deal(body, **{**fields, "title": "Full treatment", "amount": "1500.00",
                             "status": "open", "closed_at": None})
    assert crm.get_deal(client, admin, body["id"]) == body


@pytest.mark.parametrize("sent,stored", [("0", "0.00"), ("1500", "1500.00"), ("12.5", "12.50"),
                                         ("12.05", "12.05"), ("0.1", "0.10"), ("007", "7.00"),
                                         ("9999999999999.99", "9999999999999.99"), (None, None)])
def test_amount_is_an_exact_decimal_string_with_two_digits(client, admin, sent, stored):
    body = crm.create_deal(client, admin, amount=sent)
    assert body["amount"] == stored
    assert crm.get_deal(client, admin, body["id"])["amount"] == stored


def test_title_of_200_characters_is_accepted(client, admin):
    assert crm.create_deal(client, admin, title="t" * 200)["title"] == "t" * 200


A = ("body", "amount")
INVALID_CREATE = [
    ({"title": MISSING}, [(("body", "title"), "missing")]),
    ({"title": ""}, [(("body", "title"), "string_too_short")]),
    ({"title": "   "}, [(("body", "title"), "string_too_short")]),
    ({"title": "t" * 201}, [(("body", "title"), "string_too_long")]),
    ({"title": 5}, [(("body", "title"), "string_type")]),
    ({"amount": 12.5}, [(A, "string_type")]),
    ({"amount": 1500}, [(A, "string_type")]),
    ({"amount": True}, [(A, "string_type")]),
] + [({"amount": bad}, [(A, "value_error")])
     for bad in ("1e3", "12.345", "-", "-5", "", "1,5", " 1", "12.", ".5", "10000000000000",
                 "NaN", "+5")] + [
    ({"status": "pending"}, [(("body", "status"), "enum")]),
    ({"lost_reason": "r" * 501}, [(("body", "lost_reason"), "string_too_long")]),
    ({"custom_fields": []}, [(("body", "custom_fields"), "value_error")]),
    ({"probability": 50}, [(("body", "probability"), "extra_forbidden")]),
] + [({key: value}, [(("body", key), "extra_forbidden")])
     for key, value in (("id", 1), ("tenant_id", 1), ("created_at", "2020-01-01T00:00:00.000000Z"),
                        ("updated_at", "2020-01-01T00:00:00.000000Z"),
                        ("closed_at", "2020-01-01T00:00:00.000000Z"))] + [
    ({"title": "", "amount": "-5", "colour": "red"},
     [(("body", "title"), "string_too_short"), (A, "value_error"),
      (("body", "colour"), "extra_forbidden")]),
]


@pytest.mark.parametrize("override,expected", INVALID_CREATE)
def test_invalid_create_is_422_and_stores_nothing(client, admin, override, expected):
    marker = "Invalid " + secrets.token_hex(4)
    body = crm.with_override({"title": marker}, override)
    crm.assert_validation(client.post(DEALS, body, token=admin), *expected)
    assert search_total(client, admin, marker) == 0


REF_CASES = ["contact of B", "contact of none", "company of B", "company of none",
             "owner of B", "owner of none", "owner deactivated", "pipeline of B",
             "pipeline of none", "stage of another pipeline", "stage not of the pipeline sent",
             "stage of B", "stage of none", "currency unknown", "currency lower case",
             "currency short", "currency number", "date impossible", "date format",
             "date unpadded"]


@pytest.fixture(scope="module")
def refs(client, sess, b, sales, other_pipe) -> dict:
    """Case name -> (fields, the field the 422 names)."""
    gone = crm.create_user(client, sess.admin, "agent")[0]
    crm.assert_no_content(client.delete(f"/api/v1/users/{gone['id']}", token=sess.admin))
    cases = [
        ({"contact_id": b.contact["id"]}, "contact_id"),
        ({"contact_id": NOWHERE_ID}, "contact_id"),
        ({"company_id": b.company["id"]}, "company_id"),
        ({"company_id": NOWHERE_ID}, "company_id"),
        ({"owner_id": b.admin_id}, "owner_id"),
        ({"owner_id": NOWHERE_ID}, "owner_id"),
        ({"owner_id": gone["id"]}, "owner_id"),
        ({"pipeline_id": b.pipeline["id"]}, "pipeline_id"),
        ({"pipeline_id": NOWHERE_ID}, "pipeline_id"),
        ({"stage_id": sid(other_pipe, "Lead")}, "stage_id"),  # the default pipeline is Sales
        ({"pipeline_id": other_pipe["id"], "stage_id": sid(sales, "Lead")}, "stage_id"),
        ({"stage_id": b.pipeline["stages"][0]["id"]}, "stage_id"),
        ({"stage_id": NOWHERE_ID}, "stage_id"),
        ({"currency": "XXY"}, "currency"),
        ({"currency": "brl"}, "currency"),
        ({"currency": "US"}, "currency"),
        ({"currency": 986}, "currency"),
        ({"expected_close_date": "2026-02-30"}, "expected_close_date"),
        ({"expected_close_date": "31/12/2026"}, "expected_close_date"),
        ({"expected_close_date": "2026-1-5"}, "expected_close_date"),
    ]
    return dict(zip(REF_CASES, cases, strict=True))


@pytest.mark.parametrize("case", REF_CASES)
def test_reference_currency_or_date_that_is_not_valid_is_422_at_its_field(client, admin, refs,
                                                                          case):
    fields, loc = refs[case]
    marker = "Ref " + secrets.token_hex(4)
    crm.assert_validation_locs(client.post(DEALS, {"title": marker, **fields}, token=admin),
                               ("body", loc))
    assert search_total(client, admin, marker) == 0
    deal = crm.create_deal(client, admin)
    crm.assert_validation_locs(client.patch(url(deal["id"]), fields, token=admin), ("body", loc))
    assert crm.get_deal(client, admin, deal["id"]) == deal


# ---- status, closed_at, moves ---------------------------------------------------------------


def test_status_follows_the_stage_kind_and_closed_at_is_set_and_cleared(client, admin, sales):
    won = crm.create_deal(client, admin, stage_id=sid(sales, "Won"))
    crm.assert_deal(won, status="won")
    lost = crm.create_deal(client, admin, status="lost", lost_reason="Price")
    crm.assert_deal(lost, status="lost", stage_id=sid(sales, "Lost"), lost_reason="Price")
    assert crm.create_deal(client, admin, status="open")["stage_id"] == sid(sales, "Lead")
    both = crm.create_deal(client, admin, stage_id=sid(sales, "Won"), status="won")
    assert both["status"] == "won"

    reopened = crm.assert_json_response(client.patch(url(won["id"]), {"status": "open"},
                                                     token=admin), 200)
    crm.assert_deal(reopened, status="open", stage_id=sid(sales, "Lead"), closed_at=None)
    moved = crm.move_deal(client, admin, won["id"], sid(sales, "Lost"), lost_reason="Too dear")
    crm.assert_deal(moved, status="lost", lost_reason="Too dear")
    assert moved["closed_at"] >= reopened["updated_at"]
    back = crm.move_deal(client, admin, won["id"], sid(sales, "Negotiation"))
    crm.assert_deal(back, status="open", closed_at=None)
    assert crm.get_deal(client, admin, won["id"]) == back


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_status_sent_on_update_moves_the_deal(client, admin, sales, method):
    deal = crm.create_deal(client, admin, stage_id=sid(sales, "Proposal"))
    won = crm.assert_json_response(client.request(method, url(deal["id"]), {"status": "won"},
                                                  token=admin), 200)
    crm.assert_deal(won, stage_id=sid(sales, "Won"), status="won")
    lost = crm.assert_json_response(client.request(method, url(deal["id"]), {"status": "lost"},
                                                   token=admin), 200)
    crm.assert_deal(lost, stage_id=sid(sales, "Lost"), status="lost")
    assert lost["closed_at"] >= won["closed_at"]
    kinds = [(h["kind"], h["to_stage_id"]) for h in crm.deal_history(client, admin, deal["id"])]
    assert kinds[1:] == [("stage_changed", sid(sales, "Won")), ("stage_changed", sid(sales, "Lost"))]


def test_status_that_contradicts_the_stage_is_422(client, admin, sales):
    marker = "Contradiction " + secrets.token_hex(3)
    for body in ({"stage_id": sid(sales, "Lead"), "status": "won"},
                 {"stage_id": sid(sales, "Won"), "status": "lost"}):
        resp = client.post(DEALS, {"title": marker, **body}, token=admin)
        locs = {tuple(i["loc"]) for i in crm.validation_items(resp)}
        assert locs and locs <= {("body", "status"), ("body", "stage_id")}, resp.describe()
    assert search_total(client, admin, marker) == 0
    deal = crm.create_deal(client, admin)
    resp = client.patch(url(deal["id"]), {"stage_id": sid(sales, "Qualified"), "status": "won"},
                        token=admin)
    assert resp.status == 422, resp.describe()
    assert crm.get_deal(client, admin, deal["id"]) == deal


def test_move_changes_the_stage_and_answers_the_whole_deal(client, sess, sales):
    deal = crm.create_deal(client, sess.admin, amount="20")
    moved = crm.move_deal(client, sess.tokens["agent"], deal["id"], sid(sales, "Qualified"))
    assert moved == {**deal, "stage_id": sid(sales, "Qualified"), "updated_at": moved["updated_at"]}
    assert moved["updated_at"] > deal["updated_at"]
    assert crm.get_deal(client, sess.admin, deal["id"]) == moved


def test_move_position_sets_the_board_order(client, admin):
    p = crm.create_pipeline(client, admin)
    qual = sid(p, "Qualified")
    ids = [crm.create_deal(client, admin, pipeline_id=p["id"], stage_id=qual)["id"]
           for _ in range(3)]
    newcomer = crm.create_deal(client, admin, pipeline_id=p["id"])["id"]

    def order():
        col = [c for c in crm.get_board(client, admin, p["id"]) if c["stage"]["id"] == qual][0]
        return [card["id"] for card in col["deals"]]

    crm.move_deal(client, admin, newcomer, qual, position=1)
    assert order() == [ids[0], newcomer, ids[1], ids[2]]
    crm.move_deal(client, admin, ids[2], qual, position=0)
    assert order() == [ids[2], ids[0], newcomer, ids[1]]
    crm.move_deal(client, admin, ids[2], qual, position=1000)
    assert order() == [ids[0], newcomer, ids[1], ids[2]]
    # Reordering within a stage is not a stage change: no history item.
    assert [h["kind"] for h in crm.deal_history(client, admin, ids[2])] == ["created"]


def test_invalid_moves_are_422_and_change_nothing(client, admin, sales, other_pipe, b):
    deal = crm.create_deal(client, admin)
    for body, expected in (
            ({"stage_id": sid(other_pipe, "Qualified")}, [(("body", "stage_id"), None)]),
            ({"stage_id": b.pipeline["stages"][1]["id"]}, [(("body", "stage_id"), None)]),
            ({"stage_id": NOWHERE_ID}, [(("body", "stage_id"), None)]),
            ({}, [(("body", "stage_id"), "missing")]),
            ({"stage_id": "x"}, [(("body", "stage_id"), "int_parsing")]),
            ({"stage_id": sid(sales, "Won"), "position": -1},
             [(("body", "position"), "greater_than_equal")]),
            ({"stage_id": sid(sales, "Won"), "title": "x"}, [(("body", "title"), "extra_forbidden")]),
    ):
        resp = client.post(crm.move_url(deal["id"]), body, token=admin)
        if expected[0][1] is None:
            crm.assert_validation_locs(resp, expected[0][0])
        else:
            crm.assert_validation(resp, *expected)
    assert crm.get_deal(client, admin, deal["id"]) == deal
    assert len(crm.deal_history(client, admin, deal["id"])) == 1


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_with_stage_id_is_a_move(client, admin, sales, method):
    deal = crm.create_deal(client, admin)
    body = crm.assert_json_response(client.request(
        method, url(deal["id"]), {"stage_id": sid(sales, "Won"), "title": "Signed"}, token=admin),
        200)
    crm.assert_deal(body, stage_id=sid(sales, "Won"), status="won", title="Signed")
    last = crm.deal_history(client, admin, deal["id"])[-1]
    crm.assert_history_item(last, kind="stage_changed", from_stage_id=sid(sales, "Lead"),
                            to_stage_id=sid(sales, "Won"))


def test_changing_the_pipeline_without_a_stage_goes_to_its_first_open_stage(client, admin, sales,
                                                                            other_pipe):
    deal = crm.create_deal(client, admin, stage_id=sid(sales, "Proposal"))
    body = crm.assert_json_response(client.patch(url(deal["id"]),
                                                 {"pipeline_id": other_pipe["id"]}, token=admin), 200)
    crm.assert_deal(body, pipeline_id=other_pipe["id"], stage_id=sid(other_pipe, "Lead"))
    crm.assert_validation_locs(client.patch(url(deal["id"]), {"pipeline_id": sales["id"],
                                                               "stage_id": sid(other_pipe, "Won")},
                                            token=admin), ("body", "stage_id"))
    assert crm.get_deal(client, admin, deal["id"]) == body


# ---- history --------------------------------------------------------------------------------


def test_history_records_creation_amount_and_stage_changes_in_order(client, sess, sales):
    admin, agent = sess.admin, sess.tokens["agent"]
    admin_id, agent_id = sess.tenant.admin_id, sess.users["agent"]["id"]
    deal = crm.create_deal(client, admin, amount="100", currency="BRL")
    for body in ({"amount": "150.5"}, {"title": "Renamed only"}):
        crm.assert_json_response(client.patch(url(deal["id"]), body, token=agent), 200)
    crm.move_deal(client, agent, deal["id"], sid(sales, "Qualified"))
    crm.assert_json_response(client.patch(url(deal["id"]), {"amount": None}, token=admin), 200)

    items = crm.deal_history(client, admin, deal["id"])
    lead, qual = sid(sales, "Lead"), sid(sales, "Qualified")
    want = [
        dict(kind="created", from_stage_id=None, to_stage_id=lead, from_amount=None,
             to_amount="100.00", user_id=admin_id),
        dict(kind="amount_changed", from_amount="100.00", to_amount="150.50", user_id=agent_id),
        dict(kind="stage_changed", from_stage_id=lead, to_stage_id=qual, from_amount=None,
             to_amount=None, user_id=agent_id),
        dict(kind="amount_changed", from_amount="150.50", to_amount=None, user_id=admin_id),
    ]
    assert len(items) == len(want), items
    for item, expected in zip(items, want):
        crm.assert_history_item(item, currency="BRL", workflow_run_id=None, **expected)
    assert [i["id"] for i in items] == sorted(i["id"] for i in items)
    assert [i["at"] for i in items] == sorted(i["at"] for i in items)
    page = crm.list_page(client, sess.tokens["viewer"], crm.history_url(deal["id"]),
                         {"page": 2, "per_page": 1})
    crm.assert_page(page, total=4, page=2, per_page=1)
    assert page["items"] == [items[1]]


def test_two_concurrent_moves_of_one_deal_are_both_in_the_history(client, admin, sales):
    lead, qual, prop = sid(sales, "Lead"), sid(sales, "Qualified"), sid(sales, "Proposal")
    deals = [crm.create_deal(client, admin)["id"] for _ in range(4)]
    jobs = [(d, target) for d in deals for target in (qual, prop)]

    def move(job):
        return client.post(crm.move_url(job[0]), {"stage_id": job[1]}, token=admin)

    for (d, target), resp in zip(jobs, crm.run_parallel(move, jobs, workers=len(jobs))):
        crm.assert_deal(crm.assert_json_response(resp, 200), id=d, stage_id=target)
    for d in deals:
        items = crm.deal_history(client, admin, d)
        assert [i["kind"] for i in items] == ["created", "stage_changed", "stage_changed"], items
        first, second = items[1], items[2]
        assert first["from_stage_id"] == lead and first["to_stage_id"] == second["from_stage_id"]
        assert {first["to_stage_id"], second["to_stage_id"]} == {qual, prop}, items
        assert crm.get_deal(client, admin, d)["stage_id"] == second["to_stage_id"]


# ---- delete ---------------------------------------------------------------------------------


def test_delete_is_204_then_everything_about_the_deal_is_404(client, admin, sales):
    deal = crm.create_deal(client, admin, title="Doomed " + secrets.token_hex(3))
    crm.assert_no_content(client.delete(url(deal["id"]), token=admin))
    for method, path, body in (("GET", url(deal["id"]), None), ("DELETE", url(deal["id"]), None),
                               ("PATCH", url(deal["id"]), {"title": "Zombie"}),
                               ("POST", crm.move_url(deal["id"]), {"stage_id": sid(sales, "Won")}),
                               ("GET", crm.history_url(deal["id"]), None)):
        crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")
    assert search_total(client, admin, deal["title"]) == 0


# ---- list -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def listing(client, cli_env):
    s = crm.tenant_session(client, cli_env, ("viewer", "agent"))
    t = s.admin
    sales = crm.default_pipeline(client, t)
    p2 = crm.create_pipeline(client, t, name="Second")
    crm.create_field(client, t, "deal", name="tier", field_type="text")
    c1, c2 = (crm.create_contact(client, t, first_name=n)["id"] for n in ("C1", "C2"))
    co1, co2 = (crm.create_company(client, t)["id"] for _ in range(2))
    agent_id, admin_id = s.users["agent"]["id"], s.tenant.admin_id
    rows = [
        dict(title="Implant plan", amount="1500.00", currency="BRL", contact_id=c1,
             company_id=co1, owner_id=agent_id, expected_close_date="2026-03-01"),
        dict(title="Cleaning", currency="USD", contact_id=c2, stage_id=sid(sales, "Qualified")),
        dict(title="Implant review", amount="99.99", currency="USD", contact_id=c1,
             expected_close_date="2026-01-15", stage_id=sid(sales, "Won")),
        dict(title="Orthodontics", amount="1500", currency="BRL", company_id=co2,
             owner_id=admin_id, expected_close_date="2026-03-01", stage_id=sid(sales, "Lost")),
        dict(title="Whitening", amount="0.50", currency="EUR", contact_id=c2,
             pipeline_id=p2["id"], expected_close_date="2025-12-31"),
        dict(title="X-ray", amount="250", currency="USD", owner_id=agent_id,
             stage_id=sid(sales, "Proposal"), custom_fields={"tier": "gold"}),
    ]
    deals = [crm.create_deal(client, t, **r) for r in rows]
    other = crm.tenant_session(client, cli_env)
    for r in rows:
        crm.create_deal(client, other.admin, title=r["title"], amount=r.get("amount"))
    return types.SimpleNamespace(s=s, token=s.tokens["viewer"], sales=sales, p2=p2, c1=c1, c2=c2,
                                 co1=co1, co2=co2, agent_id=agent_id, admin_id=admin_id,
                                 deals=[crm.get_deal(client, t, d["id"]) for d in deals])


def ids_of(L, indexes) -> list[int]:
    return [L.deals[i]["id"] for i in indexes]


def list_ids(client, token, params) -> list[int]:
    return [d["id"] for d in crm.list_all(client, token, DEALS, params)]


def test_deal_list_defaults_pages_and_items(client, listing):
    L = listing
    body = crm.list_page(client, L.token, DEALS)
    crm.assert_page(body, total=6, page=1, per_page=20)
    assert body["items"] == L.deals, "items are whole deals in id order"
    seen = []
    for page in (1, 2, 3):
        body = crm.list_page(client, L.token, DEALS, {"page": page, "per_page": 4})
        crm.assert_page(body, total=6, page=page, per_page=4)
        seen += [d["id"] for d in body["items"]]
    assert seen == ids_of(L, range(6)) and body["items"] == []


FILTERS = [
    ("pipeline p2", lambda L: {"pipeline_id": L.p2["id"]}, [4]),
    ("pipeline sales", lambda L: {"pipeline_id": L.sales["id"]}, [0, 1, 2, 3, 5]),
    ("stage lead", lambda L: {"stage_id": sid(L.sales, "Lead")}, [0]),
    ("status won", {"status": "won"}, [2]),
    ("status open", {"status": "open"}, [0, 1, 4, 5]),
    ("status lost", {"status": "lost"}, [3]),
    ("owner", lambda L: {"owner_id": L.agent_id}, [0, 5]),
    ("contact", lambda L: {"contact_id": L.c1}, [0, 2]),
    ("company", lambda L: {"company_id": L.co2}, [3]),
    ("currency", {"currency": "BRL"}, [0, 3]),
    ("amount_min", {"amount_min": "99.99"}, [0, 2, 3, 5]),
    ("amount_max", {"amount_max": "99.99"}, [2, 4]),
    ("amount range", {"amount_min": "250", "amount_max": "1500"}, [0, 3, 5]),
    ("close after", {"expected_close_after": "2026-01-15"}, [0, 2, 3]),
    ("close before", {"expected_close_before": "2026-01-15"}, [2, 4]),
    ("close on", {"expected_close_after": "2026-03-01", "expected_close_before": "2026-03-01"},
     [0, 3]),
    ("search", {"search": "implant"}, [0, 2]),
    ("search case", {"search": "IMPLANT REV"}, [2]),
    ("search inner", {"search": "ray"}, [5]),
    ("search percent", {"search": "%"}, []),
    ("custom field", {"cf.tier": "gold"}, [5]),
    ("combined", {"currency": "USD", "status": "open"}, [1, 5]),
]


@pytest.mark.parametrize("params,indexes", [(p, i) for _, p, i in FILTERS],
                         ids=[n for n, _, _ in FILTERS])
def test_deal_list_filters(client, listing, params, indexes):
    params = params(listing) if callable(params) else params
    assert list_ids(client, listing.token, params) == ids_of(listing, indexes)


@pytest.mark.parametrize("field,order,indexes", [
    ("amount", "asc", [4, 2, 5, 0, 3, 1]),                 # nulls last, ties on id
    ("amount", "desc", [1, 0, 3, 5, 2, 4]),                # nulls first, ties still on id asc
    ("title", "asc", [1, 0, 2, 3, 4, 5]),
    ("title", "desc", [5, 4, 3, 2, 0, 1]),
    ("expected_close_date", "asc", [4, 2, 0, 3, 1, 5]),
    ("expected_close_date", "desc", [1, 5, 0, 3, 2, 4]),
    ("closed_at", "asc", [2, 3, 0, 1, 4, 5]),
    ("closed_at", "desc", [0, 1, 4, 5, 3, 2]),
    ("currency", "asc", [0, 3, 4, 1, 2, 5]),
    ("id", "desc", [5, 4, 3, 2, 1, 0]),
])
def test_deal_list_sorting(client, listing, field, order, indexes):
    got = list_ids(client, listing.token, {"sort_by": field, "sort_order": order})
    assert got == ids_of(listing, indexes)


def _reference_order(deals, field, desc):
    """The documented order, computed here: nulls last ascending and first descending, ties
    on id ascending."""
    def value(d):
        v = d[field]
        return decimal.Decimal(v) if field == "amount" else v

    present = sorted((d for d in deals if d[field] is not None), key=lambda d: d["id"])
    present.sort(key=value, reverse=desc)  # stable: ties keep id order
    nulls = sorted((d for d in deals if d[field] is None), key=lambda d: d["id"])
    return [d["id"] for d in (nulls + present if desc else present + nulls)]


@pytest.mark.parametrize("field", ["id", "amount", "currency", "pipeline_id", "stage_id",
                                   "owner_id", "contact_id", "company_id", "expected_close_date",
                                   "created_at", "updated_at", "closed_at"])
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_every_sort_key_orders_like_the_reference(client, listing, field, order):
    got = list_ids(client, listing.token, {"sort_by": field, "sort_order": order})
    assert got == _reference_order(listing.deals, field, order == "desc")


@pytest.mark.parametrize("params,loc", [
    ({"sort_by": "probability"}, "sort_by"), ({"sort_order": "up"}, "sort_order"),
    ({"status": "pending"}, "status"), ({"per_page": 101}, "per_page"), ({"page": 0}, "page"),
    ({"amount_min": "1e3"}, "amount_min"), ({"amount_max": "-5"}, "amount_max"),
    ({"expected_close_after": "2026-13-01"}, "expected_close_after"),
    ({"currency": "usd"}, "currency"), ({"pipeline_id": "abc"}, "pipeline_id"),
    ({"owner_id": "x"}, "owner_id"),
])
def test_invalid_deal_list_query_is_422(client, listing, params, loc):
    crm.assert_validation_locs(client.get(crm.with_query(DEALS, params), token=listing.token),
                               ("query", loc))


def test_contact_deals_lists_only_that_contacts_deals(client, listing, b):
    L = listing
    body = crm.list_page(client, L.token, crm.contact_deals_url(L.c1))
    crm.assert_page(body, total=2)
    assert body["items"] == [L.deals[0], L.deals[2]]
    assert [d["id"] for d in crm.list_page(client, L.token, crm.contact_deals_url(
        L.c1, {"status": "won"}))["items"]] == ids_of(L, [2])
    lonely = crm.create_contact(client, L.s.admin, first_name="Lonely")
    crm.assert_page(crm.list_page(client, L.token, crm.contact_deals_url(lonely["id"])), total=0)
    crm.assert_error(client.get(crm.contact_deals_url(b.contact["id"]), token=L.token), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.get(crm.contact_deals_url(NOWHERE_ID), token=L.token), 404,
                     "NOT_FOUND")


def test_deleting_a_contact_or_company_leaves_its_deals_without_it(client, admin):
    contact = crm.create_contact(client, admin, first_name="Leaving")
    company = crm.create_company(client, admin)
    keeper = crm.create_contact(client, admin, first_name="Staying")
    held = [crm.create_deal(client, admin, contact_id=contact["id"], company_id=company["id"])
            for _ in range(2)]
    kept = crm.create_deal(client, admin, contact_id=keeper["id"])
    crm.assert_no_content(client.delete(crm.contact_url(contact["id"]), token=admin))
    crm.assert_no_content(client.delete(crm.company_url(company["id"]), token=admin))

    def cleared():
        got = [crm.get_deal(client, admin, d["id"]) for d in held]
        return all(g["contact_id"] is None and g["company_id"] is None for g in got) and got

    got = crm.eventually(cleared, 5.0)
    assert got, [crm.get_deal(client, admin, d["id"]) for d in held]
    for before, after in zip(held, got):
        assert {**after, "updated_at": before["updated_at"]} == \
            {**before, "contact_id": None, "company_id": None}
    assert crm.get_deal(client, admin, kept["id"])["contact_id"] == keeper["id"]
    assert crm.list_page(client, admin, DEALS, {"contact_id": contact["id"]})["total"] == 0
    crm.assert_error(client.get(crm.contact_deals_url(contact["id"]), token=admin), 404,
                     "NOT_FOUND")
    crm.assert_validation_locs(client.post(DEALS, {"title": "Late", "contact_id": contact["id"]},
                                           token=admin), ("body", "contact_id"))


# ---- bulk -----------------------------------------------------------------------------------


def test_bulk_creates_each_item_on_its_own(client, admin, b):
    m = secrets.token_hex(4)
    items = [{"title": f"Bulk A {m}", "amount": "10"}, {"title": ""},
             {"title": f"Bulk C {m}", "amount": "1e3"},
             {"title": f"Bulk D {m}", "contact_id": b.contact["id"]},
             {"title": f"Bulk E {m}", "currency": "EUR"}]
    body = crm.assert_json_response(client.post(crm.DEALS_BULK, {"deals": items}, token=admin),
                                    200)
    results = crm.assert_bulk_results(body, 5)
    errors = {r["index"]: {tuple(e["loc"]) for e in r["errors"]} for r in results
              if "errors" in r}
    assert errors == {1: {("body", "deals", 1, "title")}, 2: {("body", "deals", 2, "amount")},
                      3: {("body", "deals", 3, "contact_id")}}
    a, e = crm.get_deal(client, admin, results[0]["id"]), crm.get_deal(client, admin,
                                                                        results[4]["id"])
    assert (a["title"], a["amount"], e["currency"]) == (f"Bulk A {m}", "10.00", "EUR")
    assert search_total(client, admin, m) == 2


@pytest.mark.parametrize("body,loc", [({"deals": [{"title": "x"}] * 1001}, ("body", "deals")),
                                      ({"deals": []}, ("body", "deals")),
                                      ({}, ("body", "deals")),
                                      ({"deals": [{"title": "x"}], "more": 1}, ("body", "more"))])
def test_invalid_bulk_is_422_and_creates_nothing(client, admin, body, loc):
    m = secrets.token_hex(4)
    for item in body.get("deals", []):
        item["title"] = m
    before = crm.list_total(client, admin, DEALS)
    crm.assert_validation_locs(client.post(crm.DEALS_BULK, body, token=admin), loc)
    assert crm.list_total(client, admin, DEALS) == before


def test_bulk_of_1000_deals_creates_them_all(client, fresh):
    items = [{"title": f"Deal {i:04d}", "amount": f"{i}.01"} for i in range(1000)]
    body = crm.assert_json_response(client.post(crm.DEALS_BULK, {"deals": items},
                                                token=fresh.admin), 200)
    results = crm.assert_bulk_results(body, 1000)
    assert all("id" in r for r in results), [r for r in results if "id" not in r][:3]
    assert crm.list_total(client, fresh.admin, DEALS) == 1000
    lead = crm.get_board(client, fresh.admin, crm.default_pipeline(client, fresh.admin)["id"])[0]
    assert lead["count"] == 1000 and lead["sums"] == {"USD": "499510.00"}  # Σi + 10.00


def test_idempotency_key_replays_create_and_bulk(client, fresh):
    t = fresh.admin
    key = "deal-" + secrets.token_hex(8)
    first = crm.assert_json_response(client.post(DEALS, {"title": "Once"}, token=t,
                                                 headers=idem(key)), 201)
    again = client.post(DEALS, {"title": "Once"}, token=t, headers=idem(key))
    assert again.status == 201 and again.json == first, again.describe()
    crm.assert_error(client.post(DEALS, {"title": "Other"}, token=t, headers=idem(key)), 409,
                     "CONFLICT")
    assert crm.list_total(client, t, DEALS) == 1

    bkey = "bulk-" + secrets.token_hex(8)
    body = {"deals": [{"title": "B1"}, {"title": ""}, {"title": "B3"}]}
    one = crm.assert_json_response(client.post(crm.DEALS_BULK, body, token=t, headers=idem(bkey)),
                                   200)
    crm.assert_bulk_results(one, 3)
    two = client.post(crm.DEALS_BULK, body, token=t, headers=idem(bkey))
    assert two.status == 200 and two.json == one, two.describe()
    assert crm.list_total(client, t, DEALS) == 3
    crm.assert_error(client.post(crm.DEALS_BULK, {"deals": [{"title": "B4"}]}, token=t,
                                 headers=idem(bkey)), 409, "CONFLICT")
    assert crm.list_total(client, t, DEALS) == 3


# ---- export ---------------------------------------------------------------------------------


def export(client, token, params=None) -> list[list[str]]:
    resp = client.get(crm.with_query(crm.DEALS_EXPORT, params), token=token)
    assert resp.status == 200, resp.describe()
    assert (resp.header("Content-Type") or "").startswith("text/csv"), resp.describe()
    return list(csv.reader(io.StringIO(resp.body.decode("utf-8"), newline="")))


def csv_cells(deal) -> list[str]:
    def cell(v):
        text = "" if v is None else str(v)
        return "'" + text if text[:1] in ("=", "+", "-", "@") else text
    return [cell(deal[k]) for k in crm.DEAL_EXPORT_HEADER]


def assert_row_is(row, deal) -> None:
    want = csv_cells(deal)
    assert len(row) == len(want), row
    assert row[:12] + row[13:] == want[:12] + want[13:], (row, want)
    assert json.loads(row[12]) == deal["custom_fields"], row


def test_export_has_the_header_and_the_list_rows_in_list_order(client, listing):
    L = listing
    rows = export(client, L.token)
    assert rows[0] == crm.DEAL_EXPORT_HEADER
    assert len(rows) == 7
    for row, deal in zip(rows[1:], L.deals):
        assert_row_is(row, deal)
    for params in ({"status": "won"}, {"sort_by": "amount", "sort_order": "desc"},
                   {"search": "implant"}, {"currency": "USD", "sort_by": "title"}):
        assert [int(r[0]) for r in export(client, L.token, params)[1:]] == \
            list_ids(client, L.token, params), params
    crm.assert_validation_locs(client.get(crm.with_query(crm.DEALS_EXPORT, {"status": "x"}),
                                          token=L.token), ("query", "status"))


def test_export_escapes_cells_that_begin_like_a_formula(client, admin, sales):
    m = secrets.token_hex(4)
    made = [crm.create_deal(client, admin, title=t + m, stage_id=sid(sales, "Lost"),
                            lost_reason="=cmd|' /C calc'!A0")
            for t in ("=SUM(A1) ", "+1 upsell ", "-discount ", "@import ")]
    rows = export(client, admin, {"search": m})
    assert [int(r[0]) for r in rows[1:]] == [d["id"] for d in made]
    for row, deal in zip(rows[1:], made):
        assert row[1] == "'" + deal["title"], row
        assert row[11] == "'=cmd|' /C calc'!A0", row
        assert_row_is(row, crm.get_deal(client, admin, deal["id"]))


# ---- custom fields --------------------------------------------------------------------------


def test_custom_fields_are_validated_against_the_deal_definitions(client, fresh):
    t = fresh.admin
    crm.create_field(client, t, "deal", name="units", field_type="integer")
    crm.create_field(client, t, "deal", name="tier", field_type="select",
                     options=["gold", "silver"])
    crm.create_field(client, t, "contact", name="vip", field_type="boolean")
    cf = ("body", "custom_fields")
    for bad in ({"units": "three"}, {"units": 1.5}, {"tier": "bronze"}):
        key = next(iter(bad))
        crm.assert_validation(client.post(DEALS, {"title": "Bad", "custom_fields": bad}, token=t),
                              ((*cf, key), "value_error"))
    assert crm.list_total(client, t, DEALS) == 0
    # A contact field's name is a free key on a deal.
    deal = crm.create_deal(client, t, custom_fields={"units": 3, "tier": "gold", "vip": "maybe"})
    assert deal["custom_fields"] == {"units": 3, "tier": "gold", "vip": "maybe"}
    body = crm.assert_json_response(client.patch(url(deal["id"]), {"custom_fields": {
        "tier": "silver", "vip": None}}, token=t), 200)
    assert body["custom_fields"] == {"units": 3, "tier": "silver"}
    crm.assert_validation(client.patch(url(deal["id"]), {"custom_fields": {"units": "x"}},
                                       token=t), ((*cf, "units"), "value_error"))
    assert crm.get_deal(client, t, deal["id"]) == body
    assert [d["id"] for d in crm.list_all(client, t, DEALS, {"cf.tier": "silver"})] == [deal["id"]]

    ref = crm.create_field(client, t, "deal", name="ref", field_type="text", required=True)
    crm.assert_validation(client.post(DEALS, {"title": "No ref"}, token=t),
                          ((*cf, "ref"), "missing"))
    crm.create_deal(client, t, custom_fields={"ref": "R-1"})
    crm.assert_json_response(client.patch(url(deal["id"]), {"title": "Older than ref"}, token=t),
                             200)
    results = crm.assert_bulk_results(crm.assert_json_response(client.post(
        crm.DEALS_BULK, {"deals": [{"title": "x", "custom_fields": {"ref": "R-2"}},
                                   {"title": "y"}]}, token=t), 200), 2)
    assert "id" in results[0] and {(tuple(e["loc"]), e["type"]) for e in results[1]["errors"]} \
        == {(("body", "deals", 1, "custom_fields", "ref"), "missing")}
    # Writing a key of an inactive (soft-deleted) field is refused.
    crm.assert_json_response(client.delete(crm.field_url("deal", ref["field_id"]), token=t), 200)
    crm.assert_validation_locs(client.patch(url(deal["id"]), {"custom_fields": {"ref": "R-3"}},
                                            token=t), (*cf, "ref"))


# ---- roles, tenants, ids --------------------------------------------------------------------

ROLE_RESULTS = {
    "list": (200, 200, 200, 200), "get": (200, 200, 200, 200), "history": (200, 200, 200, 200),
    "export": (200, 200, 200, 200), "create": (403, 201, 201, 201), "put": (403, 200, 200, 200),
    "patch": (403, 200, 200, 200), "move": (403, 200, 200, 200), "bulk": (403, 200, 200, 200),
    "delete": (403, 403, 204, 204),
}


@pytest.mark.parametrize("route", list(ROLE_RESULTS))
@pytest.mark.parametrize("role", crm.ROLES)
def test_role_matrix_for_deals(client, sess, sales, role, route):
    admin, token = sess.admin, sess.tokens[role]
    target = crm.create_deal(client, admin, title="Target " + secrets.token_hex(3))
    marker = "Role" + secrets.token_hex(4)
    method, path, body = {
        "list": ("GET", DEALS, None), "get": ("GET", url(target["id"]), None),
        "history": ("GET", crm.history_url(target["id"]), None),
        "export": ("GET", crm.DEALS_EXPORT, None), "create": ("POST", DEALS, {"title": marker}),
        "put": ("PUT", url(target["id"]), {"title": marker}),
        "patch": ("PATCH", url(target["id"]), {"title": marker}),
        "move": ("POST", crm.move_url(target["id"]), {"stage_id": sid(sales, "Qualified")}),
        "bulk": ("POST", crm.DEALS_BULK, {"deals": [{"title": marker}]}),
        "delete": ("DELETE", url(target["id"]), None),
    }[route]
    resp = client.request(method, path, body, token=token)
    want = ROLE_RESULTS[route][crm.ROLES.index(role)]
    if want == 403:
        crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
        assert crm.get_deal(client, admin, target["id"]) == target
        assert search_total(client, admin, marker) == 0
    elif want == 204:
        crm.assert_no_content(resp)
        crm.assert_error(client.get(url(target["id"]), token=admin), 404, "NOT_FOUND")
    elif route == "export":
        assert resp.status == 200 and (resp.header("Content-Type") or "").startswith("text/csv")
    else:
        crm.assert_json_response(resp, want)
        if route == "get":
            assert resp.json == target
        elif route in ("create", "put", "patch", "bulk"):
            assert search_total(client, admin, marker) == 1
        elif route == "move":
            assert crm.get_deal(client, admin, target["id"])["stage_id"] == sid(sales, "Qualified")


def _deal_routes(deal_id, stage_id):
    return [("GET", url(deal_id), None), ("PUT", url(deal_id), {"title": "Hijacked"}),
            ("PATCH", url(deal_id), {"amount": "1"}), ("DELETE", url(deal_id), None),
            ("POST", crm.move_url(deal_id), {"stage_id": stage_id}),
            ("GET", crm.history_url(deal_id), None)]


@pytest.mark.parametrize("i", range(6))
@pytest.mark.parametrize("role", ["viewer", "admin"])
def test_another_tenants_deal_is_403_and_unchanged(client, sess, sess_b, b, role, i):
    method, path, body = _deal_routes(b.deal["id"], b.pipeline["stages"][1]["id"])[i]
    crm.assert_error(client.request(method, path, body, token=sess.tokens[role]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_deal(client, sess_b.admin, b.deal["id"]) == b.deal


@pytest.mark.parametrize("i", range(6))
def test_deal_of_no_tenant_is_404(client, admin, sales, i):
    method, path, body = _deal_routes(NOWHERE_ID, sid(sales, "Won"))[i]
    crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")


def test_deal_list_never_shows_another_tenants_deals(client, admin, b):
    mine = {d["id"] for d in crm.list_all(client, admin, DEALS)}
    assert mine and b.deal["id"] not in mine
    assert search_total(client, admin, "B deal") == 0
    assert str(b.deal["id"]) not in {r[0] for r in export(client, admin)[1:]}


@pytest.mark.parametrize("i", range(6))
def test_deal_routes_without_token_are_401(client, i):
    method, path, body = _deal_routes(1, 1)[i]
    crm.assert_error(client.request(method, path, body), 401, "INVALID_CREDENTIALS")
    crm.assert_error(client.post(DEALS, {"title": "x"}), 401, "INVALID_CREDENTIALS")


@pytest.mark.parametrize("path", ["/api/v1/deals/abc", "/api/v1/deals/1.5/history"])
def test_non_integer_deal_id_is_422(client, admin, path):
    crm.assert_validation(client.get(path, token=admin), (("path", "id"), "int_parsing"))


# ---- restart --------------------------------------------------------------------------------


def test_deals_stages_and_history_survive_a_restart(database, redis_url, migrated, cli_env):
    first = crm.start_server(database.url, redis_url, label="carecrm[deals-restart-1]")
    second = None
    try:
        c = first.client()
        s = crm.tenant_session(c, cli_env, ("agent",))
        t, agent = s.admin, s.tokens["agent"]
        sales = crm.default_pipeline(c, t)
        p = crm.create_pipeline(c, t, name="Aligners", stages=[
            {"name": "Scan"}, {"name": "Plan", "probability": 60},
            {"name": "Fitted", "kind": "won"}, {"name": "Dropped", "kind": "lost"}])
        crm.assert_json_response(c.post(crm.stages_url(p["id"]), {"name": "Review"}, token=t), 201)
        contact = crm.create_contact(c, t, first_name="Rita")
        d1 = crm.create_deal(c, t, title='Quote "Q", comma', amount="1500.5", currency="BRL",
                             contact_id=contact["id"], expected_close_date="2026-06-30")
        d2, d3 = (crm.create_deal(c, t, title=f"Aligner {i}", pipeline_id=p["id"], amount="99.99")
                  for i in (2, 3))
        gone = crm.create_deal(c, t, title="Gone")
        crm.move_deal(c, agent, d1["id"], sid(sales, "Qualified"))
        crm.assert_json_response(c.patch(url(d1["id"]), {"amount": "1600"}, token=agent), 200)
        crm.move_deal(c, agent, d2["id"], sid(p, "Fitted"))
        crm.move_deal(c, t, d3["id"], sid(p, "Plan"))
        d4 = crm.create_deal(c, t, title="Aligner 4", pipeline_id=p["id"], stage_id=sid(p, "Plan"),
                             amount="0.01")
        crm.move_deal(c, t, d4["id"], sid(p, "Plan"), position=0)
        crm.assert_no_content(c.delete(url(gone["id"]), token=t))
        ids = [d1["id"], d2["id"], d3["id"], d4["id"]]

        def snapshot(cl, token):
            return {
                "pipelines": crm.list_pipelines(cl, token),
                "deals": crm.list_all(cl, token, DEALS),
                "one": [crm.get_deal(cl, token, i) for i in ids],
                "history": [crm.deal_history(cl, token, i) for i in ids],
                "boards": [crm.get_board(cl, token, x["id"]) for x in (sales, p)],
                "summaries": [crm.get_summary(cl, token, x["id"]) for x in (sales, p)],
                "contact_deals": crm.list_page(cl, token, crm.contact_deals_url(contact["id"])),
            }

        before = snapshot(c, t)
        assert [h["kind"] for h in before["history"][0]] == ["created", "stage_changed",
                                                             "amount_changed"]
        plan = [col for col in before["boards"][1] if col["stage"]["id"] == sid(p, "Plan")][0]
        assert [card["id"] for card in plan["deals"]] == [d4["id"], d3["id"]]
        first.stop(check=True)

        second = crm.start_server(database.url, redis_url, label="carecrm[deals-restart-2]")
        c2 = second.client()
        token = crm.login(c2, s.tenant.admin_email, s.tenant.admin_password)["access_token"]
        assert snapshot(c2, token) == before
        crm.assert_error(c2.get(url(gone["id"]), token=token), 404, "NOT_FOUND")
        # Board order and history carry on from where they were.
        crm.move_deal(c2, token, d2["id"], sid(p, "Plan"), position=1)
        plan = [col for col in crm.get_board(c2, token, p["id"])
                if col["stage"]["id"] == sid(p, "Plan")][0]
        assert [card["id"] for card in plan["deals"]] == [d4["id"], d2["id"], d3["id"]]
        assert len(crm.deal_history(c2, token, d2["id"])) == 3
        fresh_deal = crm.create_deal(c2, token, title="After restart")
        assert fresh_deal["id"] not in ids + [gone["id"]]
        second.stop(check=True)
    finally:
        for srv in (first, second):
            if srv is not None:
                srv.kill()
                srv.cleanup()
