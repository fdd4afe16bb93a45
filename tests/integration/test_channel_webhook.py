"""The inbound channel webhooks (contract §8, docs/channels.md "Inbound"):
POST /channels/{id}/api/webhook without a JWT: the order of the checks (header 422, channel 404,
secret 401, inactive 409, body 413/422), the body's validation, the acknowledgement, contact
matching (external id remembered per channel, then phone, then e-mail case-insensitively; an
ambiguous contact block is 409 and stores nothing), new contacts (source api, name split),
idempotency on external_message_id (also 20 identical posts at once), conversation reuse and
unread counts, tenant isolation, and the message.received event into workflows and webhook
subscriptions. POST /channels/{id}/telegram/webhook with Telegram Update objects.

Tenant A (`sess`) has no workflow and no subscription; the tests of the event use a tenant of
their own (`fresh`)."""
import json
import secrets
import threading
import time

import pytest

import crm

PUBLIC_URL = "https://crm.example.test"
SERVER_ENV = {"CARECRM_PUBLIC_URL": PUBLIC_URL,
              "CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}

NOWHERE_ID = crm.NOWHERE_ID
MISSING = crm.MISSING
SECRET = "inbound-secret-" + secrets.token_hex(9)  # 33 characters
SUB_SECRET = "sub-secret-" + secrets.token_hex(10)
BODY_LIMIT = 1024 * 1024
EVENT_TIMEOUT = 20.0
CONVERSATIONS = crm.CONVERSATIONS


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


@pytest.fixture(scope="module")
def chan(client, admin) -> dict:
    """Tenant A's api channel with SECRET."""
    return crm.create_channel(client, admin, name="Portal", type="api", webhook_secret=SECRET)


@pytest.fixture
def own_chan(client, admin) -> dict:
    """A new api channel of tenant A with SECRET: its conversations are this test's only."""
    return crm.create_channel(client, admin, type="api", webhook_secret=SECRET)


def post(client, channel_id, body=None, *, secret=SECRET, raw=None, header="webhook_secret"):
    return crm.post_channel_webhook(client, channel_id, secret, body, raw=raw, header=header)


def wrong_same_length() -> str:
    other = "".join("a" if ch != "a" else "b" for ch in SECRET)
    assert len(other) == len(SECRET) and other != SECRET
    return other


def conversations_of(client, token, **params) -> list[dict]:
    items = crm.list_all(client, token, CONVERSATIONS, params)
    for item in items:
        crm.assert_conversation(item)
    return items


def contacts_total(client, token) -> int:
    return crm.list_total(client, token, crm.CONTACTS)


def channel_conversation_total(client, token, channel_id) -> int:
    return crm.list_total(client, token, CONVERSATIONS, {"channel_id": channel_id})


def body_for(phone=None, **contact) -> dict:
    contact.setdefault("phone", phone or crm.unique_phone())
    return crm.inbound_body(contact, "hello there")


# ---- the order of the checks ----------------------------------------------------------------


def test_missing_header_is_422_with_the_header_loc(client, admin, chan):
    before = contacts_total(client, admin)
    crm.assert_validation(post(client, chan["id"], body_for(), secret=None),
                          (("header", "webhook_secret"), "missing"))
    assert contacts_total(client, admin) == before
    crm.assert_validation(post(client, chan["id"], body_for(), secret=None,
                               raw=b"not json"), (("header", "webhook_secret"), "missing"))


def test_missing_header_comes_before_everything_else(client, admin):
    inactive = crm.create_channel(client, admin, webhook_secret=SECRET, is_active=False)
    for channel_id in (NOWHERE_ID, inactive["id"]):
        for raw in (json.dumps(body_for()).encode(), b"not json"):
            crm.assert_validation(post(client, channel_id, raw=raw, secret=None),
                                  (("header", "webhook_secret"), "missing"))


@pytest.mark.parametrize("header", ["webhook_secret", "webhook-secret", "Webhook-Secret"])
def test_secret_header_is_accepted_under_both_names(client, admin, own_chan, header):
    phone = crm.unique_phone()
    resp = post(client, own_chan["id"], body_for(phone, name="Header Test"), header=header)
    ack = crm.assert_inbound_ack(resp, duplicate=False)
    assert crm.get_contact(client, admin, ack["contact_id"])["phone"] == phone


@pytest.mark.parametrize("wrong", ["same length", "shorter", "longer", "unrelated"])
def test_wrong_secret_is_401_and_stores_nothing(client, admin, own_chan, wrong):
    secret = {"same length": wrong_same_length(), "shorter": SECRET[:-1],
              "longer": SECRET + "x", "unrelated": "nope"}[wrong]
    before = contacts_total(client, admin)
    crm.assert_error(post(client, own_chan["id"], body_for(), secret=secret), 401,
                     "INVALID_CREDENTIALS")
    crm.assert_error(post(client, own_chan["id"], body_for(), secret=secret,
                          header="webhook-secret"), 401, "INVALID_CREDENTIALS")
    assert contacts_total(client, admin) == before
    assert channel_conversation_total(client, admin, own_chan["id"]) == 0


def test_wrong_secret_is_checked_before_the_state_and_the_body(client, admin):
    inactive = crm.create_channel(client, admin, webhook_secret=SECRET, is_active=False)
    crm.assert_error(post(client, inactive["id"], body_for(), secret=wrong_same_length()), 401,
                     "INVALID_CREDENTIALS")
    crm.assert_error(post(client, inactive["id"], raw=b"not json", secret="x" * 40), 401,
                     "INVALID_CREDENTIALS")
    active = crm.create_channel(client, admin, webhook_secret=SECRET)
    crm.assert_error(post(client, active["id"], raw=b"not json", secret=wrong_same_length()),
                     401, "INVALID_CREDENTIALS")
    crm.assert_error(post(client, active["id"], {"contact": {}}, secret=SECRET[:-1]), 401,
                     "INVALID_CREDENTIALS")


def test_channel_without_a_secret_refuses_every_call(client, admin):
    bare = crm.create_channel(client, admin)
    assert bare["has_secret"] is False
    before = contacts_total(client, admin)
    for secret in (SECRET, "x" * 16):
        crm.assert_error(post(client, bare["id"], body_for(), secret=secret), 401,
                         "INVALID_CREDENTIALS")
    assert contacts_total(client, admin) == before
    # Removing a secret closes the channel the same way.
    chan2 = crm.create_channel(client, admin, webhook_secret=SECRET)
    crm.inbound(client, chan2["id"], SECRET, {"phone": crm.unique_phone()})
    crm.assert_json_response(client.patch(crm.channel_url(chan2["id"]), {"webhook_secret": None},
                                          token=admin), 200)
    crm.assert_error(post(client, chan2["id"], body_for()), 401, "INVALID_CREDENTIALS")


def test_rotated_secret_takes_effect(client, admin):
    chan2 = crm.create_channel(client, admin, webhook_secret=SECRET)
    other = "rotated-secret-" + secrets.token_hex(8)
    crm.assert_json_response(client.patch(crm.channel_url(chan2["id"]),
                                          {"webhook_secret": other}, token=admin), 200)
    crm.assert_error(post(client, chan2["id"], body_for()), 401, "INVALID_CREDENTIALS")
    crm.assert_inbound_ack(post(client, chan2["id"], body_for(), secret=other), duplicate=False)


def test_unknown_channel_is_404(client):
    crm.assert_error(post(client, NOWHERE_ID, body_for()), 404, "NOT_FOUND")
    crm.assert_error(post(client, NOWHERE_ID, raw=b"not json"), 404, "NOT_FOUND")


def test_inactive_channel_is_409_and_active_again_accepts(client, admin):
    chan2 = crm.create_channel(client, admin, webhook_secret=SECRET, is_active=False)
    before = contacts_total(client, admin)
    crm.assert_error(post(client, chan2["id"], body_for()), 409, "CONFLICT")
    crm.assert_error(post(client, chan2["id"], raw=b"not json"), 409, "CONFLICT")
    assert contacts_total(client, admin) == before
    assert channel_conversation_total(client, admin, chan2["id"]) == 0
    crm.assert_json_response(client.patch(crm.channel_url(chan2["id"]), {"is_active": True},
                                          token=admin), 200)
    crm.assert_inbound_ack(post(client, chan2["id"], body_for()), duplicate=False)


def test_another_tenants_secret_does_not_open_a_channel(client, admin, sess_b):
    b_secret = "tenant-b-secret-" + secrets.token_hex(8)
    chan_b = crm.create_channel(client, sess_b.admin, webhook_secret=b_secret)
    chan_a = crm.create_channel(client, admin, webhook_secret=SECRET)
    crm.assert_error(post(client, chan_a["id"], body_for(), secret=b_secret), 401,
                     "INVALID_CREDENTIALS")
    crm.assert_error(post(client, chan_b["id"], body_for(), secret=SECRET), 401,
                     "INVALID_CREDENTIALS")


# ---- body -----------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b'{"contact": ', b"not json", b"{'a': 1}", b"[1, 2]", b'"text"',
                                 b"42", b"null", b"", b"\xff\xfe{}"])
def test_body_that_is_not_a_json_object_is_422_json_invalid(client, admin, own_chan, raw):
    before = contacts_total(client, admin)
    crm.assert_validation(post(client, own_chan["id"], raw=raw), (("body",), "json_invalid"))
    assert contacts_total(client, admin) == before
    assert channel_conversation_total(client, admin, own_chan["id"]) == 0


def test_body_over_the_limit_is_413_and_stores_nothing(client, admin, own_chan):
    before = contacts_total(client, admin)
    raw = json.dumps(crm.inbound_body({"phone": crm.unique_phone()}, "big")).encode()
    raw = raw[:-1] + b', "padding": "' + b"x" * BODY_LIMIT + b'"}'
    assert len(raw) > BODY_LIMIT
    crm.assert_error(post(client, own_chan["id"], raw=raw), 413, "PAYLOAD_TOO_LARGE")
    assert contacts_total(client, admin) == before
    assert channel_conversation_total(client, admin, own_chan["id"]) == 0


def base(contact_override=None, message_override=None, **override) -> dict:
    contact = crm.with_override({"phone": "+15550001111", "name": "Val Idate"},
                                contact_override or {})
    message = crm.with_override({"text": "hi", "external_message_id": "val-1"},
                                message_override or {})
    return crm.with_override({"contact": contact, "message": message}, override)


# expected: a list of (loc, type) pairs (exact), or a list of locs (exact locs, any type)
INVALID_BODIES = [
    ("message missing", base(message=MISSING), [(("body", "message"), "missing")]),
    ("contact missing", base(contact=MISSING), [(("body", "contact"), "missing")]),
    ("both missing", {}, [(("body", "message"), "missing"), (("body", "contact"), "missing")]),
    ("contact without phone, email or external_id", base(contact={"name": "Nobody"}),
     [("body", "contact")]),
    ("contact empty", base(contact={}), [("body", "contact")]),
    ("contact not an object", base(contact="+15550001111"), [("body", "contact")]),
    ("bad phone", base({"phone": "555-0101"}), [(("body", "contact", "phone"), "value_error.phone")]),
    ("phone without plus", base({"phone": "15550001111"}),
     [(("body", "contact", "phone"), "value_error.phone")]),
    ("phone too long", base({"phone": "+1" + "2" * 15}),
     [(("body", "contact", "phone"), "value_error.phone")]),
    ("bad email", base({"email": "not-an-address"}),
     [(("body", "contact", "email"), "value_error.email")]),
    ("name 201", base({"name": "n" * 201}), [(("body", "contact", "name"), "string_too_long")]),
    ("external_id 201", base({"external_id": "e" * 201}),
     [(("body", "contact", "external_id"), "string_too_long")]),
    ("text missing", base(message_override={"text": MISSING}),
     [(("body", "message", "text"), "missing")]),
    ("text empty", base(message_override={"text": ""}),
     [(("body", "message", "text"), "string_too_short")]),
    ("text 4097", base(message_override={"text": "t" * 4097}),
     [(("body", "message", "text"), "string_too_long")]),
    ("text int", base(message_override={"text": 5}), [("body", "message", "text")]),
    ("external_message_id missing", base(message_override={"external_message_id": MISSING}),
     [(("body", "message", "external_message_id"), "missing")]),
    ("external_message_id empty", base(message_override={"external_message_id": ""}),
     [(("body", "message", "external_message_id"), "string_too_short")]),
    ("external_message_id 201", base(message_override={"external_message_id": "m" * 201}),
     [(("body", "message", "external_message_id"), "string_too_long")]),
    ("message not an object", base(message="hi"), [("body", "message")]),
    ("event other", base(event="message.deleted"), [(("body", "event"), "enum")]),
    ("event int", base(event=1), [("body", "event")]),
    ("timestamp not RFC 3339", base(timestamp="yesterday"), [("body", "timestamp")]),
    ("unknown top-level key", base(colour="red"), [(("body", "colour"), "extra_forbidden")]),
    ("unknown contact key", base({"fax": "+15550001111"}),
     [(("body", "contact", "fax"), "extra_forbidden")]),
    ("unknown message key", base(message_override={"html": "<b>hi</b>"}),
     [(("body", "message", "html"), "extra_forbidden")]),
    ("NUL in the text (PostgreSQL cannot store it)", base(None, {"text": "a\x00b"}),
     [(("body", "message", "text"), "value_error")]),
    ("NUL in the contact's name", base({"name": "N\x00"}),
     [(("body", "contact", "name"), "value_error")]),
    ("every failure at once", base({"phone": "bad", "name": "n" * 201},
                                   {"text": "", "external_message_id": MISSING},
                                   event="nope", colour=1),
     [(("body", "contact", "phone"), "value_error.phone"),
      (("body", "contact", "name"), "string_too_long"),
      (("body", "message", "text"), "string_too_short"),
      (("body", "message", "external_message_id"), "missing"),
      (("body", "event"), "enum"), (("body", "colour"), "extra_forbidden")]),
]


@pytest.mark.parametrize("body,expected", [c[1:] for c in INVALID_BODIES],
                         ids=[c[0] for c in INVALID_BODIES])
def test_invalid_body_is_422_and_stores_nothing(client, admin, chan, body, expected):
    before_contacts = contacts_total(client, admin)
    before_convs = channel_conversation_total(client, admin, chan["id"])
    resp = post(client, chan["id"], body)
    if isinstance(expected[0][0], tuple):
        crm.assert_validation(resp, *expected)
    else:
        crm.assert_validation_locs(resp, *expected)
    assert contacts_total(client, admin) == before_contacts, "a rejected message made a contact"
    assert channel_conversation_total(client, admin, chan["id"]) == before_convs


@pytest.mark.parametrize("name,override", [
    ("explicit event", {"event": "message.received"}),
    ("timestamp", {"timestamp": "2026-03-01T10:15:30Z"}),
    ("timestamp with offset and fraction", {"timestamp": "2026-03-01T10:15:30.123456+02:00"}),
    ("text 4096", {"message": {"text": "t" * 4096}}),
    ("external_message_id 200", {"message": {"external_message_id": "m" * 200}}),
    ("name 200", {"contact": {"name": "N" * 200}}),
    ("external_id 200", {"contact": {"external_id": "x" * 200}}),
    ("unicode text", {"message": {"text": "Grüße 👋 中文"}}),
])
def test_valid_edges_are_accepted(client, admin, own_chan, name, override):
    body = crm.inbound_body({"phone": crm.unique_phone()}, "edge")
    for key, value in override.items():
        if isinstance(value, dict):
            body[key] = dict(body[key], **value)
        else:
            body[key] = value
    ack = crm.assert_inbound_ack(post(client, own_chan["id"], body), duplicate=False)
    [msg] = crm.list_messages(client, admin, ack["conversation_id"])
    assert msg["text"] == body["message"]["text"], msg
    assert msg["external_message_id"] == body["message"]["external_message_id"], msg


# ---- acknowledgement, stored message, new contact -------------------------------------------


def test_new_contact_conversation_and_message(client, admin, own_chan):
    phone, email = crm.unique_phone(), crm.unique_email("ada")
    ext = crm.unique("msg")
    before = contacts_total(client, admin)
    resp = post(client, own_chan["id"], crm.inbound_body(
        {"phone": phone, "email": email, "name": "Ada Lovelace King"}, "I need an appointment",
        ext))
    ack = crm.assert_inbound_ack(resp, duplicate=False)
    assert set(ack) == {"status", "message_id", "conversation_id", "contact_id", "duplicate"}
    assert ack["status"] == "accepted"
    assert contacts_total(client, admin) == before + 1

    contact = crm.get_contact(client, admin, ack["contact_id"])
    crm.assert_contact(contact, first_name="Ada", last_name="Lovelace King", phone=phone,
                       source="api", status="active")
    assert contact["email"].lower() == email.lower(), contact

    conv = crm.get_conversation(client, admin, ack["conversation_id"])
    crm.assert_conversation(conv, id=ack["conversation_id"], channel_id=own_chan["id"],
                            contact_id=ack["contact_id"], status="open", assignee_id=None,
                            unread_count=1)

    msgs = crm.list_messages(client, admin, ack["conversation_id"])
    assert len(msgs) == 1, msgs
    crm.assert_message(msgs[0], id=ack["message_id"], conversation_id=ack["conversation_id"],
                       direction="inbound", text="I need an appointment",
                       external_message_id=ext, status="received", sender_user_id=None,
                       error=None)


@pytest.mark.parametrize("contact_block,first_name", [
    ("phone", "phone"), ("email", "email"), ("external_id", "external_id")])
def test_new_contact_without_a_name_is_named_after_its_identifier(client, admin, own_chan,
                                                                  contact_block, first_name):
    value = {"phone": crm.unique_phone(), "email": crm.unique_email("noname"),
             "external_id": crm.unique("patient")}[contact_block]
    ack = crm.inbound(client, own_chan["id"], SECRET, {contact_block: value})
    contact = crm.get_contact(client, admin, ack["contact_id"])
    assert contact["first_name"].lower() == value.lower(), contact
    assert contact["last_name"] in (None, ""), contact
    assert contact["source"] == "api", contact


def test_one_word_name_has_no_last_name(client, admin, own_chan):
    ack = crm.inbound(client, own_chan["id"], SECRET, {"phone": crm.unique_phone(),
                                                       "name": "Cher"})
    contact = crm.get_contact(client, admin, ack["contact_id"])
    assert contact["first_name"] == "Cher" and contact["last_name"] in (None, ""), contact


# ---- contact matching -----------------------------------------------------------------------


def test_matches_an_existing_contact_by_phone(client, admin, own_chan):
    phone = crm.unique_phone()
    existing = crm.create_contact(client, admin, first_name="Phoned", phone=phone)
    before = contacts_total(client, admin)
    ack = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone, "name": "Other Name"})
    assert ack["contact_id"] == existing["id"], ack
    assert contacts_total(client, admin) == before
    assert crm.get_contact(client, admin, existing["id"])["first_name"] == "Phoned"


def test_matches_an_existing_contact_by_email_case_insensitively(client, admin, own_chan):
    email = crm.unique_email("mailed")
    existing = crm.create_contact(client, admin, first_name="Mailed", email=email)
    before = contacts_total(client, admin)
    ack = crm.inbound(client, own_chan["id"], SECRET, {"email": email.upper()})
    assert ack["contact_id"] == existing["id"], ack
    assert contacts_total(client, admin) == before


def test_phone_is_matched_before_email(client, admin, own_chan):
    phone = crm.unique_phone()
    by_phone = crm.create_contact(client, admin, first_name="ByPhone", phone=phone)
    # An e-mail nobody has: the phone decides, no conflict.
    ack = crm.inbound(client, own_chan["id"], SECRET,
                      {"phone": phone, "email": crm.unique_email("fresh")})
    assert ack["contact_id"] == by_phone["id"], ack


def test_external_id_is_remembered_for_the_channel(client, admin, own_chan):
    ext_id = crm.unique("patient")
    first = crm.inbound(client, own_chan["id"], SECRET,
                        {"phone": crm.unique_phone(), "external_id": ext_id, "name": "Remem Bered"})
    before = contacts_total(client, admin)
    second = crm.inbound(client, own_chan["id"], SECRET, {"external_id": ext_id})
    assert second["contact_id"] == first["contact_id"], (first, second)
    assert second["conversation_id"] == first["conversation_id"], (first, second)
    assert contacts_total(client, admin) == before


def test_external_id_is_remembered_per_channel_only(client, admin, own_chan):
    other = crm.create_channel(client, admin, webhook_secret=SECRET)
    ext_id = crm.unique("patient")
    first = crm.inbound(client, own_chan["id"], SECRET,
                        {"external_id": ext_id, "name": "First Channel"})
    second = crm.inbound(client, other["id"], SECRET,
                         {"external_id": ext_id, "name": "Second Channel"})
    assert second["contact_id"] != first["contact_id"], (first, second)


def test_a_remembered_external_id_decides_over_phone_and_email(client, admin, own_chan):
    ext_id = crm.unique("patient")
    first = crm.inbound(client, own_chan["id"], SECRET,
                        {"external_id": ext_id, "name": "Known Patient"})
    phone, email = crm.unique_phone(), crm.unique_email("other")
    a = crm.create_contact(client, admin, first_name="A", phone=phone)
    b = crm.create_contact(client, admin, first_name="B", email=email)
    ack = crm.inbound(client, own_chan["id"], SECRET,
                      {"external_id": ext_id, "phone": phone, "email": email})
    assert ack["contact_id"] == first["contact_id"], ack
    assert ack["contact_id"] not in (a["id"], b["id"])


def assert_two_contacts(resp, by_phone, by_email) -> None:
    """The 409 of a contact block whose phone and e-mail belong to two contacts: both named,
    the phone's first (contact_ids), so that an operator can merge them."""
    body = crm.assert_json_response(resp, 409)
    assert set(body) == {"detail", "code", "contact_ids"}, resp.describe()
    assert (body["code"], body["contact_ids"]) == ("CONFLICT", [by_phone, by_email]), body


def test_ambiguous_contact_block_is_409_and_stores_nothing(client, admin, own_chan):
    phone, email = crm.unique_phone(), crm.unique_email("amb")
    a = crm.create_contact(client, admin, first_name="Ambi", phone=phone)
    b = crm.create_contact(client, admin, first_name="Guous", email=email)
    before = contacts_total(client, admin)
    ext = crm.unique("amb-msg")
    resp = post(client, own_chan["id"], crm.inbound_body({"phone": phone, "email": email},
                                                         "who am I", ext))
    assert_two_contacts(resp, a["id"], b["id"])
    # Both named, so that an operator can tell which two records are the same patient.
    assert (f"the phone contact {a['id']}, the e-mail contact {b['id']}" in
            resp.json["detail"]), resp.json
    assert contacts_total(client, admin) == before
    assert conversations_of(client, admin, contact_id=a["id"]) == []
    assert conversations_of(client, admin, contact_id=b["id"]) == []
    assert channel_conversation_total(client, admin, own_chan["id"]) == 0
    # Nothing remembered either: the same external message id from a clear sender is new.
    ack = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone}, "it is me", ext)
    assert ack["contact_id"] == a["id"] and ack["duplicate"] is False, ack
    # Once an operator merges the two, the same block finds the one record that is left.
    crm.assert_json_response(client.post(f"{crm.contact_url(a['id'])}/merge",
                                          {"duplicate_id": b["id"]}, token=admin), 200)
    again = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone, "email": email},
                        "it is still me")
    assert again["contact_id"] == a["id"], again


def test_ambiguous_contact_with_an_external_id_is_not_remembered(client, admin, own_chan):
    phone, email = crm.unique_phone(), crm.unique_email("amb2")
    a = crm.create_contact(client, admin, first_name="A2", phone=phone)
    b = crm.create_contact(client, admin, first_name="B2", email=email)
    ext_id = crm.unique("patient")
    assert_two_contacts(post(client, own_chan["id"], crm.inbound_body(
        {"phone": phone, "email": email, "external_id": ext_id})), a["id"], b["id"])
    # The refused message stored no identity: the external id alone finds no contact yet,
    # so a message with the external id and the phone goes to A and remembers A.
    ack = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone, "external_id": ext_id})
    assert ack["contact_id"] == a["id"], ack
    again = crm.inbound(client, own_chan["id"], SECRET, {"external_id": ext_id})
    assert again["contact_id"] == a["id"], again


def test_new_contact_from_an_email_follows_the_contact_rules(client, admin, own_chan):
    """A new contact goes through the contacts actor: its e-mail is then taken in the tenant."""
    email = crm.unique_email("rules")
    ack = crm.inbound(client, own_chan["id"], SECRET, {"email": email, "name": "Rule Follower"})
    resp = client.post(crm.CONTACTS, {"first_name": "Dup", "email": email.upper()}, token=admin)
    crm.assert_error(resp, 409, "DUPLICATE_EMAIL")
    assert crm.get_contact(client, admin, ack["contact_id"])["last_name"] == "Follower"


# ---- idempotency ----------------------------------------------------------------------------


def test_same_external_message_id_twice_is_a_duplicate(client, admin, own_chan):
    phone, ext = crm.unique_phone(), crm.unique("dup")
    first = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone}, "original", ext)
    resp = post(client, own_chan["id"], crm.inbound_body({"phone": phone}, "original", ext))
    second = crm.assert_inbound_ack(resp, duplicate=True)
    assert {k: second[k] for k in ("message_id", "conversation_id", "contact_id")} == \
        {k: first[k] for k in ("message_id", "conversation_id", "contact_id")}, (first, second)
    # Even with another text: the first one stays.
    third = crm.assert_inbound_ack(post(client, own_chan["id"], crm.inbound_body(
        {"phone": phone}, "changed text", ext)), duplicate=True)
    assert third["message_id"] == first["message_id"], third
    msgs = crm.list_messages(client, admin, first["conversation_id"])
    assert [(m["id"], m["text"]) for m in msgs] == [(first["message_id"], "original")], msgs
    assert crm.get_conversation(client, admin, first["conversation_id"])["unread_count"] == 1


def test_same_external_message_id_on_another_channel_is_a_new_message(client, admin, own_chan):
    other = crm.create_channel(client, admin, webhook_secret=SECRET)
    phone, ext = crm.unique_phone(), crm.unique("dup")
    first = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone}, "one", ext)
    second = crm.inbound(client, other["id"], SECRET, {"phone": phone}, "two", ext)
    assert second["contact_id"] == first["contact_id"], (first, second)
    assert second["message_id"] != first["message_id"], (first, second)
    assert second["conversation_id"] != first["conversation_id"], (first, second)


def test_twenty_identical_posts_at_once_store_one_message(client, admin, own_chan):
    phone, ext = crm.unique_phone(), crm.unique("burst")
    raw = json.dumps(crm.inbound_body({"phone": phone, "name": "Burst Sender"}, "burst",
                                      ext)).encode()
    before = contacts_total(client, admin)

    def call(_):
        return post(client, own_chan["id"], raw=raw)

    responses = crm.run_parallel(call, list(range(20)), workers=20)
    acks = [crm.assert_inbound_ack(r) for r in responses]
    assert len({a["message_id"] for a in acks}) == 1, acks
    assert len({a["conversation_id"] for a in acks}) == 1, acks
    assert len({a["contact_id"] for a in acks}) == 1, acks
    assert sum(1 for a in acks if a["duplicate"] is False) == 1, acks
    assert contacts_total(client, admin) == before + 1
    conv_id = acks[0]["conversation_id"]
    page = crm.list_page(client, admin, crm.messages_url(conv_id))
    crm.assert_page(page, total=1)
    assert page["items"][0]["id"] == acks[0]["message_id"], page
    assert crm.get_conversation(client, admin, conv_id)["unread_count"] == 1
    assert channel_conversation_total(client, admin, own_chan["id"]) == 1


def test_twenty_different_messages_at_once_are_all_stored(client, admin, own_chan):
    phone = crm.unique_phone()
    crm.create_contact(client, admin, first_name="Chatty", phone=phone)
    opening = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone}, "opening")

    def call(i):
        return post(client, own_chan["id"], crm.inbound_body(
            {"phone": phone}, f"message {i}", f"chatty-{phone}-{i}"))

    acks = [crm.assert_inbound_ack(r, duplicate=False)
            for r in crm.run_parallel(call, list(range(20)), workers=20)]
    assert len({a["message_id"] for a in acks}) == 20, acks
    # A known sender with an open conversation: every message goes into it.
    assert {a["contact_id"] for a in acks} == {opening["contact_id"]}, acks
    assert {a["conversation_id"] for a in acks} == {opening["conversation_id"]}, acks
    conv = crm.get_conversation(client, admin, opening["conversation_id"])
    assert conv["unread_count"] == 21, conv
    texts = sorted(m["text"] for m in crm.list_messages(client, admin, conv["id"]))
    assert texts == sorted(["opening"] + [f"message {i}" for i in range(20)])


# ---- conversations --------------------------------------------------------------------------


def test_second_message_goes_to_the_same_open_conversation(client, admin, own_chan):
    phone = crm.unique_phone()
    first = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone}, "first")
    conv1 = crm.get_conversation(client, admin, first["conversation_id"])
    second = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone}, "second")
    assert second["conversation_id"] == first["conversation_id"], (first, second)
    assert second["contact_id"] == first["contact_id"]
    conv2 = crm.get_conversation(client, admin, first["conversation_id"])
    assert conv2["unread_count"] == 2 and conv2["status"] == "open", conv2
    assert conv2["last_message_at"] >= conv1["last_message_at"], (conv1, conv2)
    msgs = crm.list_messages(client, admin, first["conversation_id"])
    assert [m["text"] for m in msgs] == ["first", "second"], msgs  # oldest first
    assert [m["id"] for m in msgs] == [first["message_id"], second["message_id"]]
    assert all(m["direction"] == "inbound" and m["status"] == "received" for m in msgs), msgs
    assert [c["id"] for c in conversations_of(client, admin, contact_id=first["contact_id"])] \
        == [first["conversation_id"]]


def test_pending_conversation_is_reused_and_closed_one_is_not(client, admin, own_chan):
    phone = crm.unique_phone()
    first = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone}, "one")
    conv_id = first["conversation_id"]
    crm.assert_json_response(client.patch(crm.conversation_url(conv_id), {"status": "pending"},
                                          token=admin), 200)
    second = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone}, "two")
    assert second["conversation_id"] == conv_id, second
    crm.assert_json_response(client.patch(crm.conversation_url(conv_id), {"status": "closed"},
                                          token=admin), 200)
    third = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone}, "three")
    assert third["conversation_id"] != conv_id, third
    assert third["contact_id"] == first["contact_id"], third
    new_conv = crm.get_conversation(client, admin, third["conversation_id"])
    assert new_conv["status"] == "open" and new_conv["unread_count"] == 1, new_conv
    assert crm.get_conversation(client, admin, conv_id)["status"] == "closed"
    assert [m["text"] for m in crm.list_messages(client, admin, third["conversation_id"])] == \
        ["three"]


def test_one_contact_has_one_conversation_per_channel(client, admin, own_chan):
    other = crm.create_channel(client, admin, webhook_secret=SECRET)
    phone = crm.unique_phone()
    a = crm.inbound(client, own_chan["id"], SECRET, {"phone": phone}, "on a")
    b = crm.inbound(client, other["id"], SECRET, {"phone": phone}, "on b")
    assert a["contact_id"] == b["contact_id"] and a["conversation_id"] != b["conversation_id"]
    assert crm.get_conversation(client, admin, b["conversation_id"])["channel_id"] == other["id"]


def test_another_tenant_cannot_read_the_conversation(client, admin, sess_b, own_chan):
    ack = crm.inbound(client, own_chan["id"], SECRET, {"phone": crm.unique_phone()}, "private")
    for path in (crm.conversation_url(ack["conversation_id"]),
                 crm.messages_url(ack["conversation_id"])):
        crm.assert_error(client.get(path, token=sess_b.admin), 403, "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.get(crm.contact_url(ack["contact_id"]), token=sess_b.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert ack["conversation_id"] not in {c["id"] for c in conversations_of(client, sess_b.admin)}


def test_whatsapp_channel_takes_the_generic_webhook(client, admin):
    wa = crm.create_channel(client, admin, type="whatsapp", webhook_secret=SECRET,
                            config=crm.whatsapp_config())
    ack = crm.inbound(client, wa["id"], SECRET, {"phone": crm.unique_phone()}, "via whatsapp")
    assert crm.get_conversation(client, admin, ack["conversation_id"])["channel_id"] == wa["id"]


# ---- the message.received event -------------------------------------------------------------


def test_message_received_workflow_runs_with_the_message(client, fresh):
    t = fresh.admin
    chan2 = crm.create_channel(client, t, webhook_secret=SECRET)
    wf = crm.create_workflow(client, t, trigger_type="message.received", actions=[
        {"type": "add_tag", "params": {"tag": "wrote-in"}}])
    ext = crm.unique("wf-msg")
    ack = crm.inbound(client, chan2["id"], SECRET, {"phone": crm.unique_phone(),
                                                    "name": "Work Flow"}, "book me in", ext)

    def tagged():
        return "wrote-in" in crm.get_contact(client, t, ack["contact_id"])["tags"]

    assert crm.eventually(tagged, EVENT_TIMEOUT, 0.2), crm.list_runs(client, t, wf["id"])
    [run] = crm.wait_runs(client, t, wf["id"], 1, EVENT_TIMEOUT)
    crm.assert_run(run, workflow_id=wf["id"], status="succeeded",
                   trigger_type="message.received", conditions_met=True)
    payload = run["trigger_payload"]
    assert payload["message"]["text"] == "book me in", payload
    assert payload["message"]["external_message_id"] == ext, payload
    assert payload["message_id"] == ack["message_id"], payload
    assert payload["conversation_id"] == ack["conversation_id"], payload
    assert payload["contact_id"] == ack["contact_id"], payload
    assert payload["channel_id"] == chan2["id"], payload
    assert payload["tenant_id"] == fresh.tenant.tenant_id, payload
    assert payload["contact"]["id"] == ack["contact_id"], payload
    assert payload["contact"]["first_name"] == "Work", payload


def test_duplicate_message_runs_no_second_workflow(client, fresh):
    t = fresh.admin
    chan2 = crm.create_channel(client, t, webhook_secret=SECRET)
    wf = crm.create_workflow(client, t, trigger_type="message.received")
    phone, ext = crm.unique_phone(), crm.unique("once")
    crm.inbound(client, chan2["id"], SECRET, {"phone": phone}, "once", ext)
    crm.assert_inbound_ack(post(client, chan2["id"], crm.inbound_body({"phone": phone}, "once",
                                                                      ext)), duplicate=True)
    # A later, different message: once its run exists, the duplicate's would exist too.
    crm.inbound(client, chan2["id"], SECRET, {"phone": phone}, "later")
    runs = crm.wait_runs(client, t, wf["id"], 2, EVENT_TIMEOUT)
    assert sorted(r["trigger_payload"]["message"]["text"] for r in runs) == ["later", "once"], runs


def test_message_received_conditions_on_the_text(client, fresh):
    t = fresh.admin
    chan2 = crm.create_channel(client, t, webhook_secret=SECRET)
    wf = crm.create_workflow(client, t, trigger_type="message.received", conditions=[
        {"field": "message.text", "op": "contains", "value": "appointment"}], actions=[
        {"type": "add_tag", "params": {"tag": "wants-appointment"}}])
    quiet = crm.inbound(client, chan2["id"], SECRET, {"phone": crm.unique_phone()}, "thanks!")
    loud = crm.inbound(client, chan2["id"], SECRET, {"phone": crm.unique_phone()},
                       "I need an appointment")
    [run] = crm.wait_runs(client, t, wf["id"], 1, EVENT_TIMEOUT)
    assert run["trigger_payload"]["message_id"] == loud["message_id"], run
    assert crm.get_contact(client, t, loud["contact_id"])["tags"] == ["wants-appointment"]
    # Events are taken in order: the earlier message was dispatched before, without a run.
    assert len(crm.list_runs(client, t, wf["id"])) == 1
    assert crm.get_contact(client, t, quiet["contact_id"])["tags"] == []


def test_webhook_subscription_receives_message_received(client, fresh):
    t = fresh.admin
    chan2 = crm.create_channel(client, t, webhook_secret=SECRET)
    with crm.Receiver([200]) as rcv:
        crm.create_subscription(client, t, url=rcv.url(), events=["message.received"],
                                secret=SUB_SECRET)
        ext = crm.unique("sub-msg")
        phone = crm.unique_phone()
        ack = crm.inbound(client, chan2["id"], SECRET, {"phone": phone, "name": "Sub Scriber"},
                          "deliver me", ext)
        req = rcv.wait_for(1, EVENT_TIMEOUT)[0]
    assert req.method == "POST" and req.path == "/hook", req.describe()
    assert crm.verify_standard_webhook(SUB_SECRET, req.headers, req.body), req.describe()
    body = req.json
    assert isinstance(body, dict) and body.get("type") == "message.received", req.describe()
    crm.assert_timestamp(body["timestamp"])
    data = body["data"]
    assert set(data) == {"message_id", "conversation_id", "channel_id", "contact_id", "contact",
                         "message", "tenant_id"}, data
    assert data["message"] == {"text": "deliver me", "external_message_id": ext}, data
    assert (data["message_id"], data["conversation_id"], data["contact_id"]) == \
        (ack["message_id"], ack["conversation_id"], ack["contact_id"]), data
    assert data["channel_id"] == chan2["id"], data
    assert data["tenant_id"] == fresh.tenant.tenant_id, data
    assert data["contact"]["id"] == ack["contact_id"], data
    assert data["contact"]["phone"] == phone, data


# ---- Telegram -------------------------------------------------------------------------------


@pytest.fixture
def tg(client, admin) -> dict:
    """A new Telegram channel of tenant A: chat 4242 is new to it."""
    return crm.create_channel(client, admin, type="telegram", webhook_secret=SECRET,
                              config={"bot_token": crm.bot_token()})


def test_telegram_text_message_is_stored(client, admin, tg):
    before = contacts_total(client, admin)
    resp = crm.post_telegram_webhook(client, tg["id"], SECRET, {
        "update_id": 1, "message": {"message_id": 7, "chat": {"id": 4242, "type": "private"},
                                    "from": {"id": 4242, "first_name": "Ada", "last_name": "L"},
                                    "date": 1700000000, "text": "hi"}})
    ack = crm.assert_inbound_ack(resp, duplicate=False)
    assert contacts_total(client, admin) == before + 1
    contact = crm.get_contact(client, admin, ack["contact_id"])
    assert (contact["first_name"], contact["last_name"]) == ("Ada", "L"), contact
    conv = crm.get_conversation(client, admin, ack["conversation_id"])
    crm.assert_conversation(conv, channel_id=tg["id"], contact_id=ack["contact_id"],
                            status="open", unread_count=1)
    [msg] = crm.list_messages(client, admin, ack["conversation_id"])
    crm.assert_message(msg, id=ack["message_id"], direction="inbound", text="hi",
                       external_message_id="4242:7", status="received")


def test_telegram_chat_is_remembered_and_updates_are_idempotent(client, admin, tg):
    first = crm.assert_inbound_ack(crm.post_telegram_webhook(
        client, tg["id"], SECRET, crm.telegram_update(1, 7, text="hi")), duplicate=False)
    # Telegram retries an update it got no 200 for: the same message is a duplicate.
    again = crm.assert_inbound_ack(crm.post_telegram_webhook(
        client, tg["id"], SECRET, crm.telegram_update(1, 7, text="hi")), duplicate=True)
    assert again["message_id"] == first["message_id"], again
    # The next message of the chat (another name on the profile) finds the same contact.
    second = crm.assert_inbound_ack(crm.post_telegram_webhook(
        client, tg["id"], SECRET, crm.telegram_update(2, 8, text="still me",
                                                      first_name="Augusta")), duplicate=False)
    assert second["contact_id"] == first["contact_id"], second
    assert second["conversation_id"] == first["conversation_id"], second
    msgs = crm.list_messages(client, admin, first["conversation_id"])
    assert [(m["text"], m["external_message_id"]) for m in msgs] == \
        [("hi", "4242:7"), ("still me", "4242:8")], msgs
    # Another chat is another contact.
    other = crm.assert_inbound_ack(crm.post_telegram_webhook(
        client, tg["id"], SECRET, crm.telegram_update(3, 7, chat_id=5151, text="hello",
                                                      first_name="Bob", last_name=None)),
        duplicate=False)
    assert other["contact_id"] != first["contact_id"], other
    assert other["message_id"] != first["message_id"], other
    contact = crm.get_contact(client, admin, other["contact_id"])
    assert contact["first_name"] == "Bob" and contact["last_name"] in (None, ""), contact


@pytest.mark.parametrize("update", [
    crm.telegram_update(10, 70, kind="edited_message"),
    crm.telegram_update(11, 71, text=None),  # a photo or sticker: no text
    {"update_id": 12, "callback_query": {"id": "1", "from": {"id": 4242, "first_name": "Ada"},
                                         "data": "x"}},
    {"update_id": 13, "my_chat_member": {"chat": {"id": 4242, "type": "private"}}},
], ids=["edited_message", "message without text", "callback_query", "my_chat_member"])
def test_telegram_updates_without_a_text_message_are_ignored(client, admin, tg, update):
    before = contacts_total(client, admin)
    resp = crm.post_telegram_webhook(client, tg["id"], SECRET, update)
    assert crm.assert_json_response(resp, 200) == {"status": "ignored"}, resp.describe()
    assert contacts_total(client, admin) == before
    assert channel_conversation_total(client, admin, tg["id"]) == 0


@pytest.mark.parametrize("token", ["same length", "shorter", "unrelated"])
def test_telegram_wrong_secret_token_is_401(client, admin, tg, token):
    secret = {"same length": wrong_same_length(), "shorter": SECRET[:-1],
              "unrelated": "nope"}[token]
    before = contacts_total(client, admin)
    crm.assert_error(crm.post_telegram_webhook(client, tg["id"], secret, crm.telegram_update()),
                     401, "INVALID_CREDENTIALS")
    # The generic header does not stand in for Telegram's.
    resp = client.request("POST", crm.telegram_webhook_url(tg["id"]),
                          raw=json.dumps(crm.telegram_update()).encode(),
                          headers={"webhook_secret": wrong_same_length()})
    assert resp.status in (401, 422), resp.describe()
    assert contacts_total(client, admin) == before
    assert channel_conversation_total(client, admin, tg["id"]) == 0


def test_telegram_unknown_channel_is_404_and_inactive_409(client, admin):
    crm.assert_error(crm.post_telegram_webhook(client, NOWHERE_ID, SECRET, crm.telegram_update()),
                     404, "NOT_FOUND")
    off = crm.create_channel(client, admin, type="telegram", webhook_secret=SECRET,
                             is_active=False, config={"bot_token": crm.bot_token()})
    crm.assert_error(crm.post_telegram_webhook(client, off["id"], SECRET, crm.telegram_update()),
                     409, "CONFLICT")
    assert channel_conversation_total(client, admin, off["id"]) == 0


def test_telegram_update_that_is_not_json_is_422(client, admin, tg):
    crm.assert_validation(crm.post_telegram_webhook(client, tg["id"], SECRET, raw=b"not json"),
                          (("body",), "json_invalid"))
    assert channel_conversation_total(client, admin, tg["id"]) == 0


# ---- inbound group commit (docs/channels.md "Inbound group commit") ----------------------------

def test_messages_arriving_during_a_commit_are_stored_together_each_on_the_last_state(
        client, admin, own_chan, tg, database):
    """While one message's transaction waits (a psql session holds its conversation row), the
    messages that arrive are staged into the tenant's next batch: they commit in one
    transaction (one xmin), and each was computed on the state the one before it left: a
    sender's second message lands in the conversation its first one opened (unread 2), and a
    Telegram chat's second message finds the contact its first one created (one contact)."""
    held_phone = crm.unique_phone()
    blocker = crm.inbound(client, own_chan["id"], SECRET, {"phone": held_phone}, "first")
    a, b = crm.unique_phone(), crm.unique_phone()
    chat = 700_000 + secrets.randbelow(10**6)
    lock = threading.Thread(target=database.query, args=(
        f"BEGIN; SELECT 1 FROM conversations WHERE id = {blocker['conversation_id']} FOR UPDATE;"
        " SELECT pg_sleep(1.5); COMMIT;",))
    lock.start()
    time.sleep(0.3)  # the row is locked
    posts = [
        lambda: post(client, own_chan["id"], crm.inbound_body({"phone": held_phone}, "held")),
        lambda: post(client, own_chan["id"], crm.inbound_body({"phone": a}, "a1")),
        lambda: post(client, own_chan["id"], crm.inbound_body({"phone": a}, "a2")),
        lambda: post(client, own_chan["id"], crm.inbound_body({"phone": b}, "b1")),
        lambda: crm.post_telegram_webhook(client, tg["id"], SECRET, crm.telegram_update(
            1, 1, chat_id=chat, text="t1", last_name=None)),
        lambda: crm.post_telegram_webhook(client, tg["id"], SECRET, crm.telegram_update(
            2, 2, chat_id=chat, text="t2", last_name=None)),
    ]
    boxes, threads = [], []
    for i, send in enumerate(posts):
        box = {}
        t = threading.Thread(target=lambda send=send, box=box: box.update(r=send()))
        t.start()
        threads.append(t)
        boxes.append(box)
        time.sleep(0.4 if i == 0 else 0.05)  # the first one's batch waits for the lock first
    for t in threads + [lock]:
        t.join(timeout=30)
    held, a1, a2, b1, t1, t2 = (crm.assert_inbound_ack(box["r"], duplicate=False) for box in boxes)
    assert held["conversation_id"] == blocker["conversation_id"], held
    assert a1["conversation_id"] == a2["conversation_id"] != b1["conversation_id"], (a1, a2, b1)
    assert t1["contact_id"] == t2["contact_id"] and t1["conversation_id"] == t2["conversation_id"]
    assert crm.get_conversation(client, admin, a1["conversation_id"])["unread_count"] == 2
    assert crm.get_conversation(client, admin, t1["conversation_id"])["unread_count"] == 2
    assert [m["text"] for m in crm.list_messages(client, admin, a1["conversation_id"])] == \
        ["a1", "a2"]
    staged = [a1, a2, b1, t1, t2]
    ids = ",".join(str(x["message_id"]) for x in staged)
    transactions = database.query(
        f"SELECT count(DISTINCT xmin::text) FROM messages WHERE id IN ({ids})").strip()
    assert transactions == "1", transactions
    # The chat's identity, stored with the batch, names that one contact.
    assert database.query(
        "SELECT contact_id FROM channel_identities"
        f" WHERE channel_id = {tg['id']} AND external_id = '{chat}'").strip() == \
        str(t1["contact_id"])
    # The staged messages were numbered in the order they were taken.
    assert [x["message_id"] for x in staged] == sorted(x["message_id"] for x in staged)


def test_no_event_row_while_nobody_listens_and_one_as_soon_as_someone_does(
        client, fresh, database):
    """message.received goes to the outbox only while an active record-event workflow or
    subscription exists (docs/automation.md); the first message after one is switched on has
    its event."""
    t = fresh.admin
    chan2 = crm.create_channel(client, t, webhook_secret=SECRET)
    tid = fresh.tenant.tenant_id

    def events() -> int:
        return int(database.query("SELECT count(*) FROM outbox WHERE event = 'message.received'"
                                  f" AND tenant_id = {tid}").strip())

    crm.inbound(client, chan2["id"], SECRET, {"phone": crm.unique_phone()}, "unheard")
    assert events() == 0
    wf = crm.create_workflow(client, t, trigger_type="message.received",
                             actions=[{"type": "add_tag", "params": {"tag": "wrote"}}])
    ack = crm.inbound(client, chan2["id"], SECRET, {"phone": crm.unique_phone()}, "heard")
    assert events() == 1
    assert crm.eventually(lambda: "wrote" in crm.get_contact(client, t, ack["contact_id"])["tags"],
                          timeout=EVENT_TIMEOUT)
    crm.assert_json_response(
        client.patch(crm.workflow_url(wf["id"]), {"is_active": False}, token=t), 200)
    crm.inbound(client, chan2["id"], SECRET, {"phone": crm.unique_phone()}, "unheard again")
    assert events() == 1
