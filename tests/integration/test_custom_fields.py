"""Custom fields (spec "Custom field", "Custom field deletion", states table; contract §2, §3 roles,
§4, §6): the definitions API (list, create, read, update, soft and hard delete), its validation,
roles and tenant isolation, and what the definitions do to contact and company values: type
checks on create/update/bulk/import, required fields, inactive fields, typed cf.<key> filters, and
the removal of every stored value by a hard delete (checked through the API and in Postgres)."""
import csv
import io
import json
import re
import secrets

import pytest

import crm

CONTACTS, COMPANIES = crm.CONTACTS, crm.COMPANIES
BULK, IMPORT = CONTACTS + "/bulk", CONTACTS + "/import"
NOWHERE_ID = crm.NOWHERE_ID
MISSING = crm.MISSING
UPDATE_METHODS = ["PUT", "PATCH"]
NON_ADMIN = ["viewer", "agent", "manager"]
COLOURS = ["red", "green", "blue"]


def fields_url(entity, params=None) -> str:
    return crm.fields_url(entity, params)


def field_url(entity, field_id, params=None) -> str:
    return crm.field_url(entity, field_id, params)


def name(prefix="f") -> str:
    return crm.field_name(prefix)


def marker(prefix="Cf") -> str:
    return prefix + secrets.token_hex(4)


@pytest.fixture(scope="module")
def slow_client(server) -> crm.Client:
    """For the 1000-item bulk and the hard delete over it under a sanitizer build."""
    return crm.Client(server.host, server.port, timeout=180)


@pytest.fixture(scope="module")
def typed(client, admin) -> dict:
    """One active, optional contact field of every type in tenant A: field_type -> name."""
    names = {}
    for field_type in crm.FIELD_TYPES:
        extra = {"options": COLOURS} if field_type in crm.SELECT_TYPES else {}
        f = crm.create_field(client, admin, "contact", name=name("t_" + field_type),
                             field_type=field_type, **extra)
        names[field_type] = f["name"]
    return names


# ---- helpers --------------------------------------------------------------------------------


def same_json(a, b) -> bool:
    """JSON equality that tells true from 1 (numbers compare by value: 7 == 7.0)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) or isinstance(b, (int, float)):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b)
    if isinstance(a, list) or isinstance(b, list):
        return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                and all(same_json(x, y) for x, y in zip(a, b)))
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b)
                and all(same_json(a[k], b[k]) for k in a))
    return a == b


def assert_cf(got, want) -> None:
    assert same_json(got, want), f"custom_fields: want {want!r}, got {got!r}"


def contact_cf(client, token, contact_id) -> dict:
    return crm.get_contact(client, token, contact_id)["custom_fields"]


def company_cf(client, token, company_id) -> dict:
    return crm.get_company(client, token, company_id)["custom_fields"]


def sql_count(database, table, tenant_id, key) -> int:
    assert table in ("contacts", "companies")
    assert re.fullmatch(r"[a-z][a-z0-9_]*", key), key
    return int(database.query(f"SELECT count(*) FROM {table} WHERE tenant_id = {tenant_id} "
                              f"AND custom_fields ? '{key}'").strip())


def sql_cf(database, table, record_id):
    assert table in ("contacts", "companies")
    out = database.query(f"SELECT custom_fields FROM {table} WHERE id = {int(record_id)}").strip()
    return json.loads(out)


def all_fields(client, token, entity) -> list:
    return crm.list_fields(client, token, entity, "true")


def field_ids(items) -> list:
    return [f["field_id"] for f in items]


def assert_deleted(resp, field_id, hard: bool) -> None:
    body = crm.assert_json_response(resp, 200)
    assert isinstance(body, dict) and set(body) == {"success", "field_id", "hard_delete"}, \
        resp.describe()
    assert body["success"] is True and crm.is_int(body["field_id"]), resp.describe()
    assert body["field_id"] == field_id and body["hard_delete"] is hard, resp.describe()


def soft_delete(client, token, entity, field_id) -> None:
    assert_deleted(client.delete(field_url(entity, field_id), token=token), field_id, False)


def hard_delete(client, token, entity, field_id, value="true") -> None:
    assert_deleted(client.delete(field_url(entity, field_id, {"hard_delete": value}), token=token),
                   field_id, True)


def put_field(client, token, entity, field_id, body, status=200):
    return crm.assert_json_response(client.put(field_url(entity, field_id), body, token=token),
                                    status)


def cf_error(key, i=None, where="contacts", typ="value_error"):
    """(loc, type) of a custom-field value error: on a single record, or item/row i."""
    if i is None:
        return (("body", "custom_fields", key), typ)
    return (("body", where, i, "custom_fields", key), typ)


def bulk_results(body, n) -> list[dict]:
    return crm.assert_bulk_results(body, n)


def error_pairs(result) -> set:
    assert "errors" in result, f"want an error item, got {result}"
    return {(tuple(e["loc"]), e["type"]) for e in result["errors"]}


def csv_text(rows) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows(rows)
    return buf.getvalue()


def post_csv(client, token, text):
    return client.request("POST", IMPORT, raw=text.encode("utf-8"), token=token,
                          headers={"Content-Type": "text/csv"})


def search_total(client, token, first_name) -> int:
    return crm.list_page(client, token, CONTACTS, {"search": first_name})["total"]


def filter_ids(client, token, params) -> set:
    return {i["id"] for i in crm.list_all(client, token, CONTACTS, params)}


# ---- create and read ------------------------------------------------------------------------


def test_create_is_201_with_location_and_exactly_the_field_shape(client, admin):
    key = name("plan")
    resp = client.post(fields_url("contact"), {"name": key, "label": "Care plan",
                                               "field_type": "text"}, token=admin)
    body = crm.assert_json_response(resp, 201)
    crm.assert_field(body, entity="contact", name=key, label="Care plan", field_type="text",
                     options=None, required=False, is_active=True)
    assert resp.header("Location") == field_url("contact", body["field_id"]), resp.describe()
    assert crm.get_field(client, admin, "contact", body["field_id"]) == body


def test_label_defaults_to_the_name(client, admin):
    key = name("nolabel")
    assert crm.create_field(client, admin, "contact", name=key)["label"] == key


def test_required_and_is_active_are_stored_as_sent(client, admin):
    f = crm.create_field(client, admin, "deal", name=name("flags"), field_type="integer",
                         required=True, is_active=False)
    assert f["required"] is True and f["is_active"] is False, f
    assert crm.get_field(client, admin, "deal", f["field_id"]) == f


@pytest.mark.parametrize("field_type", crm.FIELD_TYPES)
def test_every_field_type_can_be_created_with_options_only_for_select_types(client, admin,
                                                                            field_type):
    body = {"name": name("any"), "field_type": field_type, "label": "Any " + field_type}
    if field_type in crm.SELECT_TYPES:
        body["options"] = ["beta", "alpha", "gamma delta"]
    f = crm.create_field(client, admin, "deal", **body)
    crm.assert_field(f, entity="deal", name=body["name"], label=body["label"],
                     field_type=field_type, options=body.get("options"), required=False,
                     is_active=True)
    assert crm.get_field(client, admin, "deal", f["field_id"]) == f


@pytest.mark.parametrize("entity", crm.FIELD_ENTITIES)
def test_fields_are_created_under_each_entity(client, admin, entity):
    f = crm.create_field(client, admin, entity, name=name("ent"), field_type="boolean")
    assert f["entity"] == entity
    assert f["field_id"] in field_ids(crm.list_fields(client, admin, entity))


def test_name_of_one_and_of_63_characters_is_accepted(client, admin):
    for key in ("a", "n" + secrets.token_hex(31), "a_" + "0" * 61):  # no other test uses these
        assert len(key) in (1, 63)
        assert crm.create_field(client, admin, "deal", name=key)["name"] == key


def test_label_of_100_characters_and_option_of_100_characters_are_accepted(client, admin):
    f = crm.create_field(client, admin, "deal", name=name("long"), label="L" * 100,
                         field_type="select", options=["o" * 100, "p"])
    assert f["label"] == "L" * 100 and f["options"] == ["o" * 100, "p"]


# ---- create validation ----------------------------------------------------------------------


def opts(**kw):
    return {"field_type": "select", **kw}


INVALID_CREATE = [
    ("name missing", {"name": MISSING}, [(("body", "name"), "missing")]),
    ("name empty", {"name": ""}, [(("body", "name"), "value_error")]),
    ("name upper", {"name": "Score"}, [(("body", "name"), "value_error")]),
    ("name digit first", {"name": "1score"}, [(("body", "name"), "value_error")]),
    ("name underscore first", {"name": "_score"}, [(("body", "name"), "value_error")]),
    ("name dash", {"name": "sc-ore"}, [(("body", "name"), "value_error")]),
    ("name space", {"name": "sc ore"}, [(("body", "name"), "value_error")]),
    ("name dot", {"name": "sc.ore"}, [(("body", "name"), "value_error")]),
    ("name non-ascii", {"name": "scöre"}, [(("body", "name"), "value_error")]),
    ("name trailing newline", {"name": "score\n"}, [(("body", "name"), "value_error")]),
    ("name 64", {"name": "n" * 64}, [(("body", "name"), "value_error")]),
    ("label empty", {"label": ""}, [(("body", "label"), "string_too_short")]),
    ("label 101", {"label": "l" * 101}, [(("body", "label"), "string_too_long")]),
    ("field_type missing", {"field_type": MISSING}, [(("body", "field_type"), "missing")]),
    ("field_type unknown", {"field_type": "string"}, [(("body", "field_type"), "enum")]),
    ("field_type capitalised", {"field_type": "Text"}, [(("body", "field_type"), "enum")]),
    ("field_type empty", {"field_type": ""}, [(("body", "field_type"), "enum")]),
    ("select without options", opts(), [(("body", "options"), "value_error")]),
    ("multiselect without options", {"field_type": "multiselect"},
     [(("body", "options"), "value_error")]),
    ("options null", opts(options=None), [(("body", "options"), "value_error")]),
    ("options empty", opts(options=[]), [(("body", "options"), "value_error")]),
    ("options string", opts(options="a"), [(("body", "options"), "value_error")]),
    ("options duplicate", opts(options=["a", "b", "a"]), [(("body", "options"), "value_error")]),
    ("option empty", opts(options=["a", ""]), [(("body", "options"), "value_error")]),
    ("option 101", opts(options=["a", "o" * 101]), [(("body", "options"), "value_error")]),
    ("option int", opts(options=["a", 1]), [(("body", "options"), "value_error")]),
    ("multiselect duplicate options", {"field_type": "multiselect", "options": ["x", "x"]},
     [(("body", "options"), "value_error")]),
    ("field_id", {"field_id": 1}, [(("body", "field_id"), "extra_forbidden")]),
    ("id", {"id": 1}, [(("body", "id"), "extra_forbidden")]),
    ("entity", {"entity": "contact"}, [(("body", "entity"), "extra_forbidden")]),
    ("created_at", {"created_at": "2020-01-01T00:00:00.000000Z"},
     [(("body", "created_at"), "extra_forbidden")]),
    ("updated_at", {"updated_at": "2020-01-01T00:00:00.000000Z"},
     [(("body", "updated_at"), "extra_forbidden")]),
    ("unknown", {"color": "red"}, [(("body", "color"), "extra_forbidden")]),
    ("every failure at once", {"name": "Bad Name", "field_type": "nope", "label": "",
                               "id": 3, "color": 1},
     [(("body", "name"), "value_error"), (("body", "field_type"), "enum"),
      (("body", "label"), "string_too_short"), (("body", "id"), "extra_forbidden"),
      (("body", "color"), "extra_forbidden")]),
    ("select failures at once", {"field_type": "select", "options": [], "label": "l" * 101,
                                 "name": MISSING},
     [(("body", "name"), "missing"), (("body", "options"), "value_error"),
      (("body", "label"), "string_too_long")]),
]


def build_field_body(override: dict) -> dict:
    return crm.with_override({"name": name("inv"), "field_type": "text"}, override)


@pytest.mark.parametrize("override,expected", [c[1:] for c in INVALID_CREATE],
                         ids=[c[0] for c in INVALID_CREATE])
def test_invalid_create_is_422_and_stores_nothing(client, admin, override, expected):
    before = all_fields(client, admin, "contact")
    body = build_field_body(override)
    crm.assert_validation(client.post(fields_url("contact"), body, token=admin), *expected)
    assert all_fields(client, admin, "contact") == before, "an invalid field was stored"


@pytest.mark.parametrize("field_type", [t for t in crm.FIELD_TYPES if t not in crm.SELECT_TYPES])
def test_options_on_a_non_select_type_are_422(client, admin, field_type):
    before = all_fields(client, admin, "contact")
    body = {"name": name("opt"), "field_type": field_type, "options": ["a", "b"]}
    crm.assert_validation(client.post(fields_url("contact"), body, token=admin),
                          (("body", "options"), "value_error"))
    assert all_fields(client, admin, "contact") == before


@pytest.mark.parametrize("override,loc", [
    ({"name": 5}, ("body", "name")),
    ({"label": 5}, ("body", "label")),
    ({"field_type": 3}, ("body", "field_type")),
    ({"required": []}, ("body", "required")),
    ({"is_active": {}}, ("body", "is_active")),
])
def test_wrongly_typed_create_fields_are_422_at_their_loc(client, admin, override, loc):
    before = all_fields(client, admin, "contact")
    crm.assert_validation_locs(client.post(fields_url("contact"), build_field_body(override),
                                           token=admin), loc)
    assert all_fields(client, admin, "contact") == before


@pytest.mark.parametrize("raw", ['{"name": "x", "field_type": ', "name=x", "[1, 2]"])
def test_create_with_malformed_or_non_object_json_is_422(client, admin, raw):
    before = all_fields(client, admin, "contact")
    resp = client.post(fields_url("contact"), raw=raw, token=admin)
    if raw.startswith("["):
        crm.validation_items(resp)  # a JSON array is not a field: some 422
    else:
        crm.assert_validation(resp, (("body",), "json_invalid"))
    assert all_fields(client, admin, "contact") == before


# ---- name uniqueness ------------------------------------------------------------------------


def test_duplicate_name_in_the_same_entity_is_409_also_when_the_field_is_inactive(client, admin):
    key = name("dup")
    f = crm.create_field(client, admin, "contact", name=key)
    hidden = crm.create_field(client, admin, "contact", name=name("hid"), is_active=False)
    before = all_fields(client, admin, "contact")
    crm.assert_error(client.post(fields_url("contact"), {"name": key, "field_type": "integer"},
                                 token=admin), 409, "CONFLICT")
    crm.assert_error(client.post(fields_url("contact"), {"name": hidden["name"],
                                                         "field_type": "text"}, token=admin),
                     409, "CONFLICT")
    soft_delete(client, admin, "contact", f["field_id"])
    crm.assert_error(client.post(fields_url("contact"), {"name": key, "field_type": "text"},
                                 token=admin), 409, "CONFLICT")
    after = all_fields(client, admin, "contact")
    assert field_ids(after) == field_ids(before), "a duplicate was stored"


def test_same_name_under_another_entity_or_in_another_tenant_is_allowed(client, admin, sess_b):
    key = name("shared")
    ids = {crm.create_field(client, admin, entity, name=key)["field_id"]
           for entity in crm.FIELD_ENTITIES}
    ids.add(crm.create_field(client, sess_b.admin, "contact", name=key)["field_id"])
    assert len(ids) == 4


# ---- listing --------------------------------------------------------------------------------


def test_list_shows_active_fields_in_id_order_and_include_inactive_shows_all(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    t = s.admin
    f1 = crm.create_field(client, t, "contact", name=name("l1"), field_type="text")
    f2 = crm.create_field(client, t, "contact", name=name("l2"), field_type="select",
                          options=["x", "y"])
    f3 = crm.create_field(client, t, "contact", name=name("l3"), field_type="number",
                          is_active=False)
    f4 = crm.create_field(client, t, "company", name=name("l4"), field_type="integer")
    f5 = crm.create_field(client, t, "contact", name=name("l5"), field_type="boolean")
    soft_delete(client, t, "contact", f2["field_id"])
    f2 = crm.get_field(client, t, "contact", f2["field_id"])
    assert f2["is_active"] is False
    assert f1["field_id"] < f2["field_id"] < f3["field_id"] < f5["field_id"]
    active, everything = [f1, f5], [f1, f2, f3, f5]
    assert crm.list_fields(client, t, "contact") == active
    for value in ("false", "0"):
        assert crm.list_fields(client, t, "contact", value) == active
    for value in ("true", "1"):
        assert crm.list_fields(client, t, "contact", value) == everything
    assert crm.list_fields(client, t, "company") == [f4]
    assert crm.list_fields(client, t, "company", "true") == [f4]
    assert crm.list_fields(client, t, "deal") == []
    assert crm.list_fields(client, t, "deal", "true") == []


@pytest.mark.parametrize("value", ["maybe", "yes", "2", "-1"])
def test_invalid_include_inactive_is_422_bool_parsing(client, admin, value):
    resp = client.get(fields_url("contact", {"include_inactive": value}), token=admin)
    crm.assert_validation(resp, (("query", "include_inactive"), "bool_parsing"))


# ---- path validation, 404, 401 --------------------------------------------------------------


@pytest.fixture(scope="module")
def deal_field(client, admin) -> dict:
    """A deal field of tenant A that only refused requests address."""
    return crm.create_field(client, admin, "deal", name=name("deal"), field_type="select",
                            options=["a", "b"])


def _route(route, entity, field_id):
    return {
        "list": ("GET", fields_url(entity), None),
        "create": ("POST", fields_url(entity), {"name": name("r"), "field_type": "text"}),
        "get": ("GET", field_url(entity, field_id), None),
        "put": ("PUT", field_url(entity, field_id), {"label": "Changed"}),
        "delete": ("DELETE", field_url(entity, field_id), None),
        "hard_delete": ("DELETE", field_url(entity, field_id, {"hard_delete": "true"}), None),
    }[route]


ALL_ROUTES = ["list", "create", "get", "put", "delete", "hard_delete"]
ITEM_ROUTES = ["get", "put", "delete", "hard_delete"]


@pytest.mark.parametrize("entity", ["contacts", "lead", "Contact", "deals", "user"])
@pytest.mark.parametrize("route", ALL_ROUTES)
def test_unknown_entity_is_422_enum_and_changes_nothing(client, admin, deal_field, route, entity):
    before = all_fields(client, admin, "deal")
    method, path, body = _route(route, entity, deal_field["field_id"])
    crm.assert_validation(client.request(method, path, body, token=admin),
                          (("path", "entity"), "enum"))
    assert all_fields(client, admin, "deal") == before


@pytest.mark.parametrize("bad_id", ["abc", "1.5", "1e3"])
@pytest.mark.parametrize("route", ITEM_ROUTES)
def test_non_integer_field_id_is_422_int_parsing(client, admin, route, bad_id):
    method, path, body = _route(route, "contact", bad_id)
    crm.assert_validation(client.request(method, path, body, token=admin),
                          (("path", "field_id"), "int_parsing"))


@pytest.mark.parametrize("route", ITEM_ROUTES)
def test_field_that_exists_nowhere_is_404(client, admin, route):
    method, path, body = _route(route, "contact", NOWHERE_ID)
    crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")


@pytest.mark.parametrize("other", ["company", "deal"])
@pytest.mark.parametrize("route", ITEM_ROUTES)
def test_field_addressed_under_another_entity_is_404_and_unchanged(client, admin, route, other):
    f = crm.create_field(client, admin, "contact", name=name("wrongent"))
    method, path, body = _route(route, other, f["field_id"])
    crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")
    assert crm.get_field(client, admin, "contact", f["field_id"]) == f


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_field_routes_without_token_are_401(client, deal_field, route):
    method, path, body = _route(route, "deal", deal_field["field_id"])
    crm.assert_error(client.request(method, path, body), 401, "INVALID_CREDENTIALS")
    method, path, body = _route(route, "nope", "x")
    crm.assert_error(client.request(method, path, body), 401, "INVALID_CREDENTIALS")


# ---- roles ----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "agent", "manager", "admin"])
def test_every_role_can_read_fields(client, sess, deal_field, role):
    token = sess.tokens[role]
    want = crm.get_field(client, sess.admin, "deal", deal_field["field_id"])
    assert crm.get_field(client, token, "deal", deal_field["field_id"]) == want
    assert want in crm.list_fields(client, token, "deal")
    assert want in crm.list_fields(client, token, "deal", "true")


@pytest.mark.parametrize("route", ["create", "put", "delete", "hard_delete"])
@pytest.mark.parametrize("role", NON_ADMIN)
def test_only_admins_write_fields_and_refused_writes_change_nothing(client, sess, deal_field,
                                                                    role, route):
    admin = sess.admin
    before = all_fields(client, admin, "deal")
    method, path, body = _route(route, "deal", deal_field["field_id"])
    if route == "put":
        body = {"label": "Hijacked", "options": ["a", "b", "c"], "required": True}
    crm.assert_error(client.request(method, path, body, token=sess.tokens[role]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert all_fields(client, admin, "deal") == before, "a refused request changed the fields"


def test_refused_hard_delete_by_a_manager_keeps_the_definition_and_its_values(client, sess,
                                                                              database):
    """A refused hard delete by a manager leaves the definition and every value in place."""
    f = crm.create_field(client, sess.admin, "contact", name=name("mgr"), field_type="integer")
    c = crm.create_contact(client, sess.admin, custom_fields={f["name"]: 4})
    resp = client.delete(field_url("contact", f["field_id"], {"hard_delete": "true"}),
                         token=sess.tokens["manager"])
    crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
    assert crm.get_field(client, sess.admin, "contact", f["field_id"]) == f
    assert_cf(contact_cf(client, sess.admin, c["id"]), {f["name"]: 4})
    assert sql_count(database, "contacts", sess.tenant.tenant_id, f["name"]) == 1


# ---- tenant isolation -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def field_b(client, sess_b) -> dict:
    """A contact field of tenant B with one stored value."""
    f = crm.create_field(client, sess_b.admin, "contact", name=name("bonly"),
                         field_type="select", options=["x", "y"])
    c = crm.create_contact(client, sess_b.admin, first_name="Bea", custom_fields={f["name"]: "x"})
    return {"field": f, "contact_id": c["id"]}


@pytest.mark.parametrize("route", ITEM_ROUTES)
@pytest.mark.parametrize("role", ["admin", "manager", "viewer"])
def test_another_tenants_field_is_403_and_unchanged(client, sess, sess_b, field_b, role, route,
                                                    database):
    f = field_b["field"]
    method, path, body = _route(route, "contact", f["field_id"])
    if route == "put":
        body = {"label": "Hijacked", "is_active": False, "options": ["x", "y", "z"]}
    crm.assert_error(client.request(method, path, body, token=sess.tokens[role]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_field(client, sess_b.admin, "contact", f["field_id"]) == f
    assert_cf(contact_cf(client, sess_b.admin, field_b["contact_id"]), {f["name"]: "x"})
    assert sql_count(database, "contacts", sess_b.tenant.tenant_id, f["name"]) == 1


def test_lists_never_show_another_tenants_fields(client, admin, sess_b, field_b):
    crm.create_field(client, sess_b.admin, "company", name=name("bco"))
    crm.create_field(client, sess_b.admin, "deal", name=name("bdeal"), is_active=False)
    theirs = set()
    for entity in crm.FIELD_ENTITIES:
        theirs |= set(field_ids(all_fields(client, sess_b.admin, entity)))
    assert field_b["field"]["field_id"] in theirs and len(theirs) >= 3
    for entity in crm.FIELD_ENTITIES:
        for flag in (None, "true"):
            mine = crm.list_fields(client, admin, entity, flag)
            assert not set(field_ids(mine)) & theirs, f"{entity} list shows tenant B's fields"


def test_another_tenants_definitions_do_not_validate_values(client, admin, field_b):
    """B's select field has no say over the same key in A: there it is a free value."""
    key = field_b["field"]["name"]
    c = crm.create_contact(client, admin, custom_fields={key: 12345})
    assert_cf(contact_cf(client, admin, c["id"]), {key: 12345})


# ---- update ---------------------------------------------------------------------------------


def test_update_changes_label_required_and_is_active_and_moves_updated_at(client, admin):
    f = crm.create_field(client, admin, "deal", name=name("upd"), label="Before")
    body = put_field(client, admin, "deal", f["field_id"],
                     {"label": "After", "required": True, "is_active": False})
    crm.assert_field(body, field_id=f["field_id"], entity="deal", name=f["name"], label="After",
                     field_type="text", options=None, required=True, is_active=False,
                     created_at=f["created_at"])
    assert crm.parse_timestamp(body["updated_at"]) > crm.parse_timestamp(f["updated_at"]), body
    assert crm.get_field(client, admin, "deal", f["field_id"]) == body
    again = put_field(client, admin, "deal", f["field_id"], {"required": False, "is_active": True})
    assert (again["label"], again["required"], again["is_active"]) == ("After", False, True)
    assert crm.parse_timestamp(again["updated_at"]) > crm.parse_timestamp(body["updated_at"])


def test_update_with_the_same_name_is_allowed_and_renaming_is_409(client, admin):
    f = crm.create_field(client, admin, "deal", name=name("ren"))
    other = crm.create_field(client, admin, "deal", name=name("ren2"))
    body = put_field(client, admin, "deal", f["field_id"], {"name": f["name"], "label": "Same"})
    assert body["name"] == f["name"] and body["label"] == "Same"
    stored = crm.get_field(client, admin, "deal", f["field_id"])
    for new_name in (name("renamed"), other["name"]):
        crm.assert_error(client.put(field_url("deal", f["field_id"]),
                                    {"name": new_name, "label": "Renamed"}, token=admin),
                         409, "CONFLICT")
    assert crm.get_field(client, admin, "deal", f["field_id"]) == stored
    assert crm.get_field(client, admin, "deal", other["field_id"]) == other


def _create_typed(client, admin, entity, field_type, prefix="ft"):
    extra = {"options": ["a", "b"]} if field_type in crm.SELECT_TYPES else {}
    return crm.create_field(client, admin, entity, name=name(prefix), field_type=field_type,
                            **extra)


@pytest.mark.parametrize("old,new", [("text", "textarea"), ("textarea", "text"),
                                     ("integer", "number"), ("text", "text"),
                                     ("select", "select")])
def test_allowed_field_type_changes_are_200(client, admin, old, new):
    f = _create_typed(client, admin, "deal", old)
    body = put_field(client, admin, "deal", f["field_id"], {"field_type": new})
    crm.assert_field(body, field_id=f["field_id"], field_type=new, name=f["name"],
                     options=f["options"], created_at=f["created_at"])
    assert crm.get_field(client, admin, "deal", f["field_id"]) == body


REFUSED_TYPE_CHANGES = [
    ("number", "integer"), ("text", "number"), ("text", "email"), ("text", "url"),
    ("textarea", "phone"), ("integer", "text"), ("integer", "boolean"), ("number", "text"),
    ("boolean", "text"), ("boolean", "integer"), ("date", "datetime"), ("datetime", "date"),
    ("date", "text"), ("email", "text"), ("phone", "text"), ("url", "textarea"),
    ("select", "multiselect"), ("multiselect", "select"), ("select", "text"),
    ("multiselect", "textarea"),
]


@pytest.mark.parametrize("old,new", REFUSED_TYPE_CHANGES)
def test_other_field_type_changes_are_409_and_change_nothing(client, admin, old, new):
    f = _create_typed(client, admin, "deal", old)
    crm.assert_error(client.put(field_url("deal", f["field_id"]),
                                {"field_type": new, "label": "Changed"}, token=admin),
                     409, "CONFLICT")
    assert crm.get_field(client, admin, "deal", f["field_id"]) == f


@pytest.mark.parametrize("field_type", crm.SELECT_TYPES)
def test_options_can_be_added_but_not_removed(client, admin, field_type):
    f = crm.create_field(client, admin, "deal", name=name("opts"), field_type=field_type,
                         options=["a", "b"])
    body = put_field(client, admin, "deal", f["field_id"], {"options": ["a", "b", "c"]})
    assert body["options"] == ["a", "b", "c"] and body["field_type"] == field_type, body
    stored = crm.get_field(client, admin, "deal", f["field_id"])
    assert stored == body
    for options in (["a", "c"], ["b", "c", "d"], ["c"]):
        crm.assert_error(client.put(field_url("deal", f["field_id"]),
                                    {"options": options, "label": "Changed"}, token=admin),
                         409, "CONFLICT")
        assert crm.get_field(client, admin, "deal", f["field_id"]) == stored


INVALID_UPDATE = [
    ("label empty", {"label": ""}, [(("body", "label"), "string_too_short")]),
    ("label 101", {"label": "l" * 101}, [(("body", "label"), "string_too_long")]),
    ("field_type unknown", {"field_type": "string"}, [(("body", "field_type"), "enum")]),
    ("options on text", {"options": ["a"]}, [(("body", "options"), "value_error")]),
    ("field_id", {"field_id": 5}, [(("body", "field_id"), "extra_forbidden")]),
    ("id", {"id": 5}, [(("body", "id"), "extra_forbidden")]),
    ("entity", {"entity": "company"}, [(("body", "entity"), "extra_forbidden")]),
    ("created_at", {"created_at": "2020-01-01T00:00:00.000000Z"},
     [(("body", "created_at"), "extra_forbidden")]),
    ("unknown", {"color": "red"}, [(("body", "color"), "extra_forbidden")]),
    ("several", {"label": "", "field_type": "nope", "color": 1},
     [(("body", "label"), "string_too_short"), (("body", "field_type"), "enum"),
      (("body", "color"), "extra_forbidden")]),
]


@pytest.mark.parametrize("body,expected", [c[1:] for c in INVALID_UPDATE],
                         ids=[c[0] for c in INVALID_UPDATE])
def test_invalid_update_is_422_and_changes_nothing(client, admin, body, expected):
    f = crm.create_field(client, admin, "deal", name=name("invupd"), field_type="text")
    crm.assert_validation(client.put(field_url("deal", f["field_id"]), body, token=admin),
                          *expected)
    assert crm.get_field(client, admin, "deal", f["field_id"]) == f


def test_update_reports_options_on_a_non_select_type_together_with_other_failures(client, admin):
    """Contract §2: every failing field in one 422, also when one check needs the stored type."""
    f = crm.create_field(client, admin, "deal", name=name("invupd2"), field_type="text")
    crm.assert_validation(client.put(field_url("deal", f["field_id"]),
                                     {"label": "", "options": ["a"]}, token=admin),
                          (("body", "label"), "string_too_short"),
                          (("body", "options"), "value_error"))
    assert crm.get_field(client, admin, "deal", f["field_id"]) == f


# ---- delete ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value,hard", [(None, False), ("false", False), ("0", False),
                                        ("true", True), ("1", True)])
def test_delete_is_soft_by_default_and_hard_with_true_or_1(client, admin, value, hard):
    f = crm.create_field(client, admin, "contact", name=name("del"), field_type="integer")
    params = None if value is None else {"hard_delete": value}
    assert_deleted(client.delete(field_url("contact", f["field_id"], params), token=admin),
                   f["field_id"], hard)
    if hard:
        crm.assert_error(client.get(field_url("contact", f["field_id"]), token=admin), 404,
                         "NOT_FOUND")
        assert f["field_id"] not in field_ids(all_fields(client, admin, "contact"))
    else:
        got = crm.get_field(client, admin, "contact", f["field_id"])
        assert got == {**f, "is_active": False, "updated_at": got["updated_at"]}
        assert f["field_id"] not in field_ids(crm.list_fields(client, admin, "contact"))
        assert got in all_fields(client, admin, "contact")
    assert f["field_id"] not in field_ids(crm.list_fields(client, admin, "contact"))


@pytest.mark.parametrize("value", ["maybe", "yes", "2", "-1"])
def test_invalid_hard_delete_is_422_and_changes_nothing(client, admin, database, sess, value):
    f = crm.create_field(client, admin, "contact", name=name("badq"), field_type="text")
    c = crm.create_contact(client, admin, custom_fields={f["name"]: "kept", "free": 1})
    resp = client.delete(field_url("contact", f["field_id"], {"hard_delete": value}),
                         token=admin)
    crm.assert_validation(resp, (("query", "hard_delete"), "bool_parsing"))
    assert crm.get_field(client, admin, "contact", f["field_id"]) == f
    assert_cf(contact_cf(client, admin, c["id"]), {f["name"]: "kept", "free": 1})
    assert sql_count(database, "contacts", sess.tenant.tenant_id, f["name"]) == 1


def test_soft_delete_keeps_every_value_and_reactivation_restores_the_field(client, admin, sess,
                                                                          database):
    tid = sess.tenant.tenant_id
    f = crm.create_field(client, admin, "contact", name=name("soft"), field_type="integer")
    key = f["name"]
    c1 = crm.create_contact(client, admin, custom_fields={key: 5, "free": "x"})
    c2 = crm.create_contact(client, admin, custom_fields={key: 7})
    assert sql_count(database, "contacts", tid, key) == 2
    soft_delete(client, admin, "contact", f["field_id"])
    assert_cf(contact_cf(client, admin, c1["id"]), {key: 5, "free": "x"})
    assert_cf(contact_cf(client, admin, c2["id"]), {key: 7})
    assert sql_count(database, "contacts", tid, key) == 2
    assert_cf(sql_cf(database, "contacts", c1["id"]), {key: 5, "free": "x"})
    # other updates keep the inactive field's value
    crm.assert_json_response(client.patch(crm.contact_url(c1["id"]), {"first_name": "Renamed"},
                                          token=admin), 200)
    crm.assert_json_response(client.put(crm.contact_url(c1["id"]),
                                        {"custom_fields": {"free": "y"}}, token=admin), 200)
    assert_cf(contact_cf(client, admin, c1["id"]), {key: 5, "free": "y"})
    assert sql_count(database, "contacts", tid, key) == 2
    body = put_field(client, admin, "contact", f["field_id"], {"is_active": True})
    crm.assert_field(body, field_id=f["field_id"], name=key, field_type="integer", is_active=True)
    assert body in crm.list_fields(client, admin, "contact")
    assert_cf(contact_cf(client, admin, c1["id"]), {key: 5, "free": "y"})
    assert_cf(contact_cf(client, admin, c2["id"]), {key: 7})
    assert_cf(sql_cf(database, "contacts", c2["id"]), {key: 7})
    assert filter_ids(client, admin, {f"cf.{key}": "5"}) == {c1["id"]}


def test_soft_delete_of_a_company_field_keeps_company_values(client, admin, sess, database):
    f = crm.create_field(client, admin, "company", name=name("csoft"), field_type="number")
    co = crm.create_company(client, admin, custom_fields={f["name"]: 2.5})
    soft_delete(client, admin, "company", f["field_id"])
    assert_cf(company_cf(client, admin, co["id"]), {f["name"]: 2.5})
    assert sql_count(database, "companies", sess.tenant.tenant_id, f["name"]) == 1
    put_field(client, admin, "company", f["field_id"], {"is_active": True})
    assert_cf(company_cf(client, admin, co["id"]), {f["name"]: 2.5})


def test_hard_delete_removes_the_contact_values_of_this_tenant_only(client, admin, sess, sess_b,
                                                                   database):
    tid, tid_b = sess.tenant.tenant_id, sess_b.tenant.tenant_id
    key = name("hard")
    f = crm.create_field(client, admin, "contact", name=key, field_type="text")
    f_b = crm.create_field(client, sess_b.admin, "contact", name=key, field_type="text")
    c1 = crm.create_contact(client, admin, custom_fields={key: "v1", "other": "keep"})
    c2 = crm.create_contact(client, admin, custom_fields={key: "v2"})
    c3 = crm.create_contact(client, admin, custom_fields={"other": "untouched"})
    co = crm.create_company(client, admin, custom_fields={key: "a company value"})
    cb = crm.create_contact(client, sess_b.admin, custom_fields={key: "b value", "other": 1})
    assert sql_count(database, "contacts", tid, key) == 2
    hard_delete(client, admin, "contact", f["field_id"])
    # gone from Postgres at once, and through the API
    assert sql_count(database, "contacts", tid, key) == 0
    assert_cf(sql_cf(database, "contacts", c1["id"]), {"other": "keep"})
    assert_cf(contact_cf(client, admin, c1["id"]), {"other": "keep"})
    assert_cf(contact_cf(client, admin, c2["id"]), {})
    assert_cf(contact_cf(client, admin, c3["id"]), {"other": "untouched"})
    assert filter_ids(client, admin, {f"cf.{key}": "v1"}) == set()
    crm.assert_error(client.get(field_url("contact", f["field_id"]), token=admin), 404,
                     "NOT_FOUND")
    assert f["field_id"] not in field_ids(all_fields(client, admin, "contact"))
    # another entity of the same tenant is untouched
    assert_cf(company_cf(client, admin, co["id"]), {key: "a company value"})
    assert sql_count(database, "companies", tid, key) == 1
    # another tenant is untouched, its definition and its values
    assert crm.get_field(client, sess_b.admin, "contact", f_b["field_id"]) == f_b
    assert_cf(contact_cf(client, sess_b.admin, cb["id"]), {key: "b value", "other": 1})
    assert sql_count(database, "contacts", tid_b, key) == 1


def test_hard_delete_of_a_company_field_removes_company_values_only(client, admin, sess, sess_b,
                                                                   database):
    tid = sess.tenant.tenant_id
    key = name("chard")
    f = crm.create_field(client, admin, "company", name=key, field_type="integer")
    co1 = crm.create_company(client, admin, custom_fields={key: 1, "other": 2})
    co2 = crm.create_company(client, admin, custom_fields={key: 2})
    contact = crm.create_contact(client, admin, custom_fields={key: "a contact value"})
    co_b = crm.create_company(client, sess_b.admin, custom_fields={key: "b"})
    hard_delete(client, admin, "company", f["field_id"], "1")
    assert sql_count(database, "companies", tid, key) == 0
    assert_cf(company_cf(client, admin, co1["id"]), {"other": 2})
    assert_cf(company_cf(client, admin, co2["id"]), {})
    assert_cf(contact_cf(client, admin, contact["id"]), {key: "a contact value"})
    assert sql_count(database, "contacts", tid, key) == 1
    assert_cf(company_cf(client, sess_b.admin, co_b["id"]), {key: "b"})
    assert sql_count(database, "companies", sess_b.tenant.tenant_id, key) == 1


def test_hard_delete_of_a_soft_deleted_field_removes_it_and_its_values(client, admin, sess,
                                                                      database):
    f = crm.create_field(client, admin, "contact", name=name("softhard"), field_type="boolean")
    c = crm.create_contact(client, admin, custom_fields={f["name"]: True, "k": 1})
    soft_delete(client, admin, "contact", f["field_id"])
    hard_delete(client, admin, "contact", f["field_id"])
    crm.assert_error(client.get(field_url("contact", f["field_id"]), token=admin), 404,
                     "NOT_FOUND")
    assert_cf(contact_cf(client, admin, c["id"]), {"k": 1})
    assert sql_count(database, "contacts", sess.tenant.tenant_id, f["name"]) == 0


def test_hard_deleted_field_is_gone_for_good_and_its_name_can_be_reused(client, admin):
    f = crm.create_field(client, admin, "contact", name=name("reuse"), field_type="text")
    c = crm.create_contact(client, admin, custom_fields={f["name"]: "old"})
    hard_delete(client, admin, "contact", f["field_id"])
    for route in ITEM_ROUTES:
        method, path, body = _route(route, "contact", f["field_id"])
        crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")
    again = crm.create_field(client, admin, "contact", name=f["name"], field_type="integer")
    assert again["field_id"] != f["field_id"] and again["is_active"] is True
    assert_cf(contact_cf(client, admin, c["id"]), {})  # the hard-deleted value stays gone
    crm.assert_validation(client.post(CONTACTS, {"first_name": "Reuse",
                                                 "custom_fields": {f["name"]: "old"}},
                                      token=admin), cf_error(f["name"]))
    created = crm.create_contact(client, admin, custom_fields={f["name"]: 9})
    assert_cf(contact_cf(client, admin, created["id"]), {f["name"]: 9})


def test_hard_delete_removes_the_key_from_1000_contacts_and_keeps_their_other_keys(
        slow_client, sess, database):
    client, admin, tid = slow_client, sess.admin, sess.tenant.tenant_id
    f = crm.create_field(client, admin, "contact", name=name("mass"), field_type="integer")
    key, other = f["name"], name("other")
    items = [{"first_name": f"Mass{i:04d}", "custom_fields": {key: i, other: 1}}
             for i in range(1000)]
    results = bulk_results(crm.assert_json_response(
        client.post(BULK, {"contacts": items}, token=admin), 200), 1000)
    bad = [r for r in results if "id" not in r]
    assert not bad, bad[:3]
    ids = [r["id"] for r in results]
    assert sql_count(database, "contacts", tid, key) == 1000
    assert crm.list_total(client, admin, CONTACTS, {f"cf.{key}": "500"}) == 1
    hard_delete(client, admin, "contact", f["field_id"])
    assert sql_count(database, "contacts", tid, key) == 0
    assert sql_count(database, "contacts", tid, other) == 1000
    want = json.dumps({other: 1})
    kept = int(database.query(
        f"SELECT count(*) FROM contacts WHERE tenant_id = {tid} "
        f"AND custom_fields = '{want}'::jsonb AND id IN ({','.join(map(str, ids))})").strip())
    assert kept == 1000, "every contact keeps exactly its other key"
    for value in ("0", "500", "999"):
        assert crm.list_total(client, admin, CONTACTS, {f"cf.{key}": value}) == 0
    assert crm.list_total(client, admin, CONTACTS, {f"cf.{other}": "1"}) == 1000
    for i in (0, 1, 499, 998, 999):
        assert_cf(contact_cf(client, admin, ids[i]), {other: 1})


# ---- values: type checks on contacts ------------------------------------------------------

VALID_VALUES = [
    ("text", "hello"), ("text", "x" * 1000), ("text", "ünïcødé ✓"), ("text", "42"),
    ("textarea", "line 1\nline 2"), ("textarea", "y" * 10000),
    ("number", 7), ("number", 7.5), ("number", -0.25), ("number", 0),
    ("integer", 42), ("integer", -7), ("integer", 0),
    ("boolean", True), ("boolean", False),
    ("date", "2024-02-29"), ("date", "1999-12-31"),
    ("datetime", "2024-05-01T10:15:30Z"), ("datetime", "2024-05-01T10:15:30.123456+02:00"),
    ("email", "ann@example.com"),
    ("phone", "+14155550100"),
    ("url", "https://example.com/path?q=1"), ("url", "http://localhost:8080"),
    ("select", "green"),
    ("multiselect", ["red", "blue"]), ("multiselect", ["green"]),
]

INVALID_VALUES = [
    ("text", 5), ("text", True), ("text", "x" * 1001), ("text", ["a"]), ("text", {"a": "b"}),
    ("textarea", "y" * 10001), ("textarea", 1),
    ("number", "7"), ("number", True), ("number", [7]),
    ("integer", 1.5), ("integer", True), ("integer", "42"),
    ("boolean", "true"), ("boolean", 1), ("boolean", 0),
    ("date", "2023-02-29"), ("date", "2024-13-01"), ("date", "2024-1-05"),
    ("date", "2024-01-01T00:00:00Z"), ("date", 20240101),
    ("datetime", "2024-05-01"), ("datetime", "2024-05-01T10:15:30"), ("datetime", "yesterday"),
    ("datetime", "2024-13-01T10:15:30Z"), ("datetime", 1714558530),
    ("email", "plainaddress"), ("email", "ann@"), ("email", 5),
    ("phone", "4155550100"), ("phone", "+0123"), ("phone", 14155550100),
    ("url", "example.com"), ("url", "ftp://example.com"), ("url", "https://"), ("url", 5),
    ("select", "purple"), ("select", "Red"), ("select", ["red"]), ("select", 1),
    ("multiselect", "red"), ("multiselect", ["red", "red"]), ("multiselect", ["purple"]),
    ("multiselect", [1]),
]


def value_id(case) -> str:
    field_type, value = case
    text = json.dumps(value)
    return f"{field_type}-{text if len(text) <= 24 else text[:12] + f'..({len(text)})'}"


@pytest.mark.parametrize("field_type,value", VALID_VALUES, ids=[value_id(c) for c in VALID_VALUES])
def test_valid_value_is_stored_on_create(client, admin, typed, field_type, value):
    key = typed[field_type]
    created = crm.create_contact(client, admin, custom_fields={key: value})
    got = contact_cf(client, admin, created["id"])
    assert_cf(got, {key: value})
    if field_type == "integer":
        assert crm.is_int(got[key]), got


def test_contact_with_a_valid_value_of_every_type_is_created(client, admin, typed):
    values = {typed[t]: v for t, v in dict(VALID_VALUES).items()}
    created = crm.create_contact(client, admin, custom_fields={**values, "free_note": [1, None]})
    assert_cf(contact_cf(client, admin, created["id"]), {**values, "free_note": [1, None]})


@pytest.mark.parametrize("field_type,value", INVALID_VALUES, ids=[value_id(c) for c in INVALID_VALUES])
def test_invalid_value_on_create_is_422_and_stores_nothing(client, admin, typed, field_type,
                                                           value):
    key = typed[field_type]
    first = marker("Inv")
    resp = client.post(CONTACTS, {"first_name": first, "custom_fields": {key: value, "free": 1}},
                       token=admin)
    crm.assert_validation(resp, cf_error(key))
    assert search_total(client, admin, first) == 0


@pytest.fixture(scope="module")
def valued_contact(client, admin, typed) -> int:
    """A contact of A holding a valid value under every typed key."""
    values = {"text": "t", "textarea": "ta", "number": 1.25, "integer": 3, "boolean": True,
              "date": "2020-01-01", "datetime": "2020-01-01T00:00:00Z",
              "email": "x@example.com", "phone": "+14155550199", "url": "https://example.org",
              "select": "red", "multiselect": ["red"]}
    return crm.create_contact(client, admin, first_name="Valued",
                              custom_fields={typed[t]: v for t, v in values.items()})["id"]


@pytest.mark.parametrize("method", UPDATE_METHODS)
@pytest.mark.parametrize("field_type,value", INVALID_VALUES, ids=[value_id(c) for c in INVALID_VALUES])
def test_invalid_value_on_update_is_422_and_changes_nothing(client, admin, typed, valued_contact,
                                                            method, field_type, value):
    key = typed[field_type]
    before = crm.get_contact(client, admin, valued_contact)
    resp = client.request(method, crm.contact_url(valued_contact),
                          {"last_name": "Changed", "custom_fields": {key: value}}, token=admin)
    crm.assert_validation(resp, cf_error(key))
    assert crm.get_contact(client, admin, valued_contact) == before


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_valid_values_on_update_are_stored_and_merged(client, admin, typed, method):
    c = crm.create_contact(client, admin, custom_fields={typed["integer"]: 1, "free": "f"})
    body = {"custom_fields": {typed["integer"]: 2, typed["multiselect"]: ["blue", "red"],
                              typed["date"]: "2000-02-29"}}
    crm.assert_json_response(client.request(method, crm.contact_url(c["id"]), body, token=admin),
                             200)
    assert_cf(contact_cf(client, admin, c["id"]),
              {typed["integer"]: 2, typed["multiselect"]: ["blue", "red"],
               typed["date"]: "2000-02-29", "free": "f"})


def test_every_failing_custom_field_value_is_reported_in_one_422(client, admin, typed):
    first = marker("Many")
    body = {"first_name": first,
            "custom_fields": {typed["integer"]: 1.5, typed["boolean"]: "x",
                              typed["select"]: "purple", typed["text"]: "fine", "free": {}}}
    crm.assert_validation(client.post(CONTACTS, body, token=admin),
                          cf_error(typed["integer"]), cf_error(typed["boolean"]),
                          cf_error(typed["select"]))
    assert search_total(client, admin, first) == 0


def test_contact_field_and_custom_field_failures_are_reported_in_one_422(client, admin, typed):
    """Contract §2: every failing field in one 422, the definition checks included."""
    first = marker("Both")
    body = {"first_name": "", "last_name": first, "phone": "123",
            "custom_fields": {typed["integer"]: 1.5, typed["select"]: "purple"}}
    crm.assert_validation(client.post(CONTACTS, body, token=admin),
                          (("body", "first_name"), "string_too_short"),
                          (("body", "phone"), "value_error.phone"),
                          cf_error(typed["integer"]), cf_error(typed["select"]))
    assert search_total(client, admin, first) == 0


def test_keys_without_a_definition_are_free_values_kept_as_sent(client, admin, typed):
    free = {"free_" + secrets.token_hex(3): {"nested": [1, "two", None, True]},
            "Mixed-Case Key": 1.5, "n": 0}
    created = crm.create_contact(client, admin, custom_fields={**free, typed["integer"]: 8})
    assert_cf(contact_cf(client, admin, created["id"]), {**free, typed["integer"]: 8})


def test_definitions_of_other_entities_do_not_validate_contacts_or_companies(client, admin):
    company_key = crm.create_field(client, admin, "company", name=name("co_int"),
                                   field_type="integer")["name"]
    deal_key = crm.create_field(client, admin, "deal", name=name("deal_int"),
                                field_type="integer")["name"]
    contact_key = crm.create_field(client, admin, "contact", name=name("ct_int"),
                                   field_type="integer")["name"]
    c = crm.create_contact(client, admin, custom_fields={company_key: "abc", deal_key: "x"})
    assert_cf(contact_cf(client, admin, c["id"]), {company_key: "abc", deal_key: "x"})
    co = crm.create_company(client, admin, custom_fields={contact_key: "abc", deal_key: "y"})
    assert_cf(company_cf(client, admin, co["id"]), {contact_key: "abc", deal_key: "y"})
    crm.assert_validation(client.post(CONTACTS, {"first_name": "X",
                                                 "custom_fields": {contact_key: "abc"}},
                                      token=admin), cf_error(contact_key))
    crm.assert_validation(client.post(COMPANIES, {"name": "X", "custom_fields": {company_key: "a"}},
                                      token=admin), cf_error(company_key))


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_company_values_are_validated_on_create_and_update(client, admin, method):
    key = crm.create_field(client, admin, "company", name=name("beds"), field_type="integer")["name"]
    label = marker("Co")
    crm.assert_validation(client.post(COMPANIES, {"name": label, "custom_fields": {key: 1.5}},
                                      token=admin), cf_error(key))
    assert crm.list_page(client, admin, COMPANIES, {"search": label})["total"] == 0
    co = crm.create_company(client, admin, name=label, custom_fields={key: 300, "free": "x"})
    before = crm.get_company(client, admin, co["id"])
    for bad in ("300", True, 2.5):
        crm.assert_validation(client.request(method, crm.company_url(co["id"]),
                                             {"custom_fields": {key: bad}}, token=admin),
                              cf_error(key))
        assert crm.get_company(client, admin, co["id"]) == before
    crm.assert_json_response(client.request(method, crm.company_url(co["id"]),
                                            {"custom_fields": {key: 310}}, token=admin), 200)
    assert_cf(company_cf(client, admin, co["id"]), {key: 310, "free": "x"})


def test_bulk_items_are_validated_against_the_definitions(client, admin, typed):
    k_int, k_sel = typed["integer"], typed["select"]
    first = marker("Bulk")
    items = [{"first_name": first, "custom_fields": {k_int: 1, k_sel: "red"}},
             {"first_name": first, "custom_fields": {k_int: 1.5}},
             {"first_name": first, "custom_fields": {k_sel: "purple", k_int: "2"}},
             {"first_name": first, "custom_fields": {"free": "anything"}}]
    results = bulk_results(crm.assert_json_response(
        client.post(BULK, {"contacts": items}, token=admin), 200), 4)
    assert "id" in results[0] and "id" in results[3], results
    assert error_pairs(results[1]) == {cf_error(k_int, 1)}
    assert error_pairs(results[2]) == {cf_error(k_sel, 2), cf_error(k_int, 2)}
    assert_cf(contact_cf(client, admin, results[0]["id"]), {k_int: 1, k_sel: "red"})
    assert search_total(client, admin, first) == 2


def test_import_converts_cells_per_type_then_validates(client, admin, typed):
    k = {t: typed[t] for t in ("integer", "number", "boolean", "text", "date", "select")}
    first = marker("Imp")
    header = ["first_name"] + [f"cf.{k[t]}" for t in k]
    text = csv_text([
        header,
        [first, "42", "7.5", "true", "042", "2024-02-29", "red"],
        [first, "1.5", "x", "maybe", "ok", "2023-02-29", "purple"],
        [first, "-7", "-2", "0", "true", "1999-12-31", "blue"],
        [first, "0", "10", "1", "x" * 1001, "2024-01-01", "green"],
        [first, "5", "1", "false", "t", "2024-01-02", "red"],
    ])
    results = bulk_results(crm.assert_json_response(post_csv(client, admin, text), 200), 5)
    assert [("id" in r) for r in results] == [True, False, True, False, True], results
    assert error_pairs(results[1]) == {cf_error(k[t], 1, "rows") for t in
                                       ("integer", "number", "boolean", "date", "select")}
    assert error_pairs(results[3]) == {cf_error(k["text"], 3, "rows")}
    got = contact_cf(client, admin, results[0]["id"])
    assert_cf(got, {k["integer"]: 42, k["number"]: 7.5, k["boolean"]: True, k["text"]: "042",
                    k["date"]: "2024-02-29", k["select"]: "red"})
    assert crm.is_int(got[k["integer"]]), got
    got = contact_cf(client, admin, results[2]["id"])
    assert_cf(got, {k["integer"]: -7, k["number"]: -2, k["boolean"]: False, k["text"]: "true",
                    k["date"]: "1999-12-31", k["select"]: "blue"})
    got = contact_cf(client, admin, results[4]["id"])
    assert_cf(got, {k["integer"]: 5, k["number"]: 1, k["boolean"]: False, k["text"]: "t",
                    k["date"]: "2024-01-02", k["select"]: "red"})
    assert search_total(client, admin, first) == 3


# ---- inactive fields ------------------------------------------------------------------------


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_writing_an_inactive_fields_key_is_422_and_its_stored_values_are_kept(client, admin,
                                                                             method):
    f = crm.create_field(client, admin, "contact", name=name("inact"), field_type="text")
    key = f["name"]
    c = crm.create_contact(client, admin, custom_fields={key: "stored", "free": 1})
    soft_delete(client, admin, "contact", f["field_id"])
    first = marker("Inact")
    crm.assert_validation(client.post(CONTACTS, {"first_name": first,
                                                 "custom_fields": {key: "new"}}, token=admin),
                          cf_error(key))
    assert search_total(client, admin, first) == 0
    before = crm.get_contact(client, admin, c["id"])
    crm.assert_validation(client.request(method, crm.contact_url(c["id"]),
                                         {"first_name": "Nope", "custom_fields": {key: "new"}},
                                         token=admin), cf_error(key))
    assert crm.get_contact(client, admin, c["id"]) == before
    crm.assert_json_response(client.request(method, crm.contact_url(c["id"]),
                                            {"first_name": "Fine",
                                             "custom_fields": {"free": 2}}, token=admin), 200)
    got = crm.get_contact(client, admin, c["id"])
    assert got["first_name"] == "Fine"
    assert_cf(got["custom_fields"], {key: "stored", "free": 2})


def test_inactive_field_keys_are_refused_in_bulk_and_import(client, admin):
    f = crm.create_field(client, admin, "contact", name=name("inact_b"), field_type="text",
                         is_active=False)
    key = f["name"]
    first = marker("InB")
    results = bulk_results(crm.assert_json_response(client.post(BULK, {"contacts": [
        {"first_name": first, "custom_fields": {key: "v"}}, {"first_name": first}]},
        token=admin), 200), 2)
    assert error_pairs(results[0]) == {cf_error(key, 0)}
    assert "id" in results[1]
    text = csv_text([["first_name", f"cf.{key}"], [first, "v"]])
    results = bulk_results(crm.assert_json_response(post_csv(client, admin, text), 200), 1)
    assert error_pairs(results[0]) == {cf_error(key, 0, "rows")}
    assert search_total(client, admin, first) == 1


# ---- in force for the very next request -----------------------------------------------------


def test_definition_changes_are_in_force_for_the_very_next_request(client, admin):
    c = crm.create_contact(client, admin, first_name="Next")
    url = crm.contact_url(c["id"])

    def post(value):
        return client.post(CONTACTS, {"first_name": "Next", "custom_fields": {key: value}},
                           token=admin)

    def patch(value):
        return client.patch(url, {"custom_fields": {key: value}}, token=admin)

    key = name("next")
    f = crm.create_field(client, admin, "contact", name=key, field_type="integer")
    crm.assert_validation(post("x"), cf_error(key))
    crm.assert_validation(patch(1.5), cf_error(key))
    put_field(client, admin, "contact", f["field_id"], {"field_type": "number"})
    crm.assert_json_response(post(1.5), 201)
    soft_delete(client, admin, "contact", f["field_id"])
    crm.assert_validation(post(2), cf_error(key))
    crm.assert_validation(patch(2), cf_error(key))
    put_field(client, admin, "contact", f["field_id"], {"is_active": True})
    crm.assert_json_response(post(2), 201)
    crm.assert_json_response(patch(3), 200)
    crm.assert_validation(post("3"), cf_error(key))
    hard_delete(client, admin, "contact", f["field_id"])
    crm.assert_json_response(post("now a free value"), 201)
    crm.assert_json_response(patch("free too"), 200)
    assert_cf(contact_cf(client, admin, c["id"]), {key: "free too"})


def test_text_to_textarea_and_added_options_are_in_force_at_once(client, admin):
    f = crm.create_field(client, admin, "contact", name=name("grow"), field_type="text")
    s = crm.create_field(client, admin, "contact", name=name("grow_sel"), field_type="select",
                         options=["a"])
    long_text = "z" * 1001
    body = {"first_name": "Grow", "custom_fields": {f["name"]: long_text, s["name"]: "b"}}
    crm.assert_validation(client.post(CONTACTS, body, token=admin), cf_error(f["name"]),
                          cf_error(s["name"]))
    put_field(client, admin, "contact", f["field_id"], {"field_type": "textarea"})
    put_field(client, admin, "contact", s["field_id"], {"options": ["a", "b"]})
    created = crm.assert_json_response(client.post(CONTACTS, body, token=admin), 201)
    assert_cf(contact_cf(client, admin, created["id"]), body["custom_fields"])


# ---- required fields ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def req(client, cli_env):
    """Tenant R with a required text contact field and a required integer company field."""
    s = crm.tenant_session(client, cli_env)
    mrn = crm.create_field(client, s.admin, "contact", name=name("mrn"), field_type="text",
                           required=True)
    beds = crm.create_field(client, s.admin, "company", name=name("beds"), field_type="integer",
                            required=True)
    return {"sess": s, "mrn": mrn["name"], "beds": beds["name"]}


def test_required_field_must_be_present_and_not_null_on_create(client, req):
    t, mrn = req["sess"].admin, req["mrn"]
    first = marker("Req")
    for extra in ({}, {"custom_fields": {}}, {"custom_fields": {"other": 1}},
                  {"custom_fields": {mrn: None}}):
        crm.assert_validation(client.post(CONTACTS, {"first_name": first, **extra}, token=t),
                              cf_error(mrn, typ="missing"))
    crm.assert_validation(client.post(CONTACTS, {"first_name": first,
                                                 "custom_fields": {mrn: 5}}, token=t),
                          cf_error(mrn))
    assert search_total(client, t, first) == 0
    created = crm.create_contact(client, t, first_name=first, custom_fields={mrn: "A-1"})
    assert_cf(contact_cf(client, t, created["id"]), {mrn: "A-1"})


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_required_field_may_be_left_as_it_is_on_update(client, req, method):
    t, mrn = req["sess"].admin, req["mrn"]
    c = crm.create_contact(client, t, custom_fields={mrn: "B-2"})
    url = crm.contact_url(c["id"])
    crm.assert_json_response(client.request(method, url, {"first_name": "Changed"}, token=t), 200)
    crm.assert_json_response(client.request(method, url, {"custom_fields": {"other": 1}},
                                            token=t), 200)
    crm.assert_json_response(client.request(method, url, {"custom_fields": {mrn: "B-3"}},
                                            token=t), 200)
    got = crm.get_contact(client, t, c["id"])
    assert got["first_name"] == "Changed"
    assert_cf(got["custom_fields"], {mrn: "B-3", "other": 1})


def test_required_field_is_enforced_in_bulk_and_import(client, req):
    t, mrn = req["sess"].admin, req["mrn"]
    first = marker("ReqB")
    results = bulk_results(crm.assert_json_response(client.post(BULK, {"contacts": [
        {"first_name": first, "custom_fields": {mrn: "1"}}, {"first_name": first},
        {"first_name": first, "custom_fields": {mrn: None}}]}, token=t), 200), 3)
    assert "id" in results[0]
    assert error_pairs(results[1]) == {cf_error(mrn, 1, typ="missing")}
    assert error_pairs(results[2]) == {cf_error(mrn, 2, typ="missing")}
    results = bulk_results(crm.assert_json_response(post_csv(
        client, t, csv_text([["first_name"], [first]])), 200), 1)
    assert error_pairs(results[0]) == {cf_error(mrn, 0, "rows", "missing")}
    results = bulk_results(crm.assert_json_response(post_csv(
        client, t, csv_text([["first_name", f"cf.{mrn}"], [first, "M-9"]])), 200), 1)
    assert "id" in results[0]
    assert_cf(contact_cf(client, t, results[0]["id"]), {mrn: "M-9"})
    assert search_total(client, t, first) == 2


def test_required_company_field_is_enforced_on_company_create_only(client, req):
    t, beds, mrn = req["sess"].admin, req["beds"], req["mrn"]
    label = marker("ReqCo")
    crm.assert_validation(client.post(COMPANIES, {"name": label}, token=t),
                          cf_error(beds, typ="missing"))
    crm.assert_validation(client.post(COMPANIES, {"name": label, "custom_fields": {beds: None}},
                                      token=t), cf_error(beds, typ="missing"))
    assert crm.list_page(client, t, COMPANIES, {"search": label})["total"] == 0
    co = crm.create_company(client, t, name=label, custom_fields={beds: 12})
    crm.assert_json_response(client.patch(crm.company_url(co["id"]), {"industry": "care"},
                                          token=t), 200)
    assert_cf(company_cf(client, t, co["id"]), {beds: 12})
    # the company requirement does not apply to contacts
    crm.create_contact(client, t, custom_fields={mrn: "C-1"})


def test_required_fields_of_one_tenant_do_not_affect_another(client, req, sess_b):
    mrn, beds = req["mrn"], req["beds"]
    crm.create_contact(client, sess_b.admin, first_name="NoMrn")
    crm.create_company(client, sess_b.admin, name="No beds")
    results = bulk_results(crm.assert_json_response(client.post(
        BULK, {"contacts": [{"first_name": "NoMrnBulk"}]}, token=sess_b.admin), 200), 1)
    assert "id" in results[0]
    # the same name typed differently in B: each tenant validates with its own definition
    crm.create_field(client, sess_b.admin, "contact", name=mrn, field_type="integer")
    crm.create_contact(client, sess_b.admin, custom_fields={mrn: 5})
    crm.assert_validation(client.post(CONTACTS, {"first_name": "X", "custom_fields": {mrn: 5}},
                                      token=req["sess"].admin), cf_error(mrn))
    crm.assert_validation(client.post(CONTACTS, {"first_name": "X", "custom_fields": {mrn: "5"}},
                                      token=sess_b.admin), cf_error(mrn))
    crm.create_company(client, sess_b.admin, custom_fields={beds: "not a number in B"})


def test_required_flag_and_deactivation_are_in_force_for_the_very_next_request(client, req):
    t, mrn = req["sess"].admin, req["mrn"]
    f = crm.create_field(client, t, "contact", name=name("consent"), field_type="boolean")
    key = f["name"]
    try:
        crm.create_contact(client, t, custom_fields={mrn: "x"})
        put_field(client, t, "contact", f["field_id"], {"required": True})
        crm.assert_validation(client.post(CONTACTS, {"first_name": "R",
                                                     "custom_fields": {mrn: "x"}}, token=t),
                              cf_error(key, typ="missing"))
        crm.create_contact(client, t, custom_fields={mrn: "x", key: False})
        soft_delete(client, t, "contact", f["field_id"])
        crm.create_contact(client, t, custom_fields={mrn: "x"})
        crm.assert_validation(client.post(CONTACTS, {"first_name": "R",
                                                     "custom_fields": {mrn: "x", key: True}},
                                          token=t), cf_error(key))
        put_field(client, t, "contact", f["field_id"], {"is_active": True})
        crm.assert_validation(client.post(CONTACTS, {"first_name": "R",
                                                     "custom_fields": {mrn: "x"}}, token=t),
                              cf_error(key, typ="missing"))
    finally:
        client.delete(field_url("contact", f["field_id"], {"hard_delete": "true"}), token=t)
    crm.create_contact(client, t, custom_fields={mrn: "x"})


# ---- typed filters --------------------------------------------------------------------------


def test_number_filter_compares_numerically(client, admin):
    key = crm.create_field(client, admin, "contact", name=name("score"),
                           field_type="number")["name"]
    c7, c7_0, c70, c75, cm7 = (crm.create_contact(client, admin, custom_fields={key: v})["id"]
                               for v in (7, 7.0, 70, 7.5, -7))  # 7.0 goes out as "7.0"
    crm.create_contact(client, admin, custom_fields={"other": 7})
    assert filter_ids(client, admin, {f"cf.{key}": "7"}) == {c7, c7_0}
    assert filter_ids(client, admin, {f"cf.{key}": "7.0"}) == {c7, c7_0}
    assert filter_ids(client, admin, {f"cf.{key}": "70"}) == {c70}
    assert filter_ids(client, admin, {f"cf.{key}": "7.5"}) == {c75}
    assert filter_ids(client, admin, {f"cf.{key}": "-7"}) == {cm7}
    assert filter_ids(client, admin, {f"cf.{key}": "8"}) == set()


def test_boolean_filter_accepts_true_false_1_0(client, admin):
    key = crm.create_field(client, admin, "contact", name=name("vip"),
                           field_type="boolean")["name"]
    yes = crm.create_contact(client, admin, custom_fields={key: True})["id"]
    no = crm.create_contact(client, admin, custom_fields={key: False})["id"]
    crm.create_contact(client, admin, custom_fields={"other": True})
    assert filter_ids(client, admin, {f"cf.{key}": "true"}) == {yes}
    assert filter_ids(client, admin, {f"cf.{key}": "1"}) == {yes}
    assert filter_ids(client, admin, {f"cf.{key}": "false"}) == {no}
    assert filter_ids(client, admin, {f"cf.{key}": "0"}) == {no}


def test_text_filter_compares_exactly(client, admin):
    key = crm.create_field(client, admin, "contact", name=name("code"), field_type="text")["name"]
    ids = {v: crm.create_contact(client, admin, custom_fields={key: v})["id"]
           for v in ("ABC", "abc", "ABCD", "7", "7.0", "true")}
    for value in ids:
        assert filter_ids(client, admin, {f"cf.{key}": value}) == {ids[value]}, value
    assert filter_ids(client, admin, {f"cf.{key}": "AB"}) == set()
    assert filter_ids(client, admin, {f"cf.{key}": "1"}) == set()
