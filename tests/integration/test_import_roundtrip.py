"""Imports that round-trip (contract §11, docs/design.md "Import"): a file from GET
/contacts/export imports unchanged, into another tenant too (its id, created_at and updated_at
columns ignored, custom_fields read from its JSON column, tags from their ;-list), and an
import honours Idempotency-Key like the bulk create. With ?mode=upsert, a row whose e-mail is a
contact's updates that contact instead of being refused."""
import csv
import http.client
import io

import pytest

import crm

IMPORT = "/api/v1/contacts/import"
COMPARED = ("first_name", "last_name", "email", "phone", "status", "source", "tags",
            "custom_fields")


def post_csv(client, token, text, **headers):
    return client.request("POST", IMPORT, raw=text.encode("utf-8"), token=token,
                          headers={"Content-Type": "text/csv", **headers})


def export_text(client, token) -> str:
    resp = client.get("/api/v1/contacts/export", token=token)
    assert resp.status == 200, resp.describe()
    return resp.body.decode("utf-8")


def shown(client, token) -> list[dict]:
    page = crm.assert_json_response(client.get(crm.with_query(crm.CONTACTS, {"per_page": 100}),
                                               token=token), 200)
    full = [crm.get_contact(client, token, c["id"]) for c in page["items"]]
    return sorted(({k: c[k] for k in COMPARED} for c in full), key=lambda c: c["email"] or "")


def test_an_export_imports_unchanged_into_another_tenant(client, cli_env):
    source = crm.tenant_session(client, cli_env)
    target = crm.tenant_session(client, cli_env)
    for s in (source, target):
        crm.create_field(client, s.admin, name="plan", field_type="text")
        crm.create_field(client, s.admin, name="visits", field_type="integer")
    bodies = [
        dict(first_name="Ana", last_name="Lima, Jr.", email="ana.rt@example.org",
             phone="+5511987650001", status="qualified", source="referral",
             tags=["diabetes", "Follow-up"], custom_fields={"plan": "gold; \"family\"",
                                                            "visits": 7}),
        dict(first_name='Bia "B"', email="bia.rt@example.org", status="active",
             source="website", tags=[], custom_fields={}),
        dict(first_name="=Caio", last_name="Souza", email="caio.rt@example.org",
             status="inactive", tags=["x y"], custom_fields={"visits": 0}),
    ]
    for b in bodies:
        crm.assert_json_response(client.post(crm.CONTACTS, b, token=source.admin), 201)
    text = export_text(client, source.admin)
    header = next(csv.reader(io.StringIO(text)))
    assert {"id", "created_at", "updated_at", "custom_fields"} <= set(header), header
    results = crm.assert_json_response(post_csv(client, target.admin, text), 200)["results"]
    assert all("id" in r for r in results), results
    assert shown(client, target.admin) == shown(client, source.admin)


def test_an_import_honours_its_idempotency_key(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    text = "first_name,email\r\nKey,key.rt@example.org\r\n"
    first = post_csv(client, s.admin, text, **{"Idempotency-Key": "import-1"})
    body = crm.assert_json_response(first, 200)
    again = post_csv(client, s.admin, text, **{"Idempotency-Key": "import-1"})
    assert crm.assert_json_response(again, 200) == body  # the same answer, nothing new
    assert crm.list_total(client, s.admin) == 1
    crm.assert_error(post_csv(client, s.admin, text.replace("Key,", "Other,"),
                              **{"Idempotency-Key": "import-1"}), 409, "CONFLICT")
    assert crm.list_total(client, s.admin) == 1


def test_upsert_updates_the_contact_with_the_same_email(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    phone = crm.unique_phone()
    ana = crm.create_contact(client, s.admin, first_name="Ana", email="ana.up@example.org",
                             phone=phone, tags=["a"])
    text = ("first_name,last_name,email,status,tags\r\n"
            "Ana,Lima,ANA.UP@example.org,qualified,vip\r\n"
            "Novo,,novo.up@example.org,active,\r\n")
    # Without the mode, the e-mail is taken: that row is refused, the other created.
    plain = crm.assert_json_response(post_csv(client, s.admin, text), 200)["results"]
    assert [r.get("id") is None for r in plain] == [True, False], plain
    assert plain[0]["errors"][0]["type"] == "duplicate_email", plain
    new_id = plain[1]["id"]
    assert all("updated" not in r for r in plain), plain
    # Upsert: the contact with the e-mail (in any case) is updated with the row's cells; a
    # column the file does not have stays as it was.
    resp = client.request("POST", IMPORT + "?mode=upsert", raw=text.encode(), token=s.admin,
                          headers={"Content-Type": "text/csv"})
    results = crm.assert_json_response(resp, 200)["results"]
    assert results == [{"index": 0, "id": ana["id"], "updated": True},
                       {"index": 1, "id": new_id, "updated": True}], results
    got = crm.get_contact(client, s.admin, ana["id"])
    assert (got["first_name"], got["last_name"], got["status"], got["tags"], got["phone"],
            got["email"]) == ("Ana", "Lima", "qualified", ["vip"], phone, "ana.up@example.org"), got
    assert crm.list_total(client, s.admin) == 2
    # A new e-mail is still a create; a bad cell is that row's error alone.
    more = ("first_name,email,status\r\n"
            "Caio,caio.up@example.org,active\r\n"
            "Ana,ana.up@example.org,sleeping\r\n"
            "Dora,dora.up@example.org,sleeping\r\n")
    resp = client.request("POST", IMPORT + "?mode=upsert", raw=more.encode(), token=s.admin,
                          headers={"Content-Type": "text/csv"})
    results = crm.assert_json_response(resp, 200)["results"]
    assert results[0]["updated"] is False and "id" in results[0], results
    # A bad cell is refused whether the row would update or create.
    for n in (1, 2):
        assert [e["loc"] for e in results[n]["errors"]] == [["body", "rows", n, "status"]], \
            results
    assert crm.get_contact(client, s.admin, ana["id"])["status"] == "qualified"
    assert crm.list_total(client, s.admin) == 3  # Ana, Novo, Caio: no Dora
    # The tenant's own export, imported back in upsert mode, changes nothing and adds nothing.
    before = shown(client, s.admin)
    back = client.request("POST", IMPORT + "?mode=upsert",
                          raw=export_text(client, s.admin).encode(), token=s.admin,
                          headers={"Content-Type": "text/csv"})
    assert all(r["updated"] for r in crm.assert_json_response(back, 200)["results"])
    assert shown(client, s.admin) == before
    crm.assert_validation_locs(client.request("POST", IMPORT + "?mode=merge", raw=text.encode(),
                                              token=s.admin,
                                              headers={"Content-Type": "text/csv"}),
                               ("query", "mode"))


DEALS_IMPORT = "/api/v1/deals/import"
DEAL_COMPARED = ("title", "amount", "currency", "status", "pipeline_id", "stage_id",
                 "contact_id", "expected_close_date", "lost_reason", "custom_fields")


def deals_csv(client, token, text):
    return client.request("POST", DEALS_IMPORT, raw=text.encode("utf-8"), token=token,
                          headers={"Content-Type": "text/csv"})


def test_a_deals_export_imports_unchanged(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    t = s.admin
    pipeline = crm.default_pipeline(client, t)
    won = crm.stage_of_kind(pipeline, "won")
    contact = crm.create_contact(client, t, first_name="Deal", last_name="Owner")["id"]
    made = [crm.create_deal(client, t, title="Implant, upper \"left\"", amount="4800.50",
                            contact_id=contact, expected_close_date="2030-03-31",
                            custom_fields={"referral": "Dr. Lima; clinic"}),
            crm.create_deal(client, t, title="=Whitening", currency="USD"),
            crm.create_deal(client, t, title="Braces", amount="1200.00")]
    crm.move_deal(client, t, made[2]["id"], won["id"])
    resp = client.get("/api/v1/deals/export", token=t)
    assert resp.status == 200, resp.describe()
    text = resp.body.decode("utf-8")

    results = crm.assert_json_response(deals_csv(client, t, text), 200)["results"]
    assert all("id" in r for r in results), results
    new_ids = [r["id"] for r in results]
    assert not set(new_ids) & {d["id"] for d in made}
    copies = sorted((crm.get_deal(client, t, i) for i in new_ids), key=lambda d: d["title"])
    originals = sorted((crm.get_deal(client, t, d["id"]) for d in made),
                       key=lambda d: d["title"])
    assert [{k: d[k] for k in DEAL_COMPARED} for d in copies] == \
        [{k: d[k] for k in DEAL_COMPARED} for d in originals]


def test_a_deals_import_reports_each_row_and_refuses_a_bad_file(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    other = crm.tenant_session(client, cli_env)
    theirs = crm.create_contact(client, other.admin)["id"]
    text = ("title,amount,currency,contact_id,expected_close_date\r\n"
            "Check-up,150.00,BRL,,2030-01-31\r\n"
            ",10.00,BRL,,\r\n"
            "Cleaning,ten,brl,,2030-02-30\r\n"
            f"Theirs,1.00,BRL,{theirs},\r\n")
    results = crm.assert_json_response(deals_csv(client, s.admin, text), 200)["results"]
    assert "id" in results[0], results
    assert [e["loc"] for e in results[1]["errors"]] == [["body", "rows", 1, "title"]], results
    assert sorted(e["loc"][-1] for e in results[2]["errors"]) == [
        "amount", "currency", "expected_close_date"], results
    assert [e["loc"] for e in results[3]["errors"]] == [["body", "rows", 3, "contact_id"]], results
    assert crm.get_deal(client, s.admin, results[0]["id"])["amount"] == "150.00"
    # The file itself: not CSV, an unknown column, no title column, nothing created.
    before = crm.list_total(client, s.admin, "/api/v1/deals")
    crm.assert_validation_locs(client.post(DEALS_IMPORT, {"title": "x"}, token=s.admin),
                               ("header", "content-type"))
    crm.assert_validation_locs(deals_csv(client, s.admin, "title,shoe\r\nA,1\r\n"),
                               ("body", "header", "shoe"))
    crm.assert_validation_locs(deals_csv(client, s.admin, "amount\r\n1.00\r\n"),
                               ("body", "header", "title"))
    assert crm.list_total(client, s.admin, "/api/v1/deals") == before
    _, email, password = crm.create_user(client, s.admin, "viewer")
    viewer = crm.login(client, email, password)["access_token"]
    crm.assert_error(deals_csv(client, viewer, text), 403, "INSUFFICIENT_PERMISSIONS")


# ---- files of many parts (docs/design.md "Import": committed 1,000 rows at a time) ----------


def contact_rows(n, tag, bad=()):
    """A file of n rows; a row in `bad` has no first name (its own error)."""
    lines = ["first_name,email,tags"]
    for i in range(n):
        lines.append(f"{'' if i in bad else 'P' + str(i)},{tag}.{i}@example.org,{tag}")
    return "\r\n".join(lines) + "\r\n"


def test_a_file_of_many_parts_is_streamed_each_row_in_its_place(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    text = contact_rows(2500, "parts", bad={5, 1500})
    # A row of the third part repeats the e-mail of a row of the first: refused as a duplicate
    # of the contact the first part created.
    text = text.replace("P2300,parts.2300@", "P2300,parts.10@")
    resp = post_csv(client, s.admin, text)
    assert resp.status == 200, resp.describe()
    assert resp.headers.get("Transfer-Encoding") == "chunked", resp.headers
    results = crm.assert_json_response(resp, 200)["results"]
    assert [r["index"] for r in results] == list(range(2500))
    failed = {r["index"]: [e["loc"] for e in r["errors"]] for r in results if "errors" in r}
    assert failed == {5: [["body", "rows", 5, "first_name"]],
                      1500: [["body", "rows", 1500, "first_name"]],
                      2300: [["body", "rows", 2300, "email"]]}, failed
    assert crm.list_total(client, s.admin, params={"tag": "parts"}) == 2497
    created = {r["index"]: r["id"] for r in results if "id" in r}
    for i in (0, 999, 1000, 2499):
        c = crm.get_contact(client, s.admin, created[i])
        assert (c["first_name"], c["email"]) == (f"P{i}", f"parts.{i}@example.org")
    # Audited as the request's, part by part: every contact created is named once.
    rows = crm.audit_rows(client, s.admin, action="import", limit=100)
    named = [i for row in rows for i in row["ids"]]
    assert sorted(named) == sorted(created.values())
    # The parts run off the I/O threads, still as the admin who sent the file.
    assert {(r["actor_type"], r["role"]) for r in rows} == {("user", "admin")}, rows[:2]


def test_a_large_import_with_a_key_imports_each_row_once(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    text = contact_rows(2100, "keyed")
    key = {"Idempotency-Key": "big-import-1"}
    first = crm.assert_json_response(post_csv(client, s.admin, text, **key), 200)
    assert len(first["results"]) == 2100 and all("id" in r for r in first["results"])
    again = crm.assert_json_response(post_csv(client, s.admin, text, **key), 200)
    assert again == first  # every part replayed, nothing created again
    assert crm.list_total(client, s.admin) == 2100
    # The same key with another file: refused before any row is imported.
    crm.assert_error(post_csv(client, s.admin, contact_rows(2100, "other"), **key),
                     409, "CONFLICT")
    assert crm.list_total(client, s.admin) == 2100


def test_a_file_is_checked_whole_before_any_row_is_imported(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    # 100,001 rows: one over the limit.
    crm.assert_validation_locs(post_csv(client, s.admin, "first_name\n" + "a\n" * 100_001),
                               ("body", "rows"))
    # Quotes that never close on the last line: without the whole-file check the first two
    # parts would have been committed before the fault was read.
    broken = contact_rows(2500, "broken") + '"never closed,x@example.org,\r\n'
    resp = post_csv(client, s.admin, broken)
    crm.assert_validation_locs(resp, ("body",))
    assert "line 2502" in resp.body.decode(), resp.describe()
    assert crm.list_total(client, s.admin) == 0


def test_a_deals_file_of_many_parts_reports_rows_by_their_place(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    lines = ["title,amount,currency"] + [f"D{i},{i}.00,BRL" for i in range(1200)]
    lines[1 + 1100] = "D1100,lots,BRL"
    text = "\r\n".join(lines) + "\r\n"
    resp = deals_csv(client, s.admin, text)
    results = crm.assert_json_response(resp, 200)["results"]
    assert [r["index"] for r in results] == list(range(1200))
    failed = {r["index"]: [e["loc"] for e in r["errors"]] for r in results if "errors" in r}
    assert failed == {1100: [["body", "rows", 1100, "amount"]]}, failed
    assert crm.list_total(client, s.admin, "/api/v1/deals") == 1199
    last = crm.get_deal(client, s.admin, results[1199]["id"])
    assert (last["title"], last["amount"]) == ("D1199", "1199.00")


def test_an_import_cut_by_a_failing_part_is_completed_by_sending_it_again(client, cli_env,
                                                                          database):
    """A part that fails after the answer began breaks the stream (never a body that looks
    whole); sent again with its Idempotency-Key, the committed part is replayed and the rest is
    imported: every row once. The failure: a row written to Postgres behind carecrm's back
    takes the e-mail of a row of the second part, so that part's commit fails."""
    s = crm.tenant_session(client, cli_env)
    tid = s.tenant.tenant_id
    crm.create_contact(client, s.admin, first_name="Loaded")  # the state is in memory
    database.query("INSERT INTO contacts (tenant_id, first_name, email, status, created_at,"
                   f" updated_at) VALUES ({tid}, 'Sneaked', 'resume.1500@example.org', 'active',"
                   " now(), now())")
    text = contact_rows(2500, "resume")
    key = {"Idempotency-Key": "cut-import"}
    with pytest.raises(http.client.IncompleteRead):
        post_csv(client, s.admin, text, **key)
    stored = database.query(f"SELECT count(*) FROM contacts WHERE tenant_id = {tid}"
                            " AND email LIKE 'resume.%'")
    assert int(stored) == 1 + 1000, stored  # the sneaked row and the first part, no more
    results = crm.assert_json_response(post_csv(client, s.admin, text, **key), 200)["results"]
    assert [r["index"] for r in results] == list(range(2500))
    assert [e["type"] for e in results[1500]["errors"]] == ["duplicate_email"], results[1500]
    assert all("id" in r for i, r in enumerate(results) if i != 1500)
    twice = database.query(f"SELECT count(*) FROM (SELECT email FROM contacts WHERE tenant_id ="
                           f" {tid} GROUP BY email HAVING count(*) > 1) d")
    assert int(twice) == 0, "a row was imported twice"
    assert crm.list_total(client, s.admin, params={"tag": "resume"}) == 2499
