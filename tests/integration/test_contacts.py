"""Contacts (spec "Contact", "Contact endpoints"; contract §1, §2, §3 roles, §4): create, read,
update (PUT = PATCH), delete, the response shapes, validation, e-mail uniqueness, the role matrix,
tenant isolation, durability in Postgres, a restart, the outbox events and concurrent creates."""
import secrets

import pytest

import crm

CONTACTS = crm.CONTACTS
NOWHERE_ID = crm.NOWHERE_ID
MISSING = crm.MISSING
UPDATE_METHODS = ["PUT", "PATCH"]


def url(contact_id) -> str:
    return crm.contact_url(contact_id)


def email(prefix="contact") -> str:
    return crm.unique_email(prefix)


@pytest.fixture(scope="module")
def company_a(client, admin) -> dict:
    return crm.create_company(client, admin, name="Acme Clinic " + secrets.token_hex(2))


@pytest.fixture(scope="module")
def company_b(client, sess_b) -> dict:
    return crm.create_company(client, sess_b.admin, name="Other Tenant Clinic")


@pytest.fixture(scope="module")
def contact_b(client, sess_b, company_b) -> dict:
    """A contact of tenant B with every field set (B's admin only ever reads it)."""
    created = crm.create_contact(client, sess_b.admin, first_name="Bea", last_name="Other",
                                 email=email("bea"), phone="+4930123456", status="qualified",
                                 source="referral", company_id=company_b["id"],
                                 tags=["b-only"], custom_fields={"tenant": "b"})
    return crm.get_contact(client, sess_b.admin, created["id"])


def total(client, token) -> int:
    return crm.list_total(client, token)


def assert_update_response(body, contact_id, sent: dict, stored: dict) -> None:
    """Exactly id, the fields sent (with their stored values) and updated_at."""
    want = {"id", "updated_at", *sent}
    assert isinstance(body, dict) and set(body) == want, \
        f"update response must have exactly {sorted(want)}: {body}"
    assert body["id"] == contact_id, body
    crm.assert_timestamp(body["updated_at"])
    assert body["updated_at"] == stored["updated_at"], (body, stored)
    for key in sent:
        assert body[key] == stored[key], f"{key}: response {body[key]!r}, stored {stored[key]!r}"


def update(client, token, method, contact_id, body, status=200):
    resp = client.request(method, url(contact_id), body, token=token)
    return crm.assert_json_response(resp, status)


# ---- create and read ------------------------------------------------------------------------


def test_create_minimal_contact_is_201_with_location_and_create_shape(client, admin):
    resp = client.post(CONTACTS, {"first_name": "Minnie"}, token=admin)
    body = crm.assert_json_response(resp, 201)
    crm.assert_contact_created(body, first_name="Minnie", last_name=None, email=None, phone=None,
                               status="active")
    assert resp.header("Location") == url(body["id"]), resp.describe()


def test_get_returns_the_single_contact_shape_with_defaults(client, admin):
    created = crm.create_contact(client, admin, first_name="Dora")
    got = crm.get_contact(client, admin, created["id"])
    crm.assert_contact(got, id=created["id"], first_name="Dora", last_name=None, email=None,
                       phone=None, company_id=None, company=None, status="active", source=None,
                       tags=[], custom_fields={}, created_at=created["created_at"])
    assert got["updated_at"] >= got["created_at"], got


def test_create_with_every_field_stores_every_field(client, admin, company_a):
    body = {"first_name": "Florence", "last_name": "Nightingale", "email": email("florence"),
            "phone": "+442071234567", "company_id": company_a["id"], "status": "qualified",
            "source": "referral", "tags": ["VIP", "cardiology"],
            "custom_fields": {"age": 42, "vip": True, "notes": "prefers mornings",
                              "nested": {"a": [1, 2, None]}}}
    created = crm.create_contact(client, admin, **body)
    crm.assert_contact_created(created, first_name="Florence", last_name="Nightingale",
                               email=body["email"], phone="+442071234567", status="qualified")
    got = crm.get_contact(client, admin, created["id"])
    crm.assert_contact(got, id=created["id"], first_name="Florence", last_name="Nightingale",
                       email=body["email"], phone="+442071234567", company_id=company_a["id"],
                       company={"id": company_a["id"], "name": company_a["name"]},
                       status="qualified", source="referral", tags=["VIP", "cardiology"],
                       custom_fields=body["custom_fields"], created_at=created["created_at"])


def test_explicit_nulls_for_optional_fields_are_accepted(client, admin):
    created = crm.create_contact(client, admin, first_name="Nulla", last_name=None, email=None,
                                 phone=None, company_id=None, source=None)
    crm.assert_contact(crm.get_contact(client, admin, created["id"]), last_name=None, email=None,
                       phone=None, company_id=None, company=None, source=None, status="active")


@pytest.mark.parametrize("status", crm.CONTACT_STATUSES)
def test_every_status_is_accepted_on_create(client, admin, status):
    created = crm.create_contact(client, admin, first_name="Stat", status=status)
    assert created["status"] == status
    assert crm.get_contact(client, admin, created["id"])["status"] == status


@pytest.mark.parametrize("source", crm.CONTACT_SOURCES)
def test_every_source_is_accepted_on_create(client, admin, source):
    created = crm.create_contact(client, admin, first_name="Src", source=source)
    assert crm.get_contact(client, admin, created["id"])["source"] == source


def test_created_contact_is_listed_with_the_list_item_shape(client, admin, company_a):
    created = crm.create_contact(client, admin, first_name="Listed", last_name="Item",
                                 email=email("listed"), company_id=company_a["id"],
                                 source="website", tags=["x"], custom_fields={"k": 1})
    got = crm.get_contact(client, admin, created["id"])
    items = [i for i in crm.list_all(client, admin, CONTACTS) if i["id"] == created["id"]]
    assert len(items) == 1, "the new contact is listed once"
    crm.assert_contact_item(items[0])
    assert items[0] == {k: got[k] for k in crm.CONTACT_ITEM_KEYS}


def test_tags_are_deduplicated_case_insensitively_keeping_the_first_spelling(client, admin):
    created = crm.create_contact(client, admin, first_name="Tagged", tags=["VIP", "vip", "x", "Vip",
                                                                             "X", "y"])
    assert crm.get_contact(client, admin, created["id"])["tags"] == ["VIP", "x", "y"]


def test_accepted_boundaries(client, admin):
    """Values exactly at the documented limits are stored."""
    tags = [f"t{i:02d}" for i in range(50)]
    long_tag = "t" * 50
    body = {"first_name": "a" * 100, "last_name": "b" * 100, "phone": "+12",
            "tags": tags[:49] + [long_tag], "custom_fields": {"blob": "z" * 15000}}
    created = crm.create_contact(client, admin, **body)
    got = crm.get_contact(client, admin, created["id"])
    crm.assert_contact(got, first_name="a" * 100, last_name="b" * 100, phone="+12",
                       tags=tags[:49] + [long_tag], custom_fields={"blob": "z" * 15000})
    created = crm.create_contact(client, admin, first_name="Max", phone="+123456789012345",
                                 tags=tags)
    crm.assert_contact(crm.get_contact(client, admin, created["id"]), phone="+123456789012345",
                       tags=tags)


def test_first_name_length_is_counted_after_trimming_and_in_characters(client, admin):
    crm.create_contact(client, admin, first_name="   " + "a" * 100 + "   ")
    created = crm.create_contact(client, admin, first_name="é" * 100)  # 200 bytes of UTF-8
    assert crm.get_contact(client, admin, created["id"])["first_name"] == "é" * 100
    crm.assert_validation(client.post(CONTACTS, {"first_name": "é" * 101}, token=admin),
                          (("body", "first_name"), "string_too_long"))


# ---- create validation ----------------------------------------------------------------------

TOO_MANY_TAGS = [f"tag{i}" for i in range(51)]
BIG_CUSTOM_FIELDS = {"blob": "x" * 17000}

INVALID_CREATE = [
    ("first_name missing", {"first_name": MISSING}, [(("body", "first_name"), "missing")]),
    ("first_name empty", {"first_name": ""}, [(("body", "first_name"), "string_too_short")]),
    ("first_name blank", {"first_name": "   "}, [(("body", "first_name"), "string_too_short")]),
    ("first_name 101", {"first_name": "a" * 101}, [(("body", "first_name"), "string_too_long")]),
    ("first_name int", {"first_name": 5}, [(("body", "first_name"), "string_type")]),
    ("first_name null", {"first_name": None}, [(("body", "first_name"), "string_type")]),
    ("first_name list", {"first_name": ["Ann"]}, [(("body", "first_name"), "string_type")]),
    ("last_name 101", {"last_name": "b" * 101}, [(("body", "last_name"), "string_too_long")]),
    ("last_name int", {"last_name": 7}, [(("body", "last_name"), "string_type")]),
    ("email plain", {"email": "plainaddress"}, [(("body", "email"), "value_error.email")]),
    ("email no domain", {"email": "ann@"}, [(("body", "email"), "value_error.email")]),
    ("email no local", {"email": "@example.com"}, [(("body", "email"), "value_error.email")]),
    ("email space", {"email": "ann smith@example.com"}, [(("body", "email"), "value_error.email")]),
    ("email two @", {"email": "ann@@example.com"}, [(("body", "email"), "value_error.email")]),
    ("phone no plus", {"phone": "4155550100"}, [(("body", "phone"), "value_error.phone")]),
    ("phone leading 0", {"phone": "+04155550100"}, [(("body", "phone"), "value_error.phone")]),
    ("phone too short", {"phone": "+1"}, [(("body", "phone"), "value_error.phone")]),
    ("phone 16 digits", {"phone": "+1234567890123456"}, [(("body", "phone"), "value_error.phone")]),
    ("phone spaces", {"phone": "+1 415 555 0100"}, [(("body", "phone"), "value_error.phone")]),
    ("phone dashes", {"phone": "+1-415-555-0100"}, [(("body", "phone"), "value_error.phone")]),
    ("phone letters", {"phone": "+1415555CALL"}, [(("body", "phone"), "value_error.phone")]),
    ("phone empty", {"phone": ""}, [(("body", "phone"), "value_error.phone")]),
    ("status unknown", {"status": "archived"}, [(("body", "status"), "enum")]),
    ("status upper", {"status": "ACTIVE"}, [(("body", "status"), "enum")]),
    ("status empty", {"status": ""}, [(("body", "status"), "enum")]),
    ("source unknown", {"source": "email"}, [(("body", "source"), "enum")]),
    ("source capitalised", {"source": "Website"}, [(("body", "source"), "enum")]),
    ("company_id text", {"company_id": "abc"}, [(("body", "company_id"), "int_parsing")]),
    ("company_id float", {"company_id": 1.5}, [(("body", "company_id"), "int_parsing")]),
    ("company_id nowhere", {"company_id": NOWHERE_ID}, [(("body", "company_id"), "value_error")]),
    ("tags string", {"tags": "vip"}, [(("body", "tags"), "value_error")]),
    ("tags object", {"tags": {"vip": True}}, [(("body", "tags"), "value_error")]),
    ("tag int", {"tags": [1]}, [(("body", "tags", 0), "string_type")]),
    ("tag null", {"tags": ["ok", None]}, [(("body", "tags", 1), "string_type")]),
    ("tag empty", {"tags": ["ok", ""]}, [(("body", "tags", 1), "string_too_short")]),
    ("tag 51", {"tags": ["ok", "ok2", "t" * 51]}, [(("body", "tags", 2), "string_too_long")]),
    ("tags 51", {"tags": TOO_MANY_TAGS}, [(("body", "tags"), "value_error")]),
    ("custom_fields list", {"custom_fields": []}, [(("body", "custom_fields"), "value_error")]),
    ("custom_fields string", {"custom_fields": "x"}, [(("body", "custom_fields"), "value_error")]),
    ("custom_fields int", {"custom_fields": 5}, [(("body", "custom_fields"), "value_error")]),
    ("custom_fields > 16 KiB", {"custom_fields": BIG_CUSTOM_FIELDS},
     [(("body", "custom_fields"), "value_error")]),
    ("unknown field", {"nickname": "x"}, [(("body", "nickname"), "extra_forbidden")]),
    ("company object", {"company": {"id": 1, "name": "X"}},
     [(("body", "company"), "extra_forbidden")]),
    ("id", {"id": 1}, [(("body", "id"), "extra_forbidden")]),
    ("tenant_id", {"tenant_id": 1}, [(("body", "tenant_id"), "extra_forbidden")]),
    ("created_at", {"created_at": "2020-01-01T00:00:00.000000Z"},
     [(("body", "created_at"), "extra_forbidden")]),
    ("updated_at", {"updated_at": "2020-01-01T00:00:00.000000Z"},
     [(("body", "updated_at"), "extra_forbidden")]),
]


def build_body(override: dict) -> dict:
    return crm.with_override({"first_name": "Valid", "email": email("valid")}, override)


@pytest.mark.parametrize("override,expected", [c[1:] for c in INVALID_CREATE],
                         ids=[c[0] for c in INVALID_CREATE])
def test_invalid_create_is_422_and_stores_nothing(client, admin, override, expected):
    before = total(client, admin)
    body = build_body(override)
    crm.assert_validation(client.post(CONTACTS, body, token=admin), *expected)
    assert total(client, admin) == before, "an invalid contact was stored"
    if "email" not in override:
        assert crm.list_page(client, admin, CONTACTS, {"search": body["email"]})["total"] == 0


def test_company_of_another_tenant_is_422_value_error(client, admin, company_b):
    before = total(client, admin)
    crm.assert_validation(client.post(CONTACTS, {"first_name": "Cross",
                                                 "company_id": company_b["id"]}, token=admin),
                          (("body", "company_id"), "value_error"))
    assert total(client, admin) == before


def test_every_failing_field_is_reported_in_one_422(client, admin):
    before = total(client, admin)
    body = {"first_name": "", "last_name": "l" * 101, "email": "nope", "phone": "123",
            "status": "archived", "source": "tv", "company_id": "abc", "tags": ["ok", ""],
            "custom_fields": [], "tenant_id": 2, "nickname": "n"}
    crm.assert_validation(client.post(CONTACTS, body, token=admin),
                          (("body", "first_name"), "string_too_short"),
                          (("body", "last_name"), "string_too_long"),
                          (("body", "email"), "value_error.email"),
                          (("body", "phone"), "value_error.phone"),
                          (("body", "status"), "enum"),
                          (("body", "source"), "enum"),
                          (("body", "company_id"), "int_parsing"),
                          (("body", "tags", 1), "string_too_short"),
                          (("body", "custom_fields"), "value_error"),
                          (("body", "tenant_id"), "extra_forbidden"),
                          (("body", "nickname"), "extra_forbidden"))
    assert total(client, admin) == before


@pytest.mark.parametrize("raw", ['{"first_name": "Ann"', "first_name=Ann", '{"first_name": }'])
def test_malformed_json_is_422_json_invalid(client, admin, raw):
    before = total(client, admin)
    crm.assert_validation(client.post(CONTACTS, raw=raw, token=admin), (("body",), "json_invalid"))
    assert total(client, admin) == before


# ---- e-mail uniqueness ----------------------------------------------------------------------


def test_duplicate_email_is_409_case_insensitively_within_the_tenant(client, admin, sess_b):
    address = email("dup")
    crm.create_contact(client, admin, first_name="First", email=address)
    before = total(client, admin)
    for candidate in (address, address.upper(), address.capitalize()):
        resp = client.post(CONTACTS, {"first_name": "Second", "email": candidate}, token=admin)
        crm.assert_error(resp, 409, "DUPLICATE_EMAIL")
    assert total(client, admin) == before
    other = crm.create_contact(client, sess_b.admin, first_name="Elsewhere", email=address)
    assert crm.get_contact(client, sess_b.admin, other["id"])["email"].lower() == address


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_duplicate_email_on_update_is_409_and_changes_nothing(client, admin, method):
    taken = email("taken")
    crm.create_contact(client, admin, first_name="Holder", email=taken)
    mine = crm.create_contact(client, admin, first_name="Mover", email=email("mover"))
    before = crm.get_contact(client, admin, mine["id"])
    for candidate in (taken, taken.upper()):
        resp = client.request(method, url(mine["id"]), {"email": candidate, "first_name": "Moved"},
                              token=admin)
        crm.assert_error(resp, 409, "DUPLICATE_EMAIL")
    assert crm.get_contact(client, admin, mine["id"]) == before


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_updating_a_contact_to_its_own_email_is_not_a_conflict(client, admin, method):
    own = email("own")
    mine = crm.create_contact(client, admin, first_name="Self", email=own)
    body = update(client, admin, method, mine["id"], {"email": own})
    assert body["email"].lower() == own
    body = update(client, admin, method, mine["id"], {"email": own.upper()})
    stored = crm.get_contact(client, admin, mine["id"])
    assert_update_response(body, mine["id"], {"email": 1}, stored)
    assert stored["email"].lower() == own


def test_email_of_a_deleted_contact_can_be_used_again(client, admin):
    address = email("reuse")
    first = crm.create_contact(client, admin, first_name="Gone", email=address)
    crm.assert_no_content(client.delete(url(first["id"]), token=admin))
    second = crm.create_contact(client, admin, first_name="Back", email=address)
    assert second["id"] != first["id"]


# ---- update ---------------------------------------------------------------------------------


@pytest.fixture
def full_contact(client, admin, company_a) -> dict:
    created = crm.create_contact(
        client, admin, first_name="Upd", last_name="Ate", email=email("upd"),
        phone="+14155550100", company_id=company_a["id"], status="active", source="website",
        tags=["alpha", "Beta"], custom_fields={"a": 1, "b": "x", "c": True})
    return crm.get_contact(client, admin, created["id"])


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_changes_only_the_fields_sent(client, admin, full_contact, method):
    before = full_contact
    body = update(client, admin, method, before["id"], {"first_name": "Renamed"})
    after = crm.get_contact(client, admin, before["id"])
    assert_update_response(body, before["id"], {"first_name": 1}, after)
    assert after == {**before, "first_name": "Renamed", "updated_at": after["updated_at"]}
    assert after["updated_at"] > before["updated_at"], "updated_at did not move"
    assert after["created_at"] == before["created_at"]

    body = update(client, admin, method, before["id"], {"last_name": "Other", "status": "qualified",
                                                        "phone": "+4930123456"})
    again = crm.get_contact(client, admin, before["id"])
    assert_update_response(body, before["id"], {"last_name": 1, "status": 1, "phone": 1}, again)
    assert again == {**after, "last_name": "Other", "status": "qualified", "phone": "+4930123456",
                     "updated_at": again["updated_at"]}
    assert again["updated_at"] > after["updated_at"]


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_response_carries_every_sent_field_with_its_stored_value(client, admin, company_a,
                                                                       method):
    created = crm.create_contact(client, admin, first_name="Echo")
    sent = {"first_name": "Echoed", "last_name": "Back", "email": email("echo"),
            "phone": "+4915112345678", "company_id": company_a["id"], "status": "inactive",
            "source": "social", "tags": ["one", "Two", "two"], "custom_fields": {"k": "v"}}
    body = update(client, admin, method, created["id"], sent)
    stored = crm.get_contact(client, admin, created["id"])
    assert_update_response(body, created["id"], sent, stored)
    crm.assert_contact(stored, first_name="Echoed", last_name="Back", phone="+4915112345678",
                       company_id=company_a["id"], status="inactive", source="social",
                       tags=["one", "Two"], custom_fields={"k": "v"},
                       company={"id": company_a["id"], "name": company_a["name"]})
    assert stored["email"].lower() == sent["email"]


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_null_clears_optional_fields(client, admin, full_contact, method):
    cleared = {"last_name": None, "email": None, "phone": None, "company_id": None, "source": None}
    body = update(client, admin, method, full_contact["id"], cleared)
    stored = crm.get_contact(client, admin, full_contact["id"])
    assert_update_response(body, full_contact["id"], cleared, stored)
    assert stored == {**full_contact, **cleared, "company": None,
                      "updated_at": stored["updated_at"]}


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_custom_fields_merge_key_by_key_and_null_removes_a_key(client, admin, full_contact, method):
    body = update(client, admin, method, full_contact["id"],
                  {"custom_fields": {"b": "y", "c": None, "d": [1, 2], "e": {"f": None}}})
    stored = crm.get_contact(client, admin, full_contact["id"])
    want = {"a": 1, "b": "y", "d": [1, 2], "e": {"f": None}}
    assert stored["custom_fields"] == want
    assert_update_response(body, full_contact["id"], {"custom_fields": 1}, stored)
    assert stored["tags"] == full_contact["tags"]
    body = update(client, admin, method, full_contact["id"], {"custom_fields": {}})
    assert crm.get_contact(client, admin, full_contact["id"])["custom_fields"] == want


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_tags_replace_the_set(client, admin, full_contact, method):
    body = update(client, admin, method, full_contact["id"], {"tags": ["gamma", "ALPHA", "Gamma"]})
    stored = crm.get_contact(client, admin, full_contact["id"])
    assert stored["tags"] == ["gamma", "ALPHA"]
    assert_update_response(body, full_contact["id"], {"tags": 1}, stored)
    update(client, admin, method, full_contact["id"], {"tags": []})
    stored = crm.get_contact(client, admin, full_contact["id"])
    assert stored["tags"] == []
    assert stored["custom_fields"] == full_contact["custom_fields"]


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_status_can_be_set_to_every_value(client, admin, method):
    created = crm.create_contact(client, admin, first_name="Flow")
    for status in ("qualified", "unqualified", "inactive", "active"):
        body = update(client, admin, method, created["id"], {"status": status})
        assert body["status"] == status
        assert crm.get_contact(client, admin, created["id"])["status"] == status


INVALID_UPDATE = [
    ({"first_name": None}, [(("body", "first_name"), "string_type")]),
    ({"first_name": ""}, [(("body", "first_name"), "string_too_short")]),
    ({"first_name": "  "}, [(("body", "first_name"), "string_too_short")]),
    ({"first_name": "a" * 101}, [(("body", "first_name"), "string_too_long")]),
    ({"last_name": "b" * 101}, [(("body", "last_name"), "string_too_long")]),
    ({"email": "nope"}, [(("body", "email"), "value_error.email")]),
    ({"phone": "0049301234"}, [(("body", "phone"), "value_error.phone")]),
    ({"status": "archived"}, [(("body", "status"), "enum")]),
    ({"source": "tv"}, [(("body", "source"), "enum")]),
    ({"company_id": "abc"}, [(("body", "company_id"), "int_parsing")]),
    ({"company_id": NOWHERE_ID}, [(("body", "company_id"), "value_error")]),
    ({"tags": "x"}, [(("body", "tags"), "value_error")]),
    ({"tags": ["ok", 3]}, [(("body", "tags", 1), "string_type")]),
    ({"tags": TOO_MANY_TAGS}, [(("body", "tags"), "value_error")]),
    ({"custom_fields": [1]}, [(("body", "custom_fields"), "value_error")]),
    ({"custom_fields": BIG_CUSTOM_FIELDS}, [(("body", "custom_fields"), "value_error")]),
    ({"nickname": "x"}, [(("body", "nickname"), "extra_forbidden")]),
    ({"id": 1, "tenant_id": 1, "created_at": "2020-01-01T00:00:00.000000Z",
      "updated_at": "2020-01-01T00:00:00.000000Z"},
     [(("body", f), "extra_forbidden") for f in ("id", "tenant_id", "created_at", "updated_at")]),
    ({"first_name": "Fine", "email": "bad", "tags": [""], "status": "x"},
     [(("body", "email"), "value_error.email"), (("body", "tags", 0), "string_too_short"),
      (("body", "status"), "enum")]),
]


@pytest.mark.parametrize("method", UPDATE_METHODS)
@pytest.mark.parametrize("body,expected", INVALID_UPDATE)
def test_invalid_update_is_422_and_changes_nothing(client, admin, full_contact, method, body,
                                                   expected):
    resp = client.request(method, url(full_contact["id"]), body, token=admin)
    crm.assert_validation(resp, *expected)
    assert crm.get_contact(client, admin, full_contact["id"]) == full_contact


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_to_company_of_another_tenant_is_422(client, admin, full_contact, company_b,
                                                    method):
    resp = client.request(method, url(full_contact["id"]), {"company_id": company_b["id"]},
                          token=admin)
    crm.assert_validation(resp, (("body", "company_id"), "value_error"))
    assert crm.get_contact(client, admin, full_contact["id"]) == full_contact


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_with_malformed_json_is_422(client, admin, full_contact, method):
    resp = client.request(method, url(full_contact["id"]), raw='{"first_name": ', token=admin)
    crm.assert_validation(resp, (("body",), "json_invalid"))
    assert crm.get_contact(client, admin, full_contact["id"]) == full_contact


# ---- delete ---------------------------------------------------------------------------------


def test_delete_is_204_and_the_contact_is_gone(client, admin):
    created = crm.create_contact(client, admin, first_name="Doomed", email=email("doomed"),
                                 tags=["gone"])
    before = total(client, admin)
    crm.assert_no_content(client.delete(url(created["id"]), token=admin))
    crm.assert_error(client.get(url(created["id"]), token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.delete(url(created["id"]), token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.put(url(created["id"]), {"first_name": "Zombie"}, token=admin), 404,
                     "NOT_FOUND")
    crm.assert_error(client.patch(url(created["id"]), {"first_name": "Zombie"}, token=admin), 404,
                     "NOT_FOUND")
    assert total(client, admin) == before - 1
    assert created["id"] not in {i["id"] for i in crm.list_all(client, admin, CONTACTS)}


# ---- path and authentication ----------------------------------------------------------------


def _request_for(method, path):
    return (method, path, {"first_name": "X"} if method in ("POST", "PUT", "PATCH") else None)


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("bad_id", ["abc", "1.5", "-x", "1e3"])
def test_non_integer_contact_id_is_422_int_parsing(client, admin, method, bad_id):
    resp = client.request(*_request_for(method, url(bad_id)), token=admin)
    crm.assert_validation(resp, (("path", "id"), "int_parsing"))


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
def test_contact_that_exists_nowhere_is_404(client, admin, method):
    resp = client.request(*_request_for(method, url(NOWHERE_ID)), token=admin)
    crm.assert_error(resp, 404, "NOT_FOUND")


@pytest.mark.parametrize("method,path", [("GET", CONTACTS), ("POST", CONTACTS), ("GET", url(1)),
                                         ("PUT", url(1)), ("PATCH", url(1)), ("DELETE", url(1))])
def test_contact_routes_without_token_are_401(client, method, path):
    crm.assert_error(client.request(*_request_for(method, path)), 401, "INVALID_CREDENTIALS")


def test_invalid_body_without_token_is_401_not_422(client):
    crm.assert_error(client.post(CONTACTS, {"first_name": ""}), 401, "INVALID_CREDENTIALS")


# ---- roles ----------------------------------------------------------------------------------

ROLE_RESULTS = {  # route -> {role: status}
    "list": {"viewer": 200, "agent": 200, "manager": 200, "admin": 200},
    "get": {"viewer": 200, "agent": 200, "manager": 200, "admin": 200},
    "create": {"viewer": 403, "agent": 201, "manager": 201, "admin": 201},
    "put": {"viewer": 403, "agent": 200, "manager": 200, "admin": 200},
    "patch": {"viewer": 403, "agent": 200, "manager": 200, "admin": 200},
    "delete": {"viewer": 403, "agent": 403, "manager": 204, "admin": 204},
}


@pytest.mark.parametrize("route", list(ROLE_RESULTS))
@pytest.mark.parametrize("role", ["viewer", "agent", "manager", "admin"])
def test_role_matrix_for_contacts(client, sess, role, route):
    admin, token = sess.admin, sess.tokens[role]
    target = crm.create_contact(client, admin, first_name="Target", tags=["t"])
    before = crm.get_contact(client, admin, target["id"])
    marker = "Role" + secrets.token_hex(4)
    method, path, body = {
        "list": ("GET", CONTACTS, None),
        "get": ("GET", url(target["id"]), None),
        "create": ("POST", CONTACTS, {"first_name": marker}),
        "put": ("PUT", url(target["id"]), {"first_name": marker}),
        "patch": ("PATCH", url(target["id"]), {"first_name": marker}),
        "delete": ("DELETE", url(target["id"]), None),
    }[route]
    resp = client.request(method, path, body, token=token)
    want = ROLE_RESULTS[route][role]
    if want == 403:
        crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
        assert crm.get_contact(client, admin, target["id"]) == before, "a refused request changed it"
        assert crm.list_page(client, admin, CONTACTS, {"search": marker})["total"] == 0
    elif want == 204:
        crm.assert_no_content(resp)
        crm.assert_error(client.get(url(target["id"]), token=admin), 404, "NOT_FOUND")
    else:
        crm.assert_json_response(resp, want)
        if route == "get":
            assert resp.json == before
        elif route in ("create", "put", "patch"):
            assert crm.list_page(client, admin, CONTACTS, {"search": marker})["total"] == 1


# ---- tenant isolation -----------------------------------------------------------------------


@pytest.mark.parametrize("method,body", [("GET", None), ("PUT", {"first_name": "Hijacked"}),
                                         ("PATCH", {"status": "inactive", "tags": []}),
                                         ("DELETE", None)])
@pytest.mark.parametrize("role", ["admin", "manager", "viewer"])
def test_contact_of_another_tenant_is_403_and_unchanged(client, sess, sess_b, contact_b, method,
                                                        body, role):
    resp = client.request(method, url(contact_b["id"]), body, token=sess.tokens[role])
    crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
    assert crm.get_contact(client, sess_b.admin, contact_b["id"]) == contact_b


def test_contact_list_never_shows_another_tenants_contacts(client, admin, sess_b, contact_b):
    crm.create_contact(client, admin, first_name="Mine")
    mine = crm.list_all(client, admin, CONTACTS)
    theirs = crm.list_all(client, sess_b.admin, CONTACTS)
    assert mine and theirs
    assert not {i["id"] for i in mine} & {i["id"] for i in theirs}
    assert contact_b["id"] in {i["id"] for i in theirs}
    assert crm.list_page(client, admin, CONTACTS, {"search": contact_b["email"]})["total"] == 0
    assert crm.list_page(client, admin, CONTACTS, {"company_id": contact_b["company_id"]})[
        "total"] == 0


# ---- durability -----------------------------------------------------------------------------


def test_acknowledged_contact_is_in_postgres(client, sess, database, company_a):
    address = email("durable")
    created = crm.create_contact(client, sess.admin, first_name="Durable", last_name="Row",
                                 email=address, phone="+14155550123", company_id=company_a["id"],
                                 status="qualified", source="ads", tags=["VIP", "vip", "renal"],
                                 custom_fields={"age": 42, "vip": True})
    rows = crm.sql_rows(database, "SELECT first_name, last_name, email, phone, company_id, "
                                  "status::text AS status, source::text AS source, tags, "
                                  "custom_fields, tenant_id FROM contacts "
                                  f"WHERE id = {created['id']}")
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["email"].lower() == address
    assert {**row, "email": None} == {
        "first_name": "Durable", "last_name": "Row", "email": None, "phone": "+14155550123",
        "company_id": company_a["id"], "status": "qualified", "source": "ads",
        "tags": ["VIP", "renal"], "custom_fields": {"age": 42, "vip": True},
        "tenant_id": sess.tenant.tenant_id}


def test_acknowledged_update_is_in_postgres(client, admin, database):
    created = crm.create_contact(client, admin, first_name="Before", tags=["a"],
                                 custom_fields={"x": 1})
    update(client, admin, "PATCH", created["id"], {"first_name": "After", "tags": ["b", "c"],
                                                    "status": "inactive",
                                                    "custom_fields": {"y": "z"}})
    rows = crm.sql_rows(database, "SELECT first_name, status::text AS status, tags, custom_fields "
                                  f"FROM contacts WHERE id = {created['id']}")
    assert rows == [{"first_name": "After", "status": "inactive", "tags": ["b", "c"],
                     "custom_fields": {"x": 1, "y": "z"}}]


def test_everything_survives_a_restart(database, redis_url, migrated, cli_env):
    """Data written through one `carecrm serve` is read back unchanged by a new one on the same
    database after the first stopped on SIGTERM."""
    first = crm.start_server(database.url, redis_url, label="carecrm[restart-1]")
    second = None
    try:
        c = first.client()
        s = crm.tenant_session(c, cli_env)
        company = crm.create_company(c, s.admin, name="Restart Clinic", domain="restart.test",
                                     phone="+4930123456", industry="clinic",
                                     address="Main Street 1\nBerlin", custom_fields={"beds": 12})
        # Quotes, backslashes, commas, braces and the word NULL: rows reach Postgres as array
        # literals (persistence/contact_repo.cpp), where each of these means something.
        odd = ['say "hi"', "back\\slash", "a,b", "{brace}", "NULL", "it's"]
        rich = crm.create_contact(c, s.admin, first_name='Rita "R" {x}', last_name="Re\\start, NULL",
                                  email=email("rita"), phone="+4915112345678",
                                  company_id=company["id"], status="qualified", source="referral",
                                  tags=["VIP", "cardio"] + odd,
                                  custom_fields={"age": 42, "vip": True, "note": "ü ß 中 \"q\"",
                                                 "list": [1, "two", None], "obj": {"k": 1.5}})
        plain = crm.create_contact(c, s.admin, first_name="Paul")
        gone = crm.create_contact(c, s.admin, first_name="Gone")
        update(c, s.admin, "PATCH", plain["id"], {"last_name": "Changed", "status": "inactive",
                                                  "custom_fields": {"k": "v"}})
        crm.assert_json_response(c.post(url(plain["id"]) + "/tags", {"tags": ["added"]},
                                        token=s.admin), 200)
        crm.assert_no_content(c.delete(url(gone["id"]), token=s.admin))

        def snapshot(cl, token):
            return {
                "contacts": [crm.get_contact(cl, token, i) for i in (rich["id"], plain["id"])],
                "list": crm.list_all(cl, token, CONTACTS),
                "company": crm.get_company(cl, token, company["id"]),
                "companies": crm.list_all(cl, token, crm.COMPANIES),
                "tags": crm.tags_of(cl, token),
            }

        before = snapshot(c, s.admin)
        assert before["contacts"][0]["custom_fields"]["note"] == "ü ß 中 \"q\""
        assert before["contacts"][0]["first_name"] == 'Rita "R" {x}'
        assert before["contacts"][0]["last_name"] == "Re\\start, NULL"
        assert sorted(before["contacts"][0]["tags"]) == sorted(["VIP", "cardio"] + odd)
        assert before["contacts"][1]["tags"] == ["added"]
        first.stop(check=True)

        second = crm.start_server(database.url, redis_url, label="carecrm[restart-2]")
        c2 = second.client()
        token = crm.login(c2, s.tenant.admin_email, s.tenant.admin_password)["access_token"]
        assert snapshot(c2, token) == before
        crm.assert_error(c2.get(url(gone["id"]), token=token), 404, "NOT_FOUND")
        again = crm.create_contact(c2, token, first_name="Fresh")
        assert again["id"] not in (rich["id"], plain["id"], gone["id"])
        crm.assert_error(c2.post(CONTACTS, {"first_name": "Dup",
                                            "email": rich["email"]}, token=token),
                         409, "DUPLICATE_EMAIL")
        second.stop(check=True)
    finally:
        for srv in (first, second):
            if srv is not None:
                srv.kill()
                srv.cleanup()


# ---- outbox events --------------------------------------------------------------------------


def _mentions(payload, contact_id) -> bool:
    """payload->>'contact_id' (at any depth) or payload->'contact'->>'id' equals the id. A bare
    `id` elsewhere (a company's, a user's) does not count: those are other sequences."""
    def walk(value) -> bool:
        if isinstance(value, dict):
            if str(value.get("contact_id")) == str(contact_id):
                return True
            inner = value.get("contact")
            if isinstance(inner, dict) and str(inner.get("id")) == str(contact_id):
                return True
            return any(walk(v) for v in value.values())
        if isinstance(value, list):
            return any(walk(v) for v in value)
        return False

    return walk(payload)


def events_of(database, tenant_id, contact_id) -> list[str]:
    rows = crm.sql_rows(database, "SELECT event, payload, tenant_id FROM outbox "
                                  f"WHERE tenant_id = {tenant_id} ORDER BY id")
    return [r["event"] for r in rows if _mentions(r["payload"], contact_id)]


@pytest.fixture(scope="module")
def heard(client, cli_env) -> crm.TenantSession:
    """A tenant whose events someone listens to: an active contact.created workflow (no
    actions). Events are written for tenants with a listener only."""
    s = crm.tenant_session(client, cli_env, ("viewer", "agent"))
    crm.create_workflow(client, s.admin, trigger_type="contact.created")
    return s


@pytest.fixture(scope="module")
def heard_b(client, cli_env) -> crm.TenantSession:
    s = crm.tenant_session(client, cli_env)
    crm.create_workflow(client, s.admin, trigger_type="contact.created")
    return s


def test_each_contact_change_writes_its_outbox_event(client, heard, database):
    admin, tid = heard.admin, heard.tenant.tenant_id
    created = crm.create_contact(client, admin, first_name="Evented", tags=["first"])
    cid = created["id"]
    events = events_of(database, tid, cid)
    assert events.count("contact.created") == 1, events

    update(client, admin, "PATCH", cid, {"first_name": "Evented Again"})
    events = events_of(database, tid, cid)
    assert events.count("contact.updated") == 1, events
    assert "contact.status_changed" not in events, events

    update(client, admin, "PUT", cid, {"status": "qualified"})
    events = events_of(database, tid, cid)
    assert events.count("contact.updated") == 2, events
    assert events.count("contact.status_changed") == 1, events

    crm.assert_json_response(client.post(url(cid) + "/tags", {"tags": ["second"]}, token=admin),
                             200)
    events = events_of(database, tid, cid)
    assert events.count("contact.tag_added") >= 1, events

    crm.assert_no_content(client.delete(url(cid), token=admin))
    events = events_of(database, tid, cid)
    assert events.count("contact.deleted") == 1, events
    assert events[0] == "contact.created" and events[-1] == "contact.deleted", events


def test_outbox_rows_belong_to_the_tenant_of_the_change(client, heard, heard_b, database):
    created = crm.create_contact(client, heard_b.admin, first_name="Bee")
    assert events_of(database, heard_b.tenant.tenant_id, created["id"]) == ["contact.created"]
    assert events_of(database, heard.tenant.tenant_id, created["id"]) == []


def test_events_are_written_from_the_first_change_after_a_listener_exists(client, cli_env,
                                                                           database):
    """Nobody listens: a change writes no event row (it would reach nobody). Creating a
    workflow or subscription is acknowledged only once the contacts actor knows, so the very
    next change is written, and switching the last listener off stops it again."""
    s = crm.tenant_session(client, cli_env)
    tid = s.tenant.tenant_id
    quiet = crm.create_contact(client, s.admin, first_name="Unheard")
    update(client, s.admin, "PATCH", quiet["id"], {"status": "inactive"})
    assert events_of(database, tid, quiet["id"]) == []

    wf = crm.create_workflow(client, s.admin, trigger_type="contact.status_changed")
    update(client, s.admin, "PATCH", quiet["id"], {"status": "qualified"})
    assert events_of(database, tid, quiet["id"]) == ["contact.updated",
                                                      "contact.status_changed"]

    crm.assert_json_response(
        client.patch(crm.workflow_url(wf["id"]), {"is_active": False}, token=s.admin), 200)
    update(client, s.admin, "PATCH", quiet["id"], {"status": "active"})
    assert events_of(database, tid, quiet["id"]) == ["contact.updated",
                                                      "contact.status_changed"]


def test_refused_or_invalid_changes_write_no_event(client, heard, sess_b, database):
    admin, tid = heard.admin, heard.tenant.tenant_id
    created = crm.create_contact(client, admin, first_name="Quiet")
    cid = created["id"]
    before = events_of(database, tid, cid)
    assert before == ["contact.created"], before
    crm.assert_error(client.patch(url(cid), {"status": "inactive"}, token=heard.tokens["viewer"]),
                     403, "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.delete(url(cid), token=heard.tokens["agent"]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.patch(url(cid), {"status": "inactive"}, token=sess_b.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_validation(client.patch(url(cid), {"status": "inactive", "email": "bad"},
                                       token=admin),
                          (("body", "email"), "value_error.email"))
    assert events_of(database, tid, cid) == before
    assert events_of(database, sess_b.tenant.tenant_id, cid) == []


# ---- concurrency ----------------------------------------------------------------------------


def test_200_concurrent_creates_all_succeed_and_are_stored(client, cli_env, database):
    s = crm.tenant_session(client, cli_env)
    run = secrets.token_hex(3)

    def create(i):
        return client.post(CONTACTS, {"first_name": f"Conc{i}", "email": f"conc{i}-{run}@example.com",
                                      "tags": [f"n{i % 7}"], "custom_fields": {"i": i}},
                           token=s.admin)

    responses = crm.run_parallel(create, list(range(200)), workers=16)
    bad = [r.describe() for r in responses if r.status != 201]
    assert not bad, f"{len(bad)} creates failed, e.g. {bad[:3]}"
    ids = [r.json["id"] for r in responses]
    assert len(set(ids)) == 200, "ids are not distinct"
    for i, r in enumerate(responses):
        assert r.json["first_name"] == f"Conc{i}"
    rows = crm.sql_rows(database, "SELECT id, first_name, custom_fields FROM contacts "
                                  f"WHERE tenant_id = {s.tenant.tenant_id}")
    assert {r["id"] for r in rows} == set(ids)
    by_id = {r["id"]: r for r in rows}
    for i, cid in enumerate(ids):
        assert by_id[cid]["first_name"] == f"Conc{i}" and by_id[cid]["custom_fields"] == {"i": i}
    assert crm.list_total(client, s.admin) == 200


def test_every_acknowledged_update_is_seen_by_the_next_get_and_search(client, cli_env):
    """Reads of a live tenant are answered on the I/O thread from the committed contacts
    (docs/design.md "Reads on the I/O thread"): while 8 writers update 8 contacts as fast as
    they can, the GET and the search each writer makes right after each acknowledged update
    already show it (never an older value, never a missing contact)."""
    s = crm.tenant_session(client, cli_env)
    run = secrets.token_hex(3)
    contacts = [crm.create_contact(client, s.admin, first_name=f"W{i}x{run}") for i in range(8)]

    def writer(i):
        cid = contacts[i]["id"]
        for n in range(15):
            name = f"W{i}n{n}x{run}"
            crm.assert_json_response(client.patch(crm.contact_url(cid), {"first_name": name},
                                                  token=s.admin), 200)
            got = crm.assert_json_response(client.get(crm.contact_url(cid), token=s.admin), 200)
            assert got["first_name"] == name, (name, got)
            page = crm.assert_json_response(
                client.get(f"{CONTACTS}?search={name}", token=s.admin), 200)
            assert [c["id"] for c in page["items"]] == [cid], (name, page)
        return True

    assert crm.run_parallel(writer, list(range(8)), workers=8) == [True] * 8


def test_concurrent_creates_with_the_same_email_admit_exactly_one(client, cli_env, database):
    s = crm.tenant_session(client, cli_env)
    address = email("race")

    def create(i):
        return client.post(CONTACTS, {"first_name": f"Racer{i}",
                                      "email": address.upper() if i % 2 else address},
                           token=s.admin)

    responses = crm.run_parallel(create, list(range(20)), workers=20)
    statuses = sorted(r.status for r in responses)
    assert statuses == [201] + [409] * 19, [r.describe() for r in responses if r.status not in
                                            (201, 409)] or statuses
    for r in responses:
        if r.status == 409:
            crm.assert_error(r, 409, "DUPLICATE_EMAIL")
    rows = crm.sql_rows(database, "SELECT id FROM contacts "
                                  f"WHERE tenant_id = {s.tenant.tenant_id} "
                                  f"AND lower(email) = '{address}'")
    winner = next(r for r in responses if r.status == 201)
    assert [r["id"] for r in rows] == [winner.json["id"]]
    assert crm.list_total(client, s.admin) == 1


# ---- U+0000: PostgreSQL text and jsonb cannot hold it ---------------------------------------


@pytest.mark.parametrize("body, loc", [
    ({"first_name": "Nul\x00Byte"}, ("body", "first_name")),
    ({"first_name": "Ok", "tags": ["fine", "a\x00b"]}, ("body", "tags", 1)),
    ({"first_name": "Ok", "custom_fields": {"note": "x\x00"}}, ("body", "custom_fields", "note")),
    ({"first_name": "Ok", "custom_fields": {"k\x00": 1}}, ("body", "custom_fields", "k\x00")),
])
def test_nul_character_is_422_at_its_place_and_nothing_is_stored(client, cli_env, body, loc):
    s = crm.tenant_session(client, cli_env)
    kept = crm.create_contact(client, s.admin, first_name="Kept")
    crm.assert_validation(client.post(CONTACTS, body, token=s.admin), (loc, "value_error"))
    crm.assert_validation(client.patch(url(kept["id"]), body, token=s.admin),
                          (loc, "value_error"))
    assert crm.list_total(client, s.admin) == 1
    stored = crm.get_contact(client, s.admin, kept["id"])
    assert (stored["first_name"], stored["tags"], stored["custom_fields"]) == ("Kept", [], {})
    # The tenant's writes still commit afterwards.
    crm.create_contact(client, s.admin, first_name="After")
    assert crm.list_total(client, s.admin) == 2


def test_nul_in_a_company_or_a_csv_import_is_422(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    crm.assert_validation(client.post(crm.COMPANIES, {"name": "A\x00"}, token=s.admin),
                          (("body", "name"), "value_error"))
    resp = client.request("POST", CONTACTS + "/import", token=s.admin,
                          raw=b"first_name\nNul\x00Row\n", headers={"Content-Type": "text/csv"})
    crm.assert_validation(resp, (("body",), "value_error"))
    assert crm.list_total(client, s.admin) == 0
