"""Hardening (issue 14): hostile bytes outside JSON bodies never reach SQL, and one client's bad
input never costs another tenant a write."""
import csv
import io
import secrets

import pytest

import crm

CONTACTS = crm.CONTACTS
NOT_TEXT = "Input should be UTF-8 text without NUL characters"


def contact_count(database, tenant_id: int) -> int:
    return int(database.query(f"SELECT count(*) FROM contacts WHERE tenant_id = {tenant_id}"))


# ---- item 1: bytes that are not UTF-8 outside JSON bodies ------------------------------------


@pytest.mark.parametrize("key", ["k\xff1", "tab\there", "x" * 256, "caf\xe9"])
def test_an_idempotency_key_that_is_not_visible_ascii_is_422_and_stores_nothing(
        client, sess, database, key):
    before = contact_count(database, sess.tenant.tenant_id)
    resp = client.post(CONTACTS, {"first_name": "Key", "email": crm.unique_email()},
                       token=sess.admin, headers={"Idempotency-Key": key})
    crm.assert_validation_locs(resp, ("header", "Idempotency-Key"))
    assert contact_count(database, sess.tenant.tenant_id) == before


@pytest.mark.parametrize("path", [
    CONTACTS + "?q=%FF%FE",
    CONTACTS + "?tag=caf%E9",
    CONTACTS + "?status=%00",
    "/api/v1/deals?title=%C0%AF",
    "/api/v1/conversations?status=%ED%A0%80",
])
def test_query_values_that_are_not_utf8_text_are_422(client, sess, path):
    resp = client.get(path, token=sess.admin)
    assert resp.status == 422, resp.describe()
    (item,) = crm.validation_items(resp)
    assert item["loc"][0] == "query" and item["msg"] == NOT_TEXT, item


def test_a_query_name_that_is_not_utf8_is_422(client, sess):
    resp = client.get(CONTACTS + "?%FF=1", token=sess.admin)
    crm.assert_validation_locs(resp, ("query",))


def test_a_path_that_is_not_utf8_is_422_and_renames_no_tag(client, sess, database):
    contact = crm.create_contact(client, sess.admin, email=crm.unique_email())
    tag = "t" + secrets.token_hex(3)
    assert client.post(f"{CONTACTS}/{contact['id']}/tags", {"tags": [tag]},
                       token=sess.admin).status == 200
    resp = client.put(f"/api/v1/tags/{tag}", {"name": "x"}, token=sess.admin)
    assert resp.status in (200, 204), resp.describe()  # the route works with text
    resp = client.put("/api/v1/tags/%FFbad", {"name": "y"}, token=sess.admin)
    crm.assert_validation_locs(resp, ("path",))


@pytest.mark.parametrize("cell, line", [
    (b"Jo\xffao", 2),          # a byte that starts nothing
    (b"Jo\xc3", 2),            # a truncated character
    (b"\xc0\xafslash", 2),     # an overlong form
    (b"Ana\x00", 2),           # NUL
])
def test_a_csv_import_that_is_not_utf8_text_is_422_with_its_line_and_stores_nothing(
        client, sess, database, cell, line):
    before = contact_count(database, sess.tenant.tenant_id)
    body = (b"first_name,email\nGood," + crm.unique_email().encode() + b"\n" + cell + b"," +
            crm.unique_email().encode() + b"\n")
    resp = client.request("POST", CONTACTS + "/import", token=sess.admin, raw=body,
                          headers={"Content-Type": "text/csv"})
    crm.assert_validation_locs(resp, ("body",))
    assert f"(line {line + 1})" in crm.validation_items(resp)[0]["msg"]
    assert contact_count(database, sess.tenant.tenant_id) == before


def test_hostile_bytes_from_one_tenant_never_fail_another_tenants_writes(
        client, sess, sess_b, database):
    """Bad requests of tenant A race good writes of tenant B through the same group committer:
    every good write is acknowledged and stored, every bad one is 422."""
    good = [crm.unique_email("good") for _ in range(24)]

    def call(i):
        if i % 2:
            return ("bad", client.post(CONTACTS, {"first_name": "Bad", "email": crm.unique_email()},
                                       token=sess.admin,
                                       headers={"Idempotency-Key": f"k\xff{i}"}))
        return ("good", client.post(CONTACTS, {"first_name": "Good", "email": good[i // 2]},
                                    token=sess_b.admin, headers={"Idempotency-Key": f"ok-{i}"}))

    results = crm.run_parallel(call, list(range(48)))
    for kind, resp in results:
        assert resp.status == (201 if kind == "good" else 422), resp.describe()
    stored = database.query(
        f"SELECT count(*) FROM contacts WHERE tenant_id = {sess_b.tenant.tenant_id} AND email IN (" +
        ",".join(f"'{e}'" for e in good) + ")")
    assert int(stored) == len(good)


# ---- item 9: CSV formula injection ------------------------------------------------------------


def test_contact_export_escapes_formulas_and_imports_back_unchanged(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    names = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+cmd|' /C calc'!A0", "@SUM(A1)",
             "-2+3", "Plain"]
    for n in names:
        crm.create_contact(client, s.admin, first_name=n, last_name="L", phone="+5511999990000")
    resp = client.get(CONTACTS + "/export", token=s.admin)
    assert resp.status == 200, resp.describe()
    rows = list(csv.reader(io.StringIO(resp.body.decode(), newline="")))[1:]
    firsts = sorted(r[1] for r in rows)
    assert firsts == sorted(("'" + n if n != "Plain" else n) for n in names), firsts
    assert {r[4] for r in rows} == {"+5511999990000"}, "a phone number is not a formula"
    # The export imports back into another tenant with the names as they were.
    t = crm.tenant_session(client, cli_env)
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_ALL)
    writer.writerow(["first_name", "last_name", "phone"])
    writer.writerows([r[1], r[2], r[4]] for r in rows)
    body = out.getvalue()
    resp = client.request("POST", CONTACTS + "/import", token=t.admin, raw=body.encode(),
                          headers={"Content-Type": "text/csv"})
    assert resp.status in (200, 201, 207), resp.describe()
    listed = crm.assert_json_response(client.get(CONTACTS + "?per_page=100", token=t.admin), 200)
    assert sorted(c["first_name"] for c in listed["items"]) == sorted(names)
