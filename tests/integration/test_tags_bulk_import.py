"""Tags, bulk create, CSV import and export, and Idempotency-Key (contract §4 "Tags", "Bulk"):
GET /tags, POST /contacts/{id}/tags, DELETE /contacts/{id}/tags/{tag}, PUT /tags/{name},
POST /contacts/bulk, POST /contacts/import, GET /contacts/export."""
import csv
import io
import json
import secrets
import urllib.parse

import pytest

import crm

CONTACTS, TAGS = crm.CONTACTS, crm.TAGS
BULK, IMPORT, EXPORT = CONTACTS + "/bulk", CONTACTS + "/import", CONTACTS + "/export"
NOWHERE_ID = crm.NOWHERE_ID


def url(contact_id) -> str:
    return crm.contact_url(contact_id)


def tags_url(contact_id) -> str:
    return url(contact_id) + "/tags"


def tag_url(contact_id, tag) -> str:
    return f"{tags_url(contact_id)}/{urllib.parse.quote(tag, safe='')}"


def rename_url(name) -> str:
    return f"{TAGS}/{urllib.parse.quote(name, safe='')}"


def email(prefix="c") -> str:
    return crm.unique_email(prefix)


def lower_sorted(tags) -> list[str]:
    return sorted(t.lower() for t in tags)


@pytest.fixture(scope="module")
def contact_b(client, sess_b) -> dict:
    created = crm.create_contact(client, sess_b.admin, first_name="Bea", email=email("bea"),
                                 tags=["vip", "beta", "zulu-b", "Heart Failure"])
    return crm.get_contact(client, sess_b.admin, created["id"])


@pytest.fixture(scope="module")
def slow_client(server) -> crm.Client:
    """For the big requests (1000-item bulk, 5000-row export) under a sanitizer build."""
    return crm.Client(server.host, server.port, timeout=180)


def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


# ---- GET /tags ------------------------------------------------------------------------------


def test_tags_of_a_tenant_without_tags_is_an_empty_array(client, cli_env, contact_b):
    s = fresh(client, cli_env)
    crm.create_contact(client, s.admin, first_name="Untagged")
    assert crm.tags_of(client, s.admin) == []


def test_tags_are_counted_per_contact_and_ordered_by_lowercased_name(client, cli_env, contact_b):
    s = crm.tenant_session(client, cli_env, ("viewer",))
    c1 = crm.create_contact(client, s.admin, first_name="One", tags=["beta", "Alpha"])
    crm.create_contact(client, s.admin, first_name="Two", tags=["beta"])
    c3 = crm.create_contact(client, s.admin, first_name="Three", tags=["cardio", "beta", "Zed"])
    crm.create_contact(client, s.admin, first_name="Four")
    want = [{"name": "Alpha", "count": 1}, {"name": "beta", "count": 3},
            {"name": "cardio", "count": 1}, {"name": "Zed", "count": 1}]
    resp = client.get(TAGS, token=s.tokens["viewer"])
    assert crm.assert_json_response(resp, 200) == want
    crm.assert_no_content(client.delete(url(c3["id"]), token=s.admin))
    assert crm.tags_of(client, s.admin) == [{"name": "Alpha", "count": 1},
                                            {"name": "beta", "count": 2}]
    resp = client.patch(url(c1["id"]), {"tags": ["beta", "delta"]}, token=s.admin)
    crm.assert_json_response(resp, 200)
    assert crm.tags_of(client, s.admin) == [{"name": "beta", "count": 2},
                                            {"name": "delta", "count": 1}]


def test_tags_without_token_is_401(client):
    crm.assert_error(client.get(TAGS), 401, "INVALID_CREDENTIALS")


# ---- POST /contacts/{id}/tags ---------------------------------------------------------------


def test_adding_tags_returns_the_contact_and_keeps_existing_spelling(client, admin):
    created = crm.create_contact(client, admin, first_name="Add", tags=["vip"],
                                 custom_fields={"k": 1})
    before = crm.get_contact(client, admin, created["id"])
    resp = client.post(tags_url(created["id"]), {"tags": ["VIP", "new", "New", "x"]}, token=admin)
    body = crm.assert_json_response(resp, 200)
    crm.assert_contact(body, id=created["id"], custom_fields={"k": 1})
    assert lower_sorted(body["tags"]) == ["new", "vip", "x"]
    assert "vip" in body["tags"] and "new" in body["tags"], body["tags"]
    after = crm.get_contact(client, admin, created["id"])
    assert body == after
    assert after["updated_at"] > before["updated_at"]
    assert after["created_at"] == before["created_at"]

    body = crm.assert_json_response(client.post(tags_url(created["id"]), {"tags": ["X"]},
                                                token=admin), 200)
    assert sorted(body["tags"]) == sorted(after["tags"]), "an existing tag was added twice"


def test_added_tags_count_in_get_tags(client, cli_env):
    s = fresh(client, cli_env)
    c = crm.create_contact(client, s.admin, first_name="Counted")
    crm.assert_json_response(client.post(tags_url(c["id"]), {"tags": ["b", "a"]}, token=s.admin),
                             200)
    assert crm.tags_of(client, s.admin) == [{"name": "a", "count": 1}, {"name": "b", "count": 1}]


@pytest.mark.parametrize("body,expected", [
    ({"tags": "x"}, [(("body", "tags"), "value_error")]),
    ({"tags": [""]}, [(("body", "tags", 0), "string_too_short")]),
    ({"tags": ["ok", "t" * 51]}, [(("body", "tags", 1), "string_too_long")]),
    ({"tags": ["ok", 1]}, [(("body", "tags", 1), "string_type")]),
    ({"tags": [f"t{i}" for i in range(51)]}, [(("body", "tags"), "value_error")]),
    ({}, [(("body", "tags"), "missing")]),
    ({"tags": ["ok"], "color": "red"}, [(("body", "color"), "extra_forbidden")]),
])
def test_invalid_tag_addition_is_422_and_changes_nothing(client, admin, body, expected):
    created = crm.create_contact(client, admin, first_name="Keep", tags=["keep"])
    before = crm.get_contact(client, admin, created["id"])
    crm.assert_validation(client.post(tags_url(created["id"]), body, token=admin), *expected)
    assert crm.get_contact(client, admin, created["id"]) == before


def test_tag_addition_with_malformed_json_is_422(client, admin):
    created = crm.create_contact(client, admin, first_name="Keep")
    crm.assert_validation(client.post(tags_url(created["id"]), raw='{"tags": [', token=admin),
                          (("body",), "json_invalid"))


# ---- DELETE /contacts/{id}/tags/{tag} -------------------------------------------------------


def test_removing_a_tag_is_204_case_insensitive_and_404_when_absent(client, admin):
    created = crm.create_contact(client, admin, first_name="Remove",
                                 tags=["VIP", "x", "Heart Failure", "ß-tag"])
    before = crm.get_contact(client, admin, created["id"])
    crm.assert_no_content(client.delete(tag_url(created["id"], "vip"), token=admin))
    after = crm.get_contact(client, admin, created["id"])
    assert after["tags"] == ["x", "Heart Failure", "ß-tag"]
    assert after["updated_at"] > before["updated_at"]
    crm.assert_error(client.delete(tag_url(created["id"], "vip"), token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.delete(tag_url(created["id"], "never"), token=admin), 404, "NOT_FOUND")
    crm.assert_no_content(client.delete(tag_url(created["id"], "heart failure"), token=admin))
    crm.assert_no_content(client.delete(tag_url(created["id"], "ß-tag"), token=admin))
    assert crm.get_contact(client, admin, created["id"])["tags"] == ["x"]


# ---- tag routes: roles, tenants, ids --------------------------------------------------------


def _tag_routes(contact_id):
    return {
        "add": ("POST", tags_url(contact_id), {"tags": ["added"]}),
        "remove": ("DELETE", tag_url(contact_id, "t"), None),
        "rename": ("PUT", rename_url("t"), {"name": "renamed-" + secrets.token_hex(2)}),
    }


@pytest.mark.parametrize("route,want", [("add", 200), ("remove", 204), ("rename", 200)])
@pytest.mark.parametrize("role", ["viewer", "agent", "manager"])
def test_tag_routes_by_role(client, cli_env, role, route, want):
    s = crm.tenant_session(client, cli_env, (role,))
    created = crm.create_contact(client, s.admin, first_name="Roles", tags=["t"])
    before = crm.get_contact(client, s.admin, created["id"])
    method, path, body = _tag_routes(created["id"])[route]
    resp = client.request(method, path, body, token=s.tokens[role])
    if role == "viewer":
        crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
        assert crm.get_contact(client, s.admin, created["id"]) == before
        assert crm.tags_of(client, s.admin) == [{"name": "t", "count": 1}]
    elif want == 204:
        crm.assert_no_content(resp)
        assert crm.get_contact(client, s.admin, created["id"])["tags"] == []
    else:
        crm.assert_json_response(resp, 200)
        assert crm.get_contact(client, s.admin, created["id"])["tags"] != before["tags"]


@pytest.mark.parametrize("route", ["add", "remove"])
def test_tag_routes_on_another_tenants_contact_are_403(client, admin, sess_b, contact_b, route):
    method, path, body = {
        "add": ("POST", tags_url(contact_b["id"]), {"tags": ["hijack"]}),
        "remove": ("DELETE", tag_url(contact_b["id"], "vip"), None),
    }[route]
    crm.assert_error(client.request(method, path, body, token=admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_contact(client, sess_b.admin, contact_b["id"]) == contact_b


def test_renaming_a_tag_only_another_tenant_has_is_404_and_changes_nothing(client, admin, sess_b,
                                                                           contact_b):
    crm.assert_error(client.put(rename_url("zulu-b"), {"name": "mine"}, token=admin), 404,
                     "NOT_FOUND")
    assert crm.get_contact(client, sess_b.admin, contact_b["id"]) == contact_b


@pytest.mark.parametrize("route", ["add", "remove"])
def test_tag_routes_on_a_contact_that_exists_nowhere_are_404(client, admin, route):
    method, path, body = _tag_routes(NOWHERE_ID)[route]
    crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")


@pytest.mark.parametrize("route", ["add", "remove"])
def test_tag_routes_with_non_integer_contact_id_are_422(client, admin, route):
    method, path, body = _tag_routes("abc")[route]
    crm.assert_validation(client.request(method, path, body, token=admin),
                          (("path", "id"), "int_parsing"))


@pytest.mark.parametrize("route", ["add", "remove", "rename"])
def test_tag_routes_without_token_are_401(client, route):
    method, path, body = _tag_routes(1)[route]
    crm.assert_error(client.request(method, path, body), 401, "INVALID_CREDENTIALS")


# ---- PUT /tags/{name} -----------------------------------------------------------------------


def test_rename_applies_across_the_tenant_and_merges(client, cli_env, sess_b, contact_b):
    s = fresh(client, cli_env)
    c1 = crm.create_contact(client, s.admin, first_name="One", tags=["vip", "x"])
    c2 = crm.create_contact(client, s.admin, first_name="Two", tags=["VIP"])
    c3 = crm.create_contact(client, s.admin, first_name="Three", tags=["Gold", "vip"])
    c4 = crm.create_contact(client, s.admin, first_name="Four", tags=["other"])
    untouched = crm.get_contact(client, s.admin, c4["id"])
    resp = client.put(rename_url("Vip"), {"name": "gold"}, token=s.admin)
    assert crm.assert_json_response(resp, 200) == {"name": "gold", "count": 3}
    t1 = crm.get_contact(client, s.admin, c1["id"])["tags"]
    assert sorted(t1) == ["gold", "x"], t1
    assert crm.get_contact(client, s.admin, c2["id"])["tags"] == ["gold"]
    t3 = crm.get_contact(client, s.admin, c3["id"])["tags"]
    assert [t.lower() for t in t3] == ["gold"], f"the two tags did not merge into one: {t3}"
    assert crm.get_contact(client, s.admin, c4["id"]) == untouched
    tags = crm.tags_of(client, s.admin)
    assert [t["name"].lower() for t in tags] == ["gold", "other", "x"], tags
    assert [t["count"] for t in tags] == [3, 1, 1], tags
    crm.assert_error(client.put(rename_url("vip"), {"name": "again"}, token=s.admin), 404,
                     "NOT_FOUND")
    assert crm.get_contact(client, sess_b.admin, contact_b["id"]) == contact_b


def test_rename_of_a_tag_with_spaces_and_non_ascii(client, cli_env):
    s = fresh(client, cli_env)
    c = crm.create_contact(client, s.admin, first_name="Cardiac", tags=["Heart Failure", "a"])
    resp = client.put(rename_url("heart failure"), {"name": "Herzinsuffizienz ü"}, token=s.admin)
    assert crm.assert_json_response(resp, 200) == {"name": "Herzinsuffizienz ü", "count": 1}
    assert sorted(crm.get_contact(client, s.admin, c["id"])["tags"]) == ["Herzinsuffizienz ü",
                                                                         "a"]


def test_rename_of_a_tag_nobody_has_is_404(client, admin):
    crm.assert_error(client.put(rename_url("nobody-has-" + secrets.token_hex(3)), {"name": "x"},
                                token=admin), 404, "NOT_FOUND")


@pytest.mark.parametrize("body,expected", [
    ({"name": ""}, [(("body", "name"), "string_too_short")]),
    ({"name": "n" * 51}, [(("body", "name"), "string_too_long")]),
    ({"name": 5}, [(("body", "name"), "string_type")]),
    ({}, [(("body", "name"), "missing")]),
    ({"name": "ok", "count": 3}, [(("body", "count"), "extra_forbidden")]),
])
def test_invalid_rename_is_422_and_changes_nothing(client, admin, body, expected):
    tag = "keep-" + secrets.token_hex(3)
    created = crm.create_contact(client, admin, first_name="Keep", tags=[tag])
    before = crm.get_contact(client, admin, created["id"])
    crm.assert_validation(client.put(rename_url(tag), body, token=admin), *expected)
    assert crm.get_contact(client, admin, created["id"]) == before


def test_rename_to_a_50_character_name_is_accepted(client, admin):
    tag = "short-" + secrets.token_hex(3)
    created = crm.create_contact(client, admin, first_name="Long", tags=[tag])
    new = "n" * 44 + secrets.token_hex(3)
    assert crm.assert_json_response(client.put(rename_url(tag), {"name": new}, token=admin),
                                    200) == {"name": new, "count": 1}
    assert crm.get_contact(client, admin, created["id"])["tags"] == [new]


# ---- bulk -----------------------------------------------------------------------------------


def assert_results(body, n) -> list[dict]:
    return crm.assert_bulk_results(body, n)


def error_pairs(result) -> set:
    return {(tuple(e["loc"]), e["type"]) for e in result["errors"]}


def test_bulk_creates_valid_items_and_reports_invalid_ones(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    company = crm.create_company(client, s.admin, name="Bulk Co")
    items = [
        {"first_name": "Ann", "last_name": "Bulk", "email": email("ann"), "phone": "+14155550100",
         "company_id": company["id"], "status": "qualified", "source": "ads",
         "tags": ["VIP", "vip", "b"], "custom_fields": {"n": 1}},
        {"last_name": "NoFirst", "email": "broken"},
        {"first_name": "Cid"},
        {"first_name": "Dee", "phone": "12", "status": "x", "nickname": "d"},
    ]
    resp = client.post(BULK, {"contacts": items}, token=s.admin)
    results = assert_results(crm.assert_json_response(resp, 200), 4)
    assert "id" in results[0] and "id" in results[2], results
    assert error_pairs(results[1]) == {(("body", "contacts", 1, "first_name"), "missing"),
                                       (("body", "contacts", 1, "email"), "value_error.email")}
    assert error_pairs(results[3]) == {(("body", "contacts", 3, "phone"), "value_error.phone"),
                                       (("body", "contacts", 3, "status"), "enum"),
                                       (("body", "contacts", 3, "nickname"), "extra_forbidden")}
    ann = crm.get_contact(client, s.admin, results[0]["id"])
    crm.assert_contact(ann, first_name="Ann", last_name="Bulk", phone="+14155550100",
                       company_id=company["id"], status="qualified", source="ads",
                       tags=["VIP", "b"], custom_fields={"n": 1},
                       company={"id": company["id"], "name": "Bulk Co"})
    cid = crm.get_contact(client, s.admin, results[2]["id"])
    crm.assert_contact(cid, first_name="Cid", status="active", source=None, tags=[],
                       custom_fields={})
    assert crm.list_total(client, s.admin) == 2


def test_bulk_reports_duplicate_emails_in_the_batch_and_against_existing(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    existing = email("existing")
    crm.create_contact(client, s.admin, first_name="Old", email=existing)
    fresh_email = email("fresh")
    items = [{"first_name": "A", "email": existing.upper()},
             {"first_name": "B", "email": fresh_email},
             {"first_name": "C", "email": fresh_email.upper()},
             {"first_name": "D", "email": email("other")}]
    results = assert_results(crm.assert_json_response(
        client.post(BULK, {"contacts": items}, token=s.admin), 200), 4)
    assert error_pairs(results[0]) == {(("body", "contacts", 0, "email"), "duplicate_email")}
    assert "id" in results[1], results
    assert error_pairs(results[2]) == {(("body", "contacts", 2, "email"), "duplicate_email")}
    assert "id" in results[3], results
    assert crm.list_total(client, s.admin) == 3


def test_bulk_item_with_another_tenants_company_is_an_error_item(client, admin, sess_b):
    other = crm.create_company(client, sess_b.admin, name="Not Yours")
    results = assert_results(crm.assert_json_response(client.post(
        BULK, {"contacts": [{"first_name": "X", "company_id": other["id"]},
                            {"first_name": "Y", "company_id": NOWHERE_ID}]}, token=admin), 200), 2)
    assert error_pairs(results[0]) == {(("body", "contacts", 0, "company_id"), "value_error")}
    assert error_pairs(results[1]) == {(("body", "contacts", 1, "company_id"), "value_error")}


def test_bulk_of_an_empty_list_creates_nothing(client, admin):
    before = crm.list_total(client, admin)
    assert crm.assert_json_response(client.post(BULK, {"contacts": []}, token=admin), 200) == \
        {"results": []}
    assert crm.list_total(client, admin) == before


def test_bulk_of_more_than_1000_is_422_and_stores_nothing(client, admin):
    before = crm.list_total(client, admin)
    marker = "Over" + secrets.token_hex(3)
    items = [{"first_name": marker} for _ in range(1001)]
    crm.assert_validation(client.post(BULK, {"contacts": items}, token=admin),
                          (("body", "contacts"), "value_error"))
    assert crm.list_total(client, admin) == before


@pytest.mark.parametrize("body,locs", [
    ({"contacts": "x"}, [("body", "contacts")]),
    ({"contacts": {"first_name": "A"}}, [("body", "contacts")]),
    ({"contacts": [], "dry_run": True}, [("body", "dry_run")]),
])
def test_bulk_with_a_malformed_envelope_is_422(client, admin, body, locs):
    before = crm.list_total(client, admin)
    crm.assert_validation_locs(client.post(BULK, body, token=admin), *locs)
    assert crm.list_total(client, admin) == before


def test_bulk_by_role(client, sess):
    marker = "BulkRole" + secrets.token_hex(3)
    resp = client.post(BULK, {"contacts": [{"first_name": marker}]}, token=sess.tokens["viewer"])
    crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
    assert crm.list_page(client, sess.admin, CONTACTS, {"search": marker})["total"] == 0
    resp = client.post(BULK, {"contacts": [{"first_name": marker}]}, token=sess.tokens["agent"])
    assert "id" in assert_results(crm.assert_json_response(resp, 200), 1)[0]
    assert crm.list_page(client, sess.admin, CONTACTS, {"search": marker})["total"] == 1
    crm.assert_error(client.post(BULK, {"contacts": []}), 401, "INVALID_CREDENTIALS")


# ---- import ---------------------------------------------------------------------------------


def post_csv(client, token, text, content_type="text/csv", **kw):
    return client.request("POST", IMPORT, raw=text.encode("utf-8"), token=token,
                          headers={"Content-Type": content_type}, **kw)


def csv_text(rows, terminator="\r\n") -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator=terminator).writerows(rows)
    return buf.getvalue()


def test_import_stores_good_rows_and_reports_bad_ones(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    company = crm.create_company(client, s.admin, name="Import Co")
    e0, e2, e4 = email("imp0"), email("imp2"), email("imp4")
    text = csv_text([
        ["first_name", "last_name", "email", "phone", "company_id", "status", "tags", "cf.plan"],
        ["Ann", 'O"Brien, Jr.\nsecond line', e0, "+14155550100", str(company["id"]), "qualified",
         "vip;Cardio", "gold"],
        ["Bad", "Row", "not-an-email", "+14155550101", "", "active", "", "x"],
        ["Cid", "", e2, "", "", "", "", "silver"],
        ["Dee", "Worse", email("imp3"), "12345", "", "archived", "", "y"],
        ["Eve", "Comma, Inc", e4, "", "", "inactive", "one;two;One", "p,l;a\"n"],
    ])
    resp = post_csv(client, s.admin, text)
    results = assert_results(crm.assert_json_response(resp, 200), 5)
    assert [("id" in r) for r in results] == [True, False, True, False, True], results
    assert error_pairs(results[1]) == {(("body", "rows", 1, "email"), "value_error.email")}
    assert error_pairs(results[3]) == {(("body", "rows", 3, "phone"), "value_error.phone"),
                                       (("body", "rows", 3, "status"), "enum")}
    ann = crm.get_contact(client, s.admin, results[0]["id"])
    crm.assert_contact(ann, first_name="Ann", last_name='O"Brien, Jr.\nsecond line',
                       phone="+14155550100", company_id=company["id"], status="qualified",
                       source="import", tags=["vip", "Cardio"], custom_fields={"plan": "gold"})
    assert ann["email"].lower() == e0
    cid = crm.get_contact(client, s.admin, results[2]["id"])
    crm.assert_contact(cid, first_name="Cid", last_name=None, phone=None, company_id=None,
                       status="active", source="import", tags=[],
                       custom_fields={"plan": "silver"})
    eve = crm.get_contact(client, s.admin, results[4]["id"])
    crm.assert_contact(eve, last_name="Comma, Inc", status="inactive", tags=["one", "two"],
                       custom_fields={"plan": 'p,l;a"n'}, source="import")
    assert crm.list_total(client, s.admin) == 3


def test_import_source_column_overrides_the_default(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    text = csv_text([["first_name", "source"], ["Ref", "referral"], ["Dflt", ""], ["Bad", "tv"]],
                    terminator="\n")
    results = assert_results(crm.assert_json_response(post_csv(client, s.admin, text), 200), 3)
    assert crm.get_contact(client, s.admin, results[0]["id"])["source"] == "referral"
    # An empty cell of a source column is no source (an export's round trip, contract §11);
    # "import" is the default of a file without the column.
    assert crm.get_contact(client, s.admin, results[1]["id"])["source"] is None
    assert error_pairs(results[2]) == {(("body", "rows", 2, "source"), "enum")}
    plain = crm.assert_json_response(post_csv(client, s.admin, csv_text([["first_name"],
                                                                          ["Plain"]])), 200)
    assert crm.get_contact(client, s.admin, plain["results"][0]["id"])["source"] == "import"


def test_import_reports_duplicate_emails(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    existing = email("exists")
    crm.create_contact(client, s.admin, first_name="Old", email=existing)
    new = email("new")
    text = csv_text([["first_name", "email"], ["A", existing.upper()], ["B", new], ["C", new]])
    results = assert_results(crm.assert_json_response(post_csv(client, s.admin, text), 200), 3)
    assert error_pairs(results[0]) == {(("body", "rows", 0, "email"), "duplicate_email")}
    assert "id" in results[1]
    assert error_pairs(results[2]) == {(("body", "rows", 2, "email"), "duplicate_email")}
    assert crm.list_total(client, s.admin) == 2


def test_import_row_without_first_name_is_an_error_row(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    text = csv_text([["first_name", "last_name"], ["", "Nameless"], ["Named", "Row"]])
    results = assert_results(crm.assert_json_response(post_csv(client, s.admin, text), 200), 2)
    assert {tuple(e["loc"]) for e in results[0]["errors"]} == {("body", "rows", 0, "first_name")}
    assert "id" in results[1]


def test_import_with_only_a_header_creates_nothing(client, admin):
    before = crm.list_total(client, admin)
    body = crm.assert_json_response(post_csv(client, admin, "first_name,email\r\n"), 200)
    assert body == {"results": []}
    assert crm.list_total(client, admin) == before


def test_import_with_an_unknown_column_is_422_and_stores_nothing(client, admin):
    before = crm.list_total(client, admin)
    text = csv_text([["first_name", "nickname", "email"], ["Ann", "Annie", email("nick")]])
    crm.assert_validation(post_csv(client, admin, text),
                          (("body", "header", "nickname"), "extra_forbidden"))
    assert crm.list_total(client, admin) == before


def test_import_with_a_column_the_export_never_writes_is_422(client, admin):
    before = crm.list_total(client, admin)
    text = csv_text([["first_name", "tenant_id"], ["Ann", "1"]])
    crm.assert_validation(post_csv(client, admin, text),
                          (("body", "header", "tenant_id"), "extra_forbidden"))
    assert crm.list_total(client, admin) == before


@pytest.mark.parametrize("column", ["id", "created_at", "updated_at"])
def test_the_exports_server_set_columns_are_ignored_by_the_import(client, admin, column):
    """Contract §11: an export imports unchanged; the server sets these itself."""
    text = csv_text([["first_name", column], ["Ann", "1"]])
    results = crm.assert_json_response(post_csv(client, admin, text), 200)["results"]
    created = crm.get_contact(client, admin, results[0]["id"])
    assert created["id"] != 1 and created["created_at"] != "1", created


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_import_with_the_wrong_content_type_is_422(client, admin, content_type):
    before = crm.list_total(client, admin)
    text = csv_text([["first_name"], ["Wrong"]])
    crm.assert_validation(post_csv(client, admin, text, content_type),
                          (("header", "content-type"), "value_error"))
    assert crm.list_total(client, admin) == before


def test_import_accepts_a_charset_parameter(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    text = csv_text([["first_name", "last_name"], ["Zoë", "Ünal"]])
    results = assert_results(crm.assert_json_response(
        post_csv(client, s.admin, text, "text/csv; charset=utf-8"), 200), 1)
    c = crm.get_contact(client, s.admin, results[0]["id"])
    assert (c["first_name"], c["last_name"]) == ("Zoë", "Ünal")


def test_import_by_role(client, sess):
    marker = "ImpRole" + secrets.token_hex(3)
    text = csv_text([["first_name"], [marker]])
    crm.assert_error(post_csv(client, sess.tokens["viewer"], text), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.list_page(client, sess.admin, CONTACTS, {"search": marker})["total"] == 0
    assert_results(crm.assert_json_response(post_csv(client, sess.tokens["agent"], text), 200), 1)
    assert crm.list_page(client, sess.admin, CONTACTS, {"search": marker})["total"] == 1
    crm.assert_error(post_csv(client, None, text), 401, "INVALID_CREDENTIALS")


# ---- export ---------------------------------------------------------------------------------


def export(client, token, params=None) -> list[list[str]]:
    """GET /contacts/export -> the parsed CSV rows (header included)."""
    resp = client.get(crm.with_query(EXPORT, params), token=token)
    assert resp.status == 200, resp.describe()
    ctype = resp.header("Content-Type") or ""
    assert ctype.startswith("text/csv"), f"Content-Type {ctype!r}"
    crm.assert_common(resp)
    rows = list(csv.reader(io.StringIO(resp.body.decode("utf-8"), newline="")))
    assert rows and rows[0] == crm.EXPORT_HEADER, rows[:1]
    return rows


def expected_row(c) -> list[str]:
    def s(v):
        return "" if v is None else str(v)

    return [str(c["id"]), c["first_name"], s(c["last_name"]), s(c["email"]), s(c["phone"]),
            s(c["company_id"]), c["status"], s(c["source"]), ";".join(c["tags"]), None,
            c["created_at"], c["updated_at"], s(c["owner_id"])]


def assert_row_is(row, contact) -> None:
    want = expected_row(contact)
    assert len(row) == len(want), row
    cf_text = row[9]
    assert json.loads(cf_text) == contact["custom_fields"], (cf_text, contact["custom_fields"])
    compact = [json.dumps(json.loads(cf_text), separators=(",", ":"), ensure_ascii=a)
               for a in (True, False)]
    assert cf_text in compact, f"custom_fields is not compact JSON: {cf_text!r}"
    assert row[:9] + row[10:] == want[:9] + want[10:], (row, want)


@pytest.fixture(scope="module")
def export_tenant(client, cli_env):
    s = crm.tenant_session(client, cli_env, ("viewer",))
    company = crm.create_company(client, s.admin, name="Export, \"Quoted\" Co")
    bodies = [
        dict(first_name="Plain", last_name="Person", email=email("plain"), phone="+14155550100",
             status="active", source="website", tags=["a", "B"], custom_fields={"n": 1}),
        dict(first_name='Quote "Q"', last_name="Comma, Semi; Colon", status="qualified",
             company_id=company["id"], tags=["x y", "Ünï"],
             custom_fields={"text": "a, \"b\"\nc", "list": [1, None, True], "obj": {"k": "v"},
                            "uni": "ß中"}),
        dict(first_name="Multi\nLine", last_name="Bre\r\nak", source="import"),
        dict(first_name="Empty"),
    ]
    ids = [crm.create_contact(client, s.admin, **b)["id"] for b in bodies]
    return s, [crm.get_contact(client, s.admin, i) for i in ids]


def test_export_round_trips_every_field_through_csv(client, export_tenant, contact_b):
    s, contacts = export_tenant
    rows = export(client, s.tokens["viewer"])
    assert len(rows) == 1 + len(contacts)
    for row, contact in zip(rows[1:], contacts):
        assert_row_is(row, contact)
    assert contact_b["id"] not in {int(r[0]) for r in rows[1:]}


def test_export_applies_filters_search_and_sort_like_the_list(client, export_tenant):
    s, contacts = export_tenant
    for params in ({"status": "qualified"}, {"source": "import"}, {"tag": "b"},
                   {"search": "person"}, {"sort_by": "first_name", "sort_order": "desc"},
                   {"sort_by": "last_name"}, {"search": "nobody-at-all"},
                   {"created_after": contacts[1]["created_at"]}):
        listed = [i["id"] for i in crm.list_all(client, s.admin, CONTACTS, params)]
        exported = [int(r[0]) for r in export(client, s.admin, params)[1:]]
        assert exported == listed, params
    assert [int(r[0]) for r in export(client, s.admin, {"tag": "b"})[1:]] == [contacts[0]["id"]]


def test_export_with_an_invalid_filter_is_422(client, admin):
    crm.assert_validation(client.get(crm.with_query(EXPORT, {"status": "x"}), token=admin),
                          (("query", "status"), "enum"))
    crm.assert_validation(client.get(crm.with_query(EXPORT, {"sort_by": "x"}), token=admin),
                          (("query", "sort_by"), "enum"))


def test_export_without_token_is_401(client):
    crm.assert_error(client.get(EXPORT), 401, "INVALID_CREDENTIALS")


def test_export_of_5000_contacts_streams_every_row(slow_client, cli_env):
    client = slow_client
    s = crm.tenant_session(client, cli_env)
    run = secrets.token_hex(3)
    sent, ids = [], []
    for batch in range(5):
        items = [{"first_name": f"Bulk{i:04d}", "last_name": f"Row, {i}",
                  "email": f"bulk{i}-{run}@example.com", "tags": [f"t{i % 5}", "all"],
                  "custom_fields": {"i": i, "s": f"v{i}"}}
                 for i in range(batch * 1000, batch * 1000 + 1000)]
        results = assert_results(crm.assert_json_response(
            client.post(BULK, {"contacts": items}, token=s.admin), 200), 1000)
        bad = [r for r in results if "id" not in r]
        assert not bad, bad[:3]
        sent += items
        ids += [r["id"] for r in results]
    resp = client.get(EXPORT, token=s.admin)
    assert resp.status == 200, resp.describe()
    assert (resp.header("Content-Type") or "").startswith("text/csv")
    text = resp.body.decode("utf-8")
    assert len(text.splitlines()) == 5001
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[0] == crm.EXPORT_HEADER and len(rows) == 5001
    by_id = {int(r[0]): r for r in rows[1:]}
    assert set(by_id) == set(ids) and len(by_id) == 5000
    for cid, body in zip(ids, sent):
        row = by_id[cid]
        assert row[1:10] == [body["first_name"], body["last_name"], body["email"], "", "",
                             "active", "", ";".join(body["tags"]), row[9]], row
        assert json.loads(row[9]) == body["custom_fields"], row
    assert [int(r[0]) for r in rows[1:]] == sorted(ids), "export is in id order by default"


# ---- Idempotency-Key ------------------------------------------------------------------------


def idem(key) -> dict:
    return {"Idempotency-Key": key}


def test_same_idempotency_key_and_body_replays_the_first_response(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    key = "key-" + secrets.token_hex(8)
    body = {"first_name": "Once", "email": email("once"), "tags": ["a"]}
    first = client.post(CONTACTS, body, token=s.admin, headers=idem(key))
    created = crm.assert_json_response(first, 201)
    for _ in range(2):
        again = client.post(CONTACTS, body, token=s.admin, headers=idem(key))
        assert again.status == 201, again.describe()
        assert again.json == created
    assert crm.list_total(client, s.admin) == 1
    other = client.post(CONTACTS, {**body, "email": email("twice")}, token=s.admin,
                        headers=idem("key-" + secrets.token_hex(8)))
    assert crm.assert_json_response(other, 201)["id"] != created["id"]
    assert crm.list_total(client, s.admin) == 2


def test_same_idempotency_key_with_another_body_is_409_conflict(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    key = "key-" + secrets.token_hex(8)
    crm.assert_json_response(client.post(CONTACTS, {"first_name": "First"}, token=s.admin,
                                         headers=idem(key)), 201)
    crm.assert_error(client.post(CONTACTS, {"first_name": "Second"}, token=s.admin,
                                 headers=idem(key)), 409, "CONFLICT")
    assert crm.list_total(client, s.admin) == 1


def test_idempotency_keys_are_per_tenant(client, cli_env):
    s1, s2 = crm.tenant_session(client, cli_env), crm.tenant_session(client, cli_env)
    key = "shared-" + secrets.token_hex(8)
    body = {"first_name": "Same"}
    a = crm.assert_json_response(client.post(CONTACTS, body, token=s1.admin, headers=idem(key)),
                                 201)
    b = crm.assert_json_response(client.post(CONTACTS, body, token=s2.admin, headers=idem(key)),
                                 201)
    assert a["id"] != b["id"]
    assert crm.get_contact(client, s2.admin, b["id"])["first_name"] == "Same"
    crm.assert_error(client.get(url(a["id"]), token=s2.admin), 403, "INSUFFICIENT_PERMISSIONS")
    assert crm.list_total(client, s1.admin) == 1 and crm.list_total(client, s2.admin) == 1
    c = client.post(CONTACTS, {"first_name": "Other"}, token=s2.admin, headers=idem(key))
    crm.assert_error(c, 409, "CONFLICT")


def test_bulk_with_the_same_idempotency_key_replays_and_creates_nothing_new(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    key = "bulk-" + secrets.token_hex(8)
    body = {"contacts": [{"first_name": "B1", "email": email("b1")}, {"first_name": ""},
                         {"first_name": "B3"}]}
    first = crm.assert_json_response(client.post(BULK, body, token=s.admin, headers=idem(key)),
                                     200)
    assert_results(first, 3)
    again = client.post(BULK, body, token=s.admin, headers=idem(key))
    assert again.status == 200 and again.json == first, again.describe()
    assert crm.list_total(client, s.admin) == 2
    crm.assert_error(client.post(BULK, {"contacts": [{"first_name": "B4"}]}, token=s.admin,
                                 headers=idem(key)), 409, "CONFLICT")
    assert crm.list_total(client, s.admin) == 2


def test_a_bulk_larger_than_the_ids_left_in_reserve_is_served(client, cli_env):
    """A bulk of 400 leaves 624 of the 1,024 ids the contacts actor reserved; a bulk of 1,000
    then needs more than are left but more than a block (512) remain. The actor once reserved
    nothing in that case and asked again forever: the request never came back."""
    s = crm.tenant_session(client, cli_env)

    def bulk(n, tag):
        items = [{"first_name": f"R{tag}{i}", "email": email(f"reserve{tag}{i}")}
                 for i in range(n)]
        resp = client.post(f"{crm.CONTACTS}/bulk", {"contacts": items}, token=s.admin)
        results = crm.assert_json_response(resp, 200)["results"]
        assert all("id" in r for r in results), results[:3]

    bulk(400, "a")
    bulk(1000, "b")
    assert crm.list_total(client, s.admin) == 1400
