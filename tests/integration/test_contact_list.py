"""The contact list (spec "Page of contacts", "List query parameters", "Limits"; contract §4):
paging, sorting, search and filters, on a fixed data set of one tenant, next to a second tenant
whose look-alike contacts must never show."""
import datetime
import functools
import math

import pytest

import crm

CONTACTS = crm.CONTACTS

# Index -> contact. Names, e-mails and phones are chosen so that case-insensitive ordering is the
# same under any collation (letters only up to the first difference). Company: "acme", "globex".
DATA = [
    dict(first_name="Alice", last_name="Zephyr", email="alice@alpha.test", phone="+14155550001",
         status="active", source="website", tags=["VIP", "cardio"],
         custom_fields={"age": 42, "vip": True, "plan": "gold"}, company="acme"),
    dict(first_name="bob", last_name="Young", email="bob@beta.test", phone="+14155550002",
         status="inactive", source="referral", tags=["cardio"],
         custom_fields={"age": "42", "plan": "silver"}, company="acme"),
    dict(first_name="Carol", last_name=None, email=None, phone="+442071234567",
         status="qualified", source=None, tags=[], custom_fields={"age": 30}, company=None),
    dict(first_name="dave", last_name="xavier", email="dave@gamma.test", phone=None,
         status="unqualified", source="social", tags=["vip"], custom_fields={"vip": False},
         company="globex"),
    dict(first_name="Eve", last_name="Walker", email="eve@delta.test", phone="+14155550005",
         status="active", source="ads", tags=["Neuro", "VIP"],
         custom_fields={"age": 42.5, "plan": "gold"}, company=None),
    dict(first_name="alice", last_name="Anderson", email="amy@zeta.test", phone="+14155550006",
         status="qualified", source="api", tags=["Cardio", "neuro"],
         custom_fields={"plan": "platinum"}, company="globex"),
    dict(first_name="Frank", last_name="zephyr", email="frank@eta.test", phone=None,
         status="inactive", source="import", tags=[], custom_fields={}, company=None),
    dict(first_name="Grace", last_name=None, email="grace@theta.test", phone="+33123456789",
         status="active", source="manual", tags=["vip", "cardio", "neuro"],
         custom_fields={"age": 42}, company="acme"),
    dict(first_name="heidi", last_name="Brown", email=None, phone="+4930123456",
         status="unqualified", source="website", tags=[], custom_fields={"vip": True},
         company=None),
    dict(first_name="Ivan", last_name="cole", email="ivan@iota.test", phone="+14155550010",
         status="active", source=None, tags=["Neuro"], custom_fields={"age": "forty"},
         company="acme"),
    dict(first_name="Judy", last_name="Doe", email="judy@kappa.test", phone="+14155550011",
         status="qualified", source="referral", tags=[], custom_fields={}, company=None),
    dict(first_name="karl", last_name="Evans", email="Karl@lambda.test", phone=None,
         status="active", source="website", tags=["VIP"], custom_fields={"plan": "gold", "age": 41},
         company="globex"),
]
TOUCHED = [3, 0, 8]  # updated after every contact was created, in this order
SORT_FIELDS = ["id", "first_name", "last_name", "email", "phone", "status", "source",
               "created_at", "updated_at"]


class Dataset:
    def __init__(self, token, contacts, companies, created_last_updated_at, other_ids):
        self.token = token
        self.contacts = contacts          # index -> stored contact (GET shape)
        self.companies = companies        # name -> company
        self.t_before_touch = created_last_updated_at
        self.other_ids = other_ids        # ids of the look-alike tenant's contacts

    def ids(self, indexes) -> list[int]:
        return [self.contacts[i]["id"] for i in indexes]

    def index_of(self, contact_id) -> int:
        return next(i for i, c in enumerate(self.contacts) if c["id"] == contact_id)


@pytest.fixture(scope="module")
def ds(client, cli_env) -> Dataset:
    s = crm.tenant_session(client, cli_env, ("viewer",))
    token = s.tokens["viewer"]
    companies = {name: crm.create_company(client, s.admin, name=name.title() + " Health")
                 for name in ("acme", "globex")}
    ids = []
    for row in DATA:
        body = {k: v for k, v in row.items() if k != "company" and v is not None and v != []}
        if row["company"]:
            body["company_id"] = companies[row["company"]]["id"]
        ids.append(crm.create_contact(client, s.admin, **body)["id"])
    last = crm.get_contact(client, s.admin, ids[-1])["updated_at"]
    for i in TOUCHED:
        resp = client.patch(crm.contact_url(ids[i]), {"custom_fields": {"touched": i}},
                            token=s.admin)
        crm.assert_json_response(resp, 200)
    contacts = [crm.get_contact(client, token, cid) for cid in ids]

    other = crm.tenant_session(client, cli_env)
    other_company = crm.create_company(client, other.admin, name="Acme Health")
    other_ids = [crm.create_contact(
        client, other.admin, first_name=row["first_name"], last_name=row["last_name"],
        email=row["email"], phone=row["phone"], status=row["status"], source=row["source"],
        tags=row["tags"], custom_fields=row["custom_fields"],
        company_id=other_company["id"])["id"] for row in DATA[:6]]
    return Dataset(token, contacts, companies, last, other_ids)


def fetch(client, ds, params, status=200):
    return crm.assert_json_response(client.get(crm.with_query(CONTACTS, params), token=ds.token),
                                    status)


def fetch_all_ids(client, ds, params) -> list[int]:
    items = crm.list_all(client, ds.token, CONTACTS, params)
    assert not {i["id"] for i in items} & set(ds.other_ids), "another tenant's contact is listed"
    return [i["id"] for i in items]


# ---- the reference model --------------------------------------------------------------------


def compare(field, order):
    """Strings case-insensitively, nulls last in asc and first in desc, ties on id asc."""

    def key(value):
        return value.lower() if isinstance(value, str) else value

    def cmp(a, b):
        va, vb = a[field], b[field]
        if va is None or vb is None:
            if va is None and vb is None:
                return (a["id"] > b["id"]) - (a["id"] < b["id"])
            nulls_first = order == "desc"
            return (-1 if nulls_first else 1) if va is None else (1 if nulls_first else -1)
        ka, kb = key(va), key(vb)
        if ka != kb:
            result = (ka > kb) - (ka < kb)
            return -result if order == "desc" else result
        return (a["id"] > b["id"]) - (a["id"] < b["id"])

    return functools.cmp_to_key(cmp)


def sorted_ids(ds, field, order, contacts=None) -> list[int]:
    contacts = ds.contacts if contacts is None else contacts
    return [c["id"] for c in sorted(contacts, key=compare(field, order))]


def matches_search(c, needle) -> bool:
    n = needle.lower()
    values = [c["first_name"], c["last_name"], c["email"], c["phone"]]
    if c["last_name"] is not None:
        values.append(f'{c["first_name"]} {c["last_name"]}')
    return any(v is not None and n in v.lower() for v in values)


def cf_equals(stored, text) -> bool:
    if isinstance(stored, bool):
        return text == ("true" if stored else "false")
    if isinstance(stored, (int, float)):
        try:
            return float(text) == stored
        except ValueError:
            return False
    return isinstance(stored, str) and stored == text


def model_ids(ds, predicate) -> list[int]:
    return [c["id"] for c in ds.contacts if predicate(c)]


# ---- paging ---------------------------------------------------------------------------------


def test_default_page_is_1_with_20_per_page_in_id_order(client, ds):
    body = fetch(client, ds, None)
    crm.assert_page(body, total=12, page=1, per_page=20)
    assert body["pages"] == 1
    assert [i["id"] for i in body["items"]] == sorted(c["id"] for c in ds.contacts)
    for item, stored in zip(body["items"], ds.contacts):
        crm.assert_contact_item(item)
        assert item == {k: stored[k] for k in crm.CONTACT_ITEM_KEYS}


@pytest.mark.parametrize("per_page", [1, 5, 7, 12, 100])
def test_pages_cover_every_contact_exactly_once(client, ds, per_page):
    pages = math.ceil(12 / per_page)
    seen = []
    for page in range(1, pages + 1):
        body = fetch(client, ds, {"page": page, "per_page": per_page})
        crm.assert_page(body, total=12, page=page, per_page=per_page)
        assert body["pages"] == pages
        assert len(body["items"]) == (per_page if page < pages else 12 - per_page * (pages - 1))
        seen += [i["id"] for i in body["items"]]
    assert seen == [c["id"] for c in ds.contacts]
    past = fetch(client, ds, {"page": pages + 1, "per_page": per_page})
    crm.assert_page(past, total=12, page=pages + 1, per_page=per_page)
    assert past["items"] == [] and past["pages"] == pages


def test_page_far_past_the_end_is_empty(client, ds):
    body = fetch(client, ds, {"page": 1000000})
    crm.assert_page(body, total=12, page=1000000, per_page=20)
    assert body["items"] == []


def test_nothing_matching_gives_zero_pages(client, ds):
    body = fetch(client, ds, {"search": "no-such-contact-anywhere"})
    crm.assert_page(body, total=0, page=1, per_page=20)
    assert body["items"] == [] and body["pages"] == 0


@pytest.mark.parametrize("query,expected", [
    ({"page": 0}, [(("query", "page"), "greater_than_equal")]),
    ({"page": -1}, [(("query", "page"), "greater_than_equal")]),
    ({"per_page": 0}, [(("query", "per_page"), "greater_than_equal")]),
    ({"per_page": 101}, [(("query", "per_page"), "less_than_equal")]),
    ({"page": "abc"}, [(("query", "page"), "int_parsing")]),
    ({"page": "1.5"}, [(("query", "page"), "int_parsing")]),
    ({"per_page": "x"}, [(("query", "per_page"), "int_parsing")]),
    ({"page": 0, "per_page": 101}, [(("query", "page"), "greater_than_equal"),
                                    (("query", "per_page"), "less_than_equal")]),
    ({"sort_by": "company_id"}, [(("query", "sort_by"), "enum")]),
    ({"sort_by": "tags"}, [(("query", "sort_by"), "enum")]),
    ({"sort_by": "name; DROP TABLE contacts"}, [(("query", "sort_by"), "enum")]),
    ({"sort_by": "id", "sort_order": "up"}, [(("query", "sort_order"), "enum")]),
    ({"sort_order": "ASC"}, [(("query", "sort_order"), "enum")]),
    ({"status": "archived"}, [(("query", "status"), "enum")]),
    ({"source": "tv"}, [(("query", "source"), "enum")]),
    ({"company_id": "acme"}, [(("query", "company_id"), "int_parsing")]),
    ({"created_after": "yesterday"}, [(("query", "created_after"), "value_error")]),
    ({"created_before": "2024-13-01T00:00:00Z"}, [(("query", "created_before"), "value_error")]),
    ({"updated_after": "2024-01-01T25:00:00Z"}, [(("query", "updated_after"), "value_error")]),
    ({"page": 0, "sort_by": "x", "sort_order": "y", "status": "z", "source": "w",
      "created_after": "v"},
     [(("query", "page"), "greater_than_equal"), (("query", "sort_by"), "enum"),
      (("query", "sort_order"), "enum"), (("query", "status"), "enum"),
      (("query", "source"), "enum"), (("query", "created_after"), "value_error")]),
])
def test_invalid_query_is_422_with_every_failing_parameter(client, ds, query, expected):
    resp = client.get(crm.with_query(CONTACTS, query), token=ds.token)
    crm.assert_validation(resp, *expected)


def test_list_without_token_is_401(client):
    crm.assert_error(client.get(CONTACTS + "?page=0"), 401, "INVALID_CREDENTIALS")


# ---- sorting --------------------------------------------------------------------------------


def test_reference_model_agrees_with_hand_computed_orders(ds):
    """Guards the model used by the sort tests below."""
    assert sorted_ids(ds, "first_name", "asc") == ds.ids([0, 5, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11])
    assert sorted_ids(ds, "first_name", "desc") == ds.ids([11, 10, 9, 8, 7, 6, 4, 3, 2, 1, 0, 5])
    assert sorted_ids(ds, "last_name", "asc") == ds.ids([5, 8, 9, 10, 11, 4, 3, 1, 0, 6, 2, 7])
    assert sorted_ids(ds, "last_name", "desc") == ds.ids([2, 7, 0, 6, 1, 3, 4, 11, 10, 9, 8, 5])
    assert sorted_ids(ds, "source", "asc")[-2:] == ds.ids([2, 9])
    assert sorted_ids(ds, "updated_at", "asc")[-3:] == ds.ids(TOUCHED)


@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize("field", SORT_FIELDS)
def test_sort_by_every_allowed_field(client, ds, field, order):
    want = sorted_ids(ds, field, order)
    body = fetch(client, ds, {"sort_by": field, "sort_order": order, "per_page": 100})
    assert [i["id"] for i in body["items"]] == want, \
        [(i["id"], i[field]) for i in body["items"]]


@pytest.mark.parametrize("field", SORT_FIELDS)
def test_sort_order_defaults_to_asc(client, ds, field):
    body = fetch(client, ds, {"sort_by": field, "per_page": 100})
    assert [i["id"] for i in body["items"]] == sorted_ids(ds, field, "asc")


@pytest.mark.parametrize("field,order", [("last_name", "desc"), ("source", "asc"),
                                         ("email", "desc"), ("updated_at", "desc")])
def test_sorted_pages_concatenate_to_the_full_order(client, ds, field, order):
    seen = []
    for page in range(1, 4):
        body = fetch(client, ds, {"sort_by": field, "sort_order": order, "per_page": 5,
                                  "page": page})
        seen += [i["id"] for i in body["items"]]
    assert seen == sorted_ids(ds, field, order)


# ---- search ---------------------------------------------------------------------------------


SEARCHES = [
    ("ali", [0, 5]),
    ("ALICE", [0, 5]),
    ("zephyr", [0, 6]),
    ("alice zephyr", [0]),
    ("E ZEPH", [0]),
    ("frank zeph", [6]),
    ("@beta", [1]),
    ("KARL@LAMBDA.TEST", [11]),
    (".test", [0, 1, 3, 4, 5, 6, 7, 9, 10, 11]),
    ("4420712", [2]),
    ("+3312", [7]),
    ("+1415555001", [9, 10]),
    ("nomatch", []),
    ("%", []),
    ("_", []),
    ("a%e", []),
]


@pytest.mark.parametrize("needle,indexes", SEARCHES, ids=[s[0] for s in SEARCHES])
def test_search_matches_case_insensitive_substrings(client, ds, needle, indexes):
    want = ds.ids(indexes)
    assert model_ids(ds, lambda c: matches_search(c, needle)) == want, "model disagrees"
    body = fetch(client, ds, {"search": needle, "per_page": 100})
    crm.assert_page(body, total=len(want), page=1, per_page=100)
    assert [i["id"] for i in body["items"]] == want


def test_search_pages_and_sorts_its_matches(client, ds):
    want = sorted_ids(ds, "first_name", "desc",
                      [c for c in ds.contacts if matches_search(c, "e")])
    assert len(want) > 3
    body = fetch(client, ds, {"search": "e", "per_page": 3, "page": 2, "sort_by": "first_name",
                              "sort_order": "desc"})
    crm.assert_page(body, total=len(want), page=2, per_page=3)
    assert [i["id"] for i in body["items"]] == want[3:6]


# ---- filters --------------------------------------------------------------------------------


def test_filter_by_status(client, ds):
    for status in crm.CONTACT_STATUSES:
        want = model_ids(ds, lambda c: c["status"] == status)
        assert fetch_all_ids(client, ds, {"status": status}) == want
    assert fetch_all_ids(client, ds, {"status": "active"}) == ds.ids([0, 4, 7, 9, 11])


def test_filter_by_source(client, ds):
    for source in crm.CONTACT_SOURCES:
        want = model_ids(ds, lambda c: c["source"] == source)
        assert fetch_all_ids(client, ds, {"source": source}) == want
    assert fetch_all_ids(client, ds, {"source": "website"}) == ds.ids([0, 8, 11])


def test_filter_by_company(client, ds):
    acme, globex = ds.companies["acme"]["id"], ds.companies["globex"]["id"]
    assert fetch_all_ids(client, ds, {"company_id": acme}) == ds.ids([0, 1, 7, 9])
    assert fetch_all_ids(client, ds, {"company_id": globex}) == ds.ids([3, 5, 11])
    assert fetch_all_ids(client, ds, {"company_id": crm.NOWHERE_ID}) == []


@pytest.mark.parametrize("tags,indexes", [
    (["vip"], [0, 3, 4, 7, 11]),
    (["VIP"], [0, 3, 4, 7, 11]),
    (["Cardio"], [0, 1, 5, 7]),
    (["vip", "cardio"], [0, 7]),
    (["neuro", "CARDIO"], [5, 7]),
    (["vip", "cardio", "neuro"], [7]),
    (["vip", "nope"], []),
    (["nope"], []),
])
def test_filter_by_tags_requires_every_tag_case_insensitively(client, ds, tags, indexes):
    got = fetch_all_ids(client, ds, [("tag", t) for t in tags])
    assert got == ds.ids(indexes)
    body = fetch(client, ds, [("tag", t) for t in tags] + [("per_page", 2)])
    assert body["total"] == len(indexes) and body["pages"] == math.ceil(len(indexes) / 2)


@pytest.mark.parametrize("key,value,indexes", [
    ("plan", "gold", [0, 4, 11]),
    ("plan", "silver", [1]),
    ("plan", "Gold", []),
    ("age", "42", [0, 1, 7]),
    ("age", "42.0", [0, 7]),
    ("age", "42.5", [4]),
    ("age", "41", [11]),
    ("age", "forty", [9]),
    ("vip", "true", [0, 8]),
    ("vip", "false", [3]),
    ("touched", "3", [3]),
    ("missing", "x", []),
])
def test_filter_by_custom_field_value(client, ds, key, value, indexes):
    assert model_ids(ds, lambda c: key in c["custom_fields"] and
                     cf_equals(c["custom_fields"][key], value)) == ds.ids(indexes)
    assert fetch_all_ids(client, ds, {f"cf.{key}": value}) == ds.ids(indexes)


def test_two_custom_field_filters_combine_with_and(client, ds):
    assert fetch_all_ids(client, ds, {"cf.plan": "gold", "cf.age": "42"}) == ds.ids([0])


def test_filters_combine_with_and(client, ds):
    acme = ds.companies["acme"]["id"]
    assert fetch_all_ids(client, ds, [("status", "active"), ("tag", "vip"),
                                      ("company_id", acme)]) == ds.ids([0, 7])
    assert fetch_all_ids(client, ds, [("status", "active"), ("tag", "neuro"),
                                      ("search", "a")]) == ds.ids([4, 7, 9])
    assert fetch_all_ids(client, ds, {"source": "website", "cf.vip": "true"}) == ds.ids([0, 8])
    assert fetch_all_ids(client, ds, {"status": "inactive", "source": "website"}) == []
    body = fetch(client, ds, [("status", "active"), ("tag", "vip"), ("sort_by", "first_name"),
                              ("sort_order", "desc")])
    crm.assert_page(body, total=4, page=1, per_page=20)
    assert [i["id"] for i in body["items"]] == ds.ids([11, 7, 4, 0])


def _shift(timestamp: str, hours: int) -> str:
    """The same instant written with a +hh:00 offset."""
    t = crm.parse_timestamp(timestamp)
    return t.astimezone(datetime.timezone(datetime.timedelta(hours=hours))).isoformat()


def test_created_after_and_before_are_strict(client, ds):
    pivot = ds.contacts[5]["created_at"]
    assert fetch_all_ids(client, ds, {"created_after": pivot}) == ds.ids(range(6, 12))
    assert fetch_all_ids(client, ds, {"created_before": pivot}) == ds.ids(range(0, 5))
    start = ds.contacts[2]["created_at"]
    assert fetch_all_ids(client, ds, {"created_after": start, "created_before": pivot}) == \
        ds.ids([3, 4])
    assert fetch_all_ids(client, ds, {"created_after": pivot, "created_before": pivot}) == []


def test_timestamps_with_an_offset_mean_the_same_instant(client, ds):
    pivot = ds.contacts[5]["created_at"]
    shifted = _shift(pivot, 2)
    assert "+02:00" in shifted
    assert fetch_all_ids(client, ds, {"created_after": shifted}) == ds.ids(range(6, 12))
    assert fetch_all_ids(client, ds, {"created_before": _shift(pivot, -5)}) == ds.ids(range(0, 5))


def test_wide_time_windows(client, ds):
    assert fetch_all_ids(client, ds, {"created_after": "2000-01-01T00:00:00Z"}) == ds.ids(range(12))
    assert fetch_all_ids(client, ds, {"created_before": "2999-01-01T00:00:00Z"}) == \
        ds.ids(range(12))
    assert fetch_all_ids(client, ds, {"created_after": "2999-01-01T00:00:00Z"}) == []
    assert fetch_all_ids(client, ds, {"updated_after": "2999-01-01T00:00:00.000000Z"}) == []


def test_updated_after_is_strict(client, ds):
    assert fetch_all_ids(client, ds, {"updated_after": ds.t_before_touch}) == sorted(
        ds.ids(TOUCHED))
    pivot = ds.contacts[0]["updated_at"]  # the second contact touched
    assert fetch_all_ids(client, ds, {"updated_after": pivot}) == ds.ids([8])
    assert fetch_all_ids(client, ds, {"updated_after": pivot, "created_before":
                                      ds.contacts[5]["created_at"]}) == []


# ---- tenant isolation -----------------------------------------------------------------------


def test_list_never_shows_another_tenants_contacts(client, ds):
    ids = fetch_all_ids(client, ds, None)
    assert ids == [c["id"] for c in ds.contacts]
    for params in ({"search": "alice"}, {"tag": "vip"}, {"cf.plan": "gold"},
                   {"status": "active"}, {"sort_by": "first_name", "sort_order": "desc"}):
        got = fetch_all_ids(client, ds, params)
        assert set(got) <= set(ids)
