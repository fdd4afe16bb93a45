"""Companies (contract §5; roles §3): create, read, update (PUT = PATCH), delete (its contacts
lose the company), validation, the role matrix, tenant isolation, and the paginated list with
search on name/domain, sorting and the industry filter."""
import math
import secrets

import pytest

import crm

COMPANIES = crm.COMPANIES
NOWHERE_ID = crm.NOWHERE_ID
UPDATE_METHODS = ["PUT", "PATCH"]
MISSING = crm.MISSING


def url(company_id) -> str:
    return crm.company_url(company_id)


@pytest.fixture(scope="module")
def company_b(client, sess_b) -> dict:
    created = crm.create_company(client, sess_b.admin, name="Tenant B Clinic", domain="b.test",
                                 phone="+4930123456", industry="clinic", address="B Street",
                                 custom_fields={"owner": "b"})
    return crm.get_company(client, sess_b.admin, created["id"])


def total(client, token) -> int:
    return crm.list_total(client, token, COMPANIES)


# ---- create and read ------------------------------------------------------------------------


def test_create_minimal_company_is_201_with_location_and_full_shape(client, admin):
    resp = client.post(COMPANIES, {"name": "Minimal Clinic"}, token=admin)
    body = crm.assert_json_response(resp, 201)
    crm.assert_company(body, name="Minimal Clinic", domain=None, phone=None, industry=None,
                       address=None, custom_fields={})
    assert resp.header("Location") == url(body["id"]), resp.describe()
    assert crm.get_company(client, admin, body["id"]) == body


def test_create_with_every_field(client, admin):
    fields = {"name": "St. Mary's Hospital", "domain": "stmarys.example",
              "phone": "+442071234567", "industry": "hospital",
              "address": "1 Hospital Road\nLondon", "custom_fields": {"beds": 300, "public": True,
                                                                     "wards": ["a", "b"]}}
    body = crm.assert_json_response(client.post(COMPANIES, fields, token=admin), 201)
    crm.assert_company(body, **fields)
    assert crm.get_company(client, admin, body["id"]) == body


def test_name_of_200_characters_is_accepted(client, admin):
    body = crm.create_company(client, admin, name="n" * 200)
    assert crm.get_company(client, admin, body["id"])["name"] == "n" * 200


INVALID_CREATE = [
    ({"name": MISSING}, [(("body", "name"), "missing")]),
    ({"name": ""}, [(("body", "name"), "string_too_short")]),
    ({"name": "n" * 201}, [(("body", "name"), "string_too_long")]),
    ({"name": 5}, [(("body", "name"), "string_type")]),
    ({"name": None}, [(("body", "name"), "string_type")]),
    ({"phone": "0301234567"}, [(("body", "phone"), "value_error.phone")]),
    ({"phone": "+0301234567"}, [(("body", "phone"), "value_error.phone")]),
    ({"phone": "+1234567890123456"}, [(("body", "phone"), "value_error.phone")]),
    ({"custom_fields": []}, [(("body", "custom_fields"), "value_error")]),
    ({"custom_fields": "x"}, [(("body", "custom_fields"), "value_error")]),
    ({"employees": 5}, [(("body", "employees"), "extra_forbidden")]),
    ({"id": 1, "tenant_id": 1, "created_at": "2020-01-01T00:00:00.000000Z",
      "updated_at": "2020-01-01T00:00:00.000000Z"},
     [(("body", f), "extra_forbidden") for f in ("id", "tenant_id", "created_at", "updated_at")]),
    ({"name": "", "phone": "123", "custom_fields": 1, "size": "xl"},
     [(("body", "name"), "string_too_short"), (("body", "phone"), "value_error.phone"),
      (("body", "custom_fields"), "value_error"), (("body", "size"), "extra_forbidden")]),
]


@pytest.mark.parametrize("override,expected", INVALID_CREATE)
def test_invalid_create_is_422_and_stores_nothing(client, admin, override, expected):
    before = total(client, admin)
    body = crm.with_override({"name": "Valid " + secrets.token_hex(3)}, override)
    crm.assert_validation(client.post(COMPANIES, body, token=admin), *expected)
    assert total(client, admin) == before


def test_malformed_json_is_422_json_invalid(client, admin):
    before = total(client, admin)
    crm.assert_validation(client.post(COMPANIES, raw='{"name": "x",', token=admin),
                          (("body",), "json_invalid"))
    assert total(client, admin) == before


# ---- update ---------------------------------------------------------------------------------


@pytest.fixture
def full_company(client, admin) -> dict:
    created = crm.create_company(client, admin, name="Full Co", domain="full.test",
                                 phone="+14155550100", industry="clinic", address="Full Street 1",
                                 custom_fields={"k": 1})
    return crm.get_company(client, admin, created["id"])


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_changes_only_the_fields_sent_and_returns_the_full_shape(client, admin,
                                                                         full_company, method):
    before = full_company
    resp = client.request(method, url(before["id"]), {"name": "Renamed Co"}, token=admin)
    body = crm.assert_json_response(resp, 200)
    crm.assert_company(body)
    after = crm.get_company(client, admin, before["id"])
    assert body == after
    assert after == {**before, "name": "Renamed Co", "updated_at": after["updated_at"]}
    assert after["updated_at"] > before["updated_at"]
    assert after["created_at"] == before["created_at"]

    resp = client.request(method, url(before["id"]), {"industry": "laboratory",
                                                      "phone": "+4930123456"}, token=admin)
    body = crm.assert_json_response(resp, 200)
    again = crm.get_company(client, admin, before["id"])
    assert body == again
    assert again == {**after, "industry": "laboratory", "phone": "+4930123456",
                     "updated_at": again["updated_at"]}


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_null_clears_optional_company_fields(client, admin, full_company, method):
    cleared = {"domain": None, "phone": None, "industry": None, "address": None}
    body = crm.assert_json_response(
        client.request(method, url(full_company["id"]), cleared, token=admin), 200)
    after = crm.get_company(client, admin, full_company["id"])
    assert body == after
    assert after == {**full_company, **cleared, "updated_at": after["updated_at"]}


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_sets_custom_fields(client, admin, method):
    created = crm.create_company(client, admin, name="Fields Co")
    body = crm.assert_json_response(client.request(method, url(created["id"]),
                                                   {"custom_fields": {"beds": 10}}, token=admin),
                                    200)
    assert body["custom_fields"] == {"beds": 10}
    assert crm.get_company(client, admin, created["id"])["custom_fields"] == {"beds": 10}


INVALID_UPDATE = [
    ({"name": None}, [(("body", "name"), "string_type")]),
    ({"name": ""}, [(("body", "name"), "string_too_short")]),
    ({"name": "n" * 201}, [(("body", "name"), "string_too_long")]),
    ({"phone": "12"}, [(("body", "phone"), "value_error.phone")]),
    ({"custom_fields": [1]}, [(("body", "custom_fields"), "value_error")]),
    ({"id": 5, "tenant_id": 9}, [(("body", "id"), "extra_forbidden"),
                                 (("body", "tenant_id"), "extra_forbidden")]),
    ({"name": "Fine", "phone": "x", "motto": "y"},
     [(("body", "phone"), "value_error.phone"), (("body", "motto"), "extra_forbidden")]),
]


@pytest.mark.parametrize("method", UPDATE_METHODS)
@pytest.mark.parametrize("body,expected", INVALID_UPDATE)
def test_invalid_update_is_422_and_changes_nothing(client, admin, full_company, method, body,
                                                   expected):
    crm.assert_validation(client.request(method, url(full_company["id"]), body, token=admin),
                          *expected)
    assert crm.get_company(client, admin, full_company["id"]) == full_company


# ---- company and its contacts ---------------------------------------------------------------


def test_contact_shows_the_companys_current_name(client, admin):
    company = crm.create_company(client, admin, name="Old Name")
    contact = crm.create_contact(client, admin, first_name="Employee", company_id=company["id"])
    assert crm.get_contact(client, admin, contact["id"])["company"] == {"id": company["id"],
                                                                         "name": "Old Name"}
    crm.assert_json_response(client.patch(url(company["id"]), {"name": "New Name"}, token=admin),
                             200)
    assert crm.get_contact(client, admin, contact["id"])["company"] == {"id": company["id"],
                                                                         "name": "New Name"}


def test_delete_is_204_and_its_contacts_lose_the_company(client, admin):
    company = crm.create_company(client, admin, name="Closing Clinic")
    keep = crm.create_company(client, admin, name="Staying Clinic")
    members = [crm.create_contact(client, admin, first_name=f"Member{i}", company_id=company["id"])
               for i in range(2)]
    stayer = crm.create_contact(client, admin, first_name="Stayer", company_id=keep["id"])
    before = total(client, admin)
    crm.assert_no_content(client.delete(url(company["id"]), token=admin))
    crm.assert_error(client.get(url(company["id"]), token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.delete(url(company["id"]), token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.patch(url(company["id"]), {"name": "Zombie"}, token=admin), 404,
                     "NOT_FOUND")
    assert total(client, admin) == before - 1
    for member in members:
        got = crm.get_contact(client, admin, member["id"])
        assert got["company_id"] is None and got["company"] is None, got
    items = {i["id"]: i for i in crm.list_all(client, admin, crm.CONTACTS)}
    assert all(items[m["id"]]["company_id"] is None for m in members)
    assert crm.get_contact(client, admin, stayer["id"])["company"] == {"id": keep["id"],
                                                                        "name": "Staying Clinic"}
    assert crm.list_page(client, admin, crm.CONTACTS, {"company_id": company["id"]})["total"] == 0
    crm.assert_validation(client.post(crm.CONTACTS, {"first_name": "Late",
                                                     "company_id": company["id"]}, token=admin),
                          (("body", "company_id"), "value_error"))


# ---- ids, authentication, roles, tenants ----------------------------------------------------


def _request_for(method, path):
    return (method, path, {"name": "X"} if method in ("POST", "PUT", "PATCH") else None)


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("bad_id", ["abc", "1.5"])
def test_non_integer_company_id_is_422_int_parsing(client, admin, method, bad_id):
    crm.assert_validation(client.request(*_request_for(method, url(bad_id)), token=admin),
                          (("path", "id"), "int_parsing"))


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
def test_company_that_exists_nowhere_is_404(client, admin, method):
    crm.assert_error(client.request(*_request_for(method, url(NOWHERE_ID)), token=admin), 404,
                     "NOT_FOUND")


@pytest.mark.parametrize("method,path", [("GET", COMPANIES), ("POST", COMPANIES),
                                         ("GET", url(1)), ("PUT", url(1)), ("PATCH", url(1)),
                                         ("DELETE", url(1))])
def test_company_routes_without_token_are_401(client, method, path):
    crm.assert_error(client.request(*_request_for(method, path)), 401, "INVALID_CREDENTIALS")


ROLE_RESULTS = {
    "list": {"viewer": 200, "agent": 200, "manager": 200, "admin": 200},
    "get": {"viewer": 200, "agent": 200, "manager": 200, "admin": 200},
    "create": {"viewer": 403, "agent": 201, "manager": 201, "admin": 201},
    "put": {"viewer": 403, "agent": 200, "manager": 200, "admin": 200},
    "patch": {"viewer": 403, "agent": 200, "manager": 200, "admin": 200},
    "delete": {"viewer": 403, "agent": 403, "manager": 204, "admin": 204},
}


@pytest.mark.parametrize("route", list(ROLE_RESULTS))
@pytest.mark.parametrize("role", ["viewer", "agent", "manager", "admin"])
def test_role_matrix_for_companies(client, sess, role, route):
    admin, token = sess.admin, sess.tokens[role]
    target = crm.create_company(client, admin, name="Target " + secrets.token_hex(3))
    before = crm.get_company(client, admin, target["id"])
    marker = "Role" + secrets.token_hex(4)
    method, path, body = {
        "list": ("GET", COMPANIES, None),
        "get": ("GET", url(target["id"]), None),
        "create": ("POST", COMPANIES, {"name": marker}),
        "put": ("PUT", url(target["id"]), {"name": marker}),
        "patch": ("PATCH", url(target["id"]), {"name": marker}),
        "delete": ("DELETE", url(target["id"]), None),
    }[route]
    resp = client.request(method, path, body, token=token)
    want = ROLE_RESULTS[route][role]
    if want == 403:
        crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
        assert crm.get_company(client, admin, target["id"]) == before
        assert crm.list_page(client, admin, COMPANIES, {"search": marker})["total"] == 0
    elif want == 204:
        crm.assert_no_content(resp)
        crm.assert_error(client.get(url(target["id"]), token=admin), 404, "NOT_FOUND")
    else:
        crm.assert_json_response(resp, want)
        if route == "get":
            assert resp.json == before
        elif route in ("create", "put", "patch"):
            crm.assert_company(resp.json, name=marker)
            assert crm.list_page(client, admin, COMPANIES, {"search": marker})["total"] == 1


@pytest.mark.parametrize("method,body", [("GET", None), ("PUT", {"name": "Hijacked"}),
                                         ("PATCH", {"industry": "pirates"}), ("DELETE", None)])
@pytest.mark.parametrize("role", ["admin", "viewer"])
def test_company_of_another_tenant_is_403_and_unchanged(client, sess, sess_b, company_b, method,
                                                        body, role):
    crm.assert_error(client.request(method, url(company_b["id"]), body, token=sess.tokens[role]),
                     403, "INSUFFICIENT_PERMISSIONS")
    assert crm.get_company(client, sess_b.admin, company_b["id"]) == company_b


def test_company_list_never_shows_another_tenants_companies(client, admin, sess_b, company_b):
    crm.create_company(client, admin, name="Mine")
    mine = {c["id"] for c in crm.list_all(client, admin, COMPANIES)}
    theirs = {c["id"] for c in crm.list_all(client, sess_b.admin, COMPANIES)}
    assert mine and company_b["id"] in theirs and not mine & theirs
    assert crm.list_page(client, admin, COMPANIES, {"search": "Tenant B"})["total"] == 0
    assert crm.list_page(client, admin, COMPANIES, {"industry": "clinic", "search": "b.test"})[
        "total"] == 0


# ---- list -----------------------------------------------------------------------------------

DATA = [
    dict(name="Acme Health", domain="acme.test", industry="clinic"),
    dict(name="beta Labs", domain="betalabs.example", industry="laboratory"),
    dict(name="Cedar Hospital", domain=None, industry="hospital"),
    dict(name="delta clinic", domain="delta.test", industry="clinic"),
    dict(name="ACME Pharmacy", domain=None, industry=None),
    dict(name="Echo Dental", domain="echodental.test", industry="dental"),
]


@pytest.fixture(scope="module")
def listing(client, cli_env):
    s = crm.tenant_session(client, cli_env, ("viewer",))
    ids = [crm.create_company(client, s.admin, **{k: v for k, v in row.items() if v is not None})[
        "id"] for row in DATA]
    crm.assert_json_response(client.patch(url(ids[1]), {"address": "touched"}, token=s.admin), 200)
    stored = [crm.get_company(client, s.admin, i) for i in ids]
    other = crm.tenant_session(client, cli_env)
    for row in DATA:
        crm.create_company(client, other.admin, **{k: v for k, v in row.items() if v is not None})
    return s.tokens["viewer"], stored


def list_ids(client, token, params) -> list[int]:
    return [c["id"] for c in crm.list_all(client, token, COMPANIES, params)]


def idx(stored, indexes) -> list[int]:
    return [stored[i]["id"] for i in indexes]


def test_company_list_defaults_and_item_values(client, listing):
    token, stored = listing
    body = crm.list_page(client, token, COMPANIES)
    crm.assert_page(body, total=6, page=1, per_page=20)
    assert [i["id"] for i in body["items"]] == idx(stored, range(6))
    for item, company in zip(body["items"], stored):
        assert isinstance(item, dict) and {"id", "name"} <= set(item) <= crm.COMPANY_KEYS, item
        assert item == {k: company[k] for k in item}


def test_company_list_pages(client, listing):
    token, stored = listing
    seen = []
    for page in (1, 2, 3):
        body = crm.list_page(client, token, COMPANIES, {"page": page, "per_page": 4})
        crm.assert_page(body, total=6, page=page, per_page=4)
        assert body["pages"] == math.ceil(6 / 4)
        seen += [i["id"] for i in body["items"]]
    assert seen == idx(stored, range(6))
    body = crm.list_page(client, token, COMPANIES, {"search": "nothing-like-this"})
    crm.assert_page(body, total=0)
    assert body["pages"] == 0 and body["items"] == []


@pytest.mark.parametrize("query,expected", [
    ({"page": 0}, [(("query", "page"), "greater_than_equal")]),
    ({"per_page": 101}, [(("query", "per_page"), "less_than_equal")]),
    ({"per_page": 0}, [(("query", "per_page"), "greater_than_equal")]),
    ({"page": "x"}, [(("query", "page"), "int_parsing")]),
    ({"sort_by": "phone"}, [(("query", "sort_by"), "enum")]),
    ({"sort_by": "address"}, [(("query", "sort_by"), "enum")]),
    ({"sort_by": "name", "sort_order": "sideways"}, [(("query", "sort_order"), "enum")]),
])
def test_invalid_company_list_query_is_422(client, listing, query, expected):
    token, _ = listing
    crm.assert_validation(client.get(crm.with_query(COMPANIES, query), token=token), *expected)


@pytest.mark.parametrize("needle,indexes", [
    ("acme", [0, 4]),
    ("ACME PHARM", [4]),
    ("labs", [1]),
    ("BETALABS.EX", [1]),
    (".test", [0, 3, 5]),
    ("dental", [5]),
    ("clinic", [3]),       # name only: industry is not searched
    ("hospital", [2]),
    ("%", []),
    ("_", []),
])
def test_company_search_on_name_and_domain(client, listing, needle, indexes):
    token, stored = listing
    assert list_ids(client, token, {"search": needle}) == idx(stored, indexes)


@pytest.mark.parametrize("field,order,indexes", [
    ("id", "asc", [0, 1, 2, 3, 4, 5]),
    ("id", "desc", [5, 4, 3, 2, 1, 0]),
    ("name", "asc", [0, 4, 1, 2, 3, 5]),
    ("name", "desc", [5, 3, 2, 1, 4, 0]),
    ("domain", "asc", [0, 1, 3, 5, 2, 4]),
    ("domain", "desc", [2, 4, 5, 3, 1, 0]),
    ("industry", "asc", [0, 3, 5, 2, 1, 4]),
    ("industry", "desc", [4, 1, 2, 5, 0, 3]),
    ("created_at", "asc", [0, 1, 2, 3, 4, 5]),
    ("created_at", "desc", [5, 4, 3, 2, 1, 0]),
    ("updated_at", "asc", [0, 2, 3, 4, 5, 1]),
    ("updated_at", "desc", [1, 5, 4, 3, 2, 0]),
])
def test_company_sorting(client, listing, field, order, indexes):
    token, stored = listing
    got = list_ids(client, token, {"sort_by": field, "sort_order": order})
    assert got == idx(stored, indexes)


def test_company_sort_order_defaults_to_asc(client, listing):
    token, stored = listing
    assert list_ids(client, token, {"sort_by": "name"}) == idx(stored, [0, 4, 1, 2, 3, 5])


@pytest.mark.parametrize("params,indexes", [
    ({"industry": "clinic"}, [0, 3]),
    ({"industry": "hospital"}, [2]),
    ({"industry": "Clinic"}, []),
    ({"industry": "clin"}, []),
    ({"industry": "clinic", "search": "acme"}, [0]),
    ({"industry": "clinic", "sort_by": "name", "sort_order": "desc"}, [3, 0]),
])
def test_company_industry_filter_is_exact(client, listing, params, indexes):
    token, stored = listing
    assert list_ids(client, token, params) == idx(stored, indexes)
