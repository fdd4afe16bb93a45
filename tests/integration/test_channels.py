"""Messaging channels (contract §8, docs/channels.md "Channels"): the admin-only CRUD with
write-only secrets (the top-level webhook_secret → has_secret, telegram bot_token →
config.has_bot_token, api signing_secret → config.has_signing_secret, each provider's secrets
of whatsapp/sms/email), webhook_url from the public URL, paging and filters, partial updates that
keep the secrets not sent, the type that cannot change (409), delete (204, then 404, its
conversations with it), validation with exact locations, roles and tenant isolation.

Tests that count channels use a tenant of their own (`fresh`)."""
import secrets

import pytest

import crm

PUBLIC_URL = "https://crm.example.test"
SERVER_ENV = {"CARECRM_PUBLIC_URL": PUBLIC_URL}

CHANNELS = crm.CHANNELS
NOWHERE_ID = crm.NOWHERE_ID
MISSING = crm.MISSING
UPDATE_METHODS = ["PUT", "PATCH"]
SECRET = "chan-secret-" + secrets.token_hex(10)  # 32 characters
SIGNING = "sign-secret-" + secrets.token_hex(10)
OUTBOUND = "https://integrator.example.test/outbound"


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


def url(channel_id) -> str:
    return crm.channel_url(channel_id)


def total(client, token, params=None) -> int:
    return crm.list_total(client, token, CHANNELS, params)


def present(config: dict) -> dict:
    """The config without null values: an optional key not set may be absent or null."""
    return {k: v for k, v in config.items() if v is not None}


def no_secret_in(resp, *secret_values) -> None:
    for value in secret_values:
        assert value.encode() not in resp.body, f"a secret leaked: {resp.describe()}"


# ---- create and read ------------------------------------------------------------------------


def test_create_api_channel_is_201_with_location_and_hides_secrets(client, admin):
    body = {"name": "Patient portal", "type": "api", "webhook_secret": SECRET,
            "config": {"outbound_url": OUTBOUND, "signing_secret": SIGNING}}
    resp = client.post(CHANNELS, body, token=admin)
    created = crm.assert_json_response(resp, 201)
    crm.assert_channel(created, name="Patient portal", type="api", is_active=True,
                       has_secret=True)
    assert resp.header("Location") == url(created["id"]), resp.describe()
    assert created["config"] == {"outbound_url": OUTBOUND, "has_signing_secret": True}, created
    assert created["webhook_url"] == f"{PUBLIC_URL}/api/v1/channels/{created['id']}/api/webhook"
    no_secret_in(resp, SECRET, SIGNING)
    got = client.get(url(created["id"]), token=admin)
    assert crm.assert_json_response(got, 200) == created
    no_secret_in(got, SECRET, SIGNING)
    listing = client.get(crm.with_query(CHANNELS, {"per_page": 100}), token=admin)
    no_secret_in(listing, SECRET, SIGNING)


def test_create_api_channel_without_optional_config(client, admin):
    created = crm.create_channel(client, admin, name="Bare api", type="api")
    assert created["has_secret"] is False and created["is_active"] is True, created
    assert present(created["config"]) == {"has_signing_secret": False}, created


def test_create_telegram_channel_hides_the_bot_token(client, admin):
    token = crm.bot_token()
    body = {"name": "Clinic bot", "type": "telegram", "webhook_secret": SECRET,
            "config": {"bot_token": token, "api_base_url": "https://tg.example.test"}}
    resp = client.post(CHANNELS, body, token=admin)
    created = crm.assert_json_response(resp, 201)
    crm.assert_channel(created, name="Clinic bot", type="telegram", has_secret=True)
    assert created["config"] == {"api_base_url": "https://tg.example.test",
                                 "has_bot_token": True}, created
    assert created["webhook_url"] == \
        f"{PUBLIC_URL}/api/v1/channels/{created['id']}/telegram/webhook", created
    no_secret_in(resp, token, SECRET)
    no_secret_in(client.get(url(created["id"]), token=admin), token, SECRET)


def test_telegram_api_base_url_is_optional(client, admin):
    created = crm.create_channel(client, admin, type="telegram",
                                 config={"bot_token": crm.bot_token()})
    config = present(created["config"])
    assert config.pop("has_bot_token") is True, created
    # Not sent: absent, null or the documented default.
    assert config in ({}, {"api_base_url": "https://api.telegram.org"}), created


def test_email_config_hides_its_secrets(client, admin):
    config = crm.email_config(smtp_password="pw-" + secrets.token_hex(8),
                              inbound_signing_key="key-" + secrets.token_hex(8),
                              smtp_username="desk", smtp_port=587)
    resp = client.post(CHANNELS, {"name": "Mail desk", "type": "email", "config": config},
                       token=admin)
    created = crm.assert_json_response(resp, 201)
    crm.assert_channel(created, type="email", has_secret=False)
    assert created["config"] == {"smtp_host": "smtp.clinic.example", "smtp_port": 587,
                                 "smtp_username": "desk", "from_address": "desk@clinic.example",
                                 "has_smtp_password": True, "has_inbound_signing_key": True}, created
    assert created["webhook_url"].endswith(f"/channels/{created['id']}/email/webhook"), created
    for key in ("smtp_password", "inbound_signing_key"):
        no_secret_in(resp, config[key])
        no_secret_in(client.get(url(created["id"]), token=admin), config[key])


def test_inactive_on_create(client, admin):
    created = crm.create_channel(client, admin, is_active=False)
    assert created["is_active"] is False
    assert crm.get_channel(client, admin, created["id"])["is_active"] is False


def test_name_is_trimmed_to_its_content(client, admin):
    created = crm.create_channel(client, admin, name="  Front desk  ")
    assert created["name"].strip() == "Front desk", created


# ---- list -----------------------------------------------------------------------------------


def test_list_pages_newest_first(client, fresh):
    t = fresh.admin
    chans = [crm.create_channel(client, t, name=f"c{i}") for i in range(3)]
    body = crm.list_page(client, t, CHANNELS, {"per_page": 2})
    crm.assert_page(body, total=3, page=1, per_page=2)
    assert [c["id"] for c in body["items"]] == [chans[2]["id"], chans[1]["id"]], body
    for item in body["items"]:
        crm.assert_channel(item)
    body = crm.list_page(client, t, CHANNELS, {"per_page": 2, "page": 2})
    crm.assert_page(body, total=3, page=2, per_page=2)
    assert [c["id"] for c in body["items"]] == [chans[0]["id"]], body
    body = crm.list_page(client, t, CHANNELS, {"per_page": 2, "page": 3})
    assert body["items"] == [] and body["total"] == 3, body
    # Items are the same shape as GET by id.
    assert crm.list_all(client, t, CHANNELS)[0] == crm.get_channel(client, t, chans[2]["id"])


def test_list_filters_type_and_is_active(client, fresh):
    t = fresh.admin
    api_on = crm.create_channel(client, t, type="api")
    api_off = crm.create_channel(client, t, type="api", is_active=False)
    tg = crm.create_channel(client, t, type="telegram", config={"bot_token": crm.bot_token()})
    sms_off = crm.create_channel(client, t, type="sms", is_active=False,
                                 config=crm.sms_config())

    def ids(params):
        return [c["id"] for c in crm.list_all(client, t, CHANNELS, params)]

    assert ids({"type": "api"}) == [api_off["id"], api_on["id"]]
    assert ids({"type": "telegram"}) == [tg["id"]]
    assert ids({"type": "email"}) == []
    assert ids({"is_active": "false"}) == [sms_off["id"], api_off["id"]]
    assert ids({"is_active": "true"}) == [tg["id"], api_on["id"]]
    assert ids({"type": "api", "is_active": "true"}) == [api_on["id"]]
    assert total(client, t) == 4


@pytest.mark.parametrize("params,loc", [
    ({"type": "fax"}, ("query", "type")),
    ({"is_active": "perhaps"}, ("query", "is_active")),
    ({"page": 0}, ("query", "page")),
    ({"per_page": 101}, ("query", "per_page")),
])
def test_list_with_bad_query_is_422(client, admin, params, loc):
    crm.assert_validation_locs(client.get(crm.with_query(CHANNELS, params), token=admin), loc)


# ---- update ---------------------------------------------------------------------------------


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_changes_only_the_fields_sent_and_keeps_secrets(client, admin, method):
    token = crm.bot_token()
    chan = crm.create_channel(client, admin, name="Before", type="telegram",
                              webhook_secret=SECRET,
                              config={"bot_token": token,
                                      "api_base_url": "https://tg.example.test"})
    resp = client.request(method, url(chan["id"]), {"name": "After"}, token=admin)
    body = crm.assert_json_response(resp, 200)
    crm.assert_channel(body)
    assert body == dict(chan, name="After", updated_at=body["updated_at"]), body
    assert body["has_secret"] is True and body["config"]["has_bot_token"] is True, body
    # A config sent without its secret key keeps the stored secret (same address).
    resp = client.request(method, url(chan["id"]),
                          {"config": {"api_base_url": "https://tg.example.test"}}, token=admin)
    body = crm.assert_json_response(resp, 200)
    assert body["config"]["has_bot_token"] is True, body
    assert body["config"]["api_base_url"] == "https://tg.example.test", body
    assert body["has_secret"] is True, body
    no_secret_in(resp, token, SECRET)
    assert crm.get_channel(client, admin, chan["id"]) == body


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_a_new_telegram_address_needs_the_bot_token_again(client, admin, method):
    """The bot token travels to api_base_url with every call: whoever may edit a channel must
    not be able to point it at a server of their own and collect the stored token."""
    token = crm.bot_token()
    chan = crm.create_channel(client, admin, type="telegram", webhook_secret=SECRET,
                              config={"bot_token": token,
                                      "api_base_url": "https://tg.example.test"})
    for moved in ({"api_base_url": "https://evil.example.test"},
                  {"api_base_url": "https://evil.example.test", "bot_token": None}):
        resp = client.request(method, url(chan["id"]), {"config": moved}, token=admin)
        crm.assert_validation(resp, (("body", "config", "bot_token"), "missing"))
    assert crm.get_channel(client, admin, chan["id"]) == chan
    # With the token sent again the address changes; going back to Telegram's own needs none.
    other = crm.bot_token()
    body = crm.assert_json_response(client.request(
        method, url(chan["id"]),
        {"config": {"api_base_url": "https://tg2.example.test", "bot_token": other}},
        token=admin), 200)
    assert body["config"] == {"api_base_url": "https://tg2.example.test",
                              "has_bot_token": True}, body
    no_secret_in(client.get(url(chan["id"]), token=admin), other, SECRET)
    body = crm.assert_json_response(client.request(method, url(chan["id"]), {"config": {}},
                                                   token=admin), 200)
    assert body["config"] == {"has_bot_token": True}, body


def test_a_new_address_of_any_channel_needs_its_secrets_again(client, admin):
    """The same rule for every provider: a new api_base_url → every kept secret must be sent
    again (a Twilio auth token would travel there)."""
    cfg = crm.sms_config(api_base_url="https://sms.example.test")
    chan = crm.create_channel(client, admin, type="sms", config=cfg)
    same = {"account_sid": cfg["account_sid"], "from_number": cfg["from_number"]}
    resp = client.patch(url(chan["id"]), {"config": {**same,
                                                     "api_base_url": "https://evil.example.test"}},
                        token=admin)
    crm.assert_validation(resp, (("body", "config", "auth_token"), "missing"))
    body = crm.assert_json_response(client.patch(
        url(chan["id"]), {"config": {**same, "api_base_url": "https://sms.example.test"}},
        token=admin), 200)
    assert body["config"]["has_auth_token"] is True, body


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_keeps_the_api_signing_secret_not_sent(client, admin, method):
    chan = crm.create_channel(client, admin, type="api",
                              config={"outbound_url": OUTBOUND, "signing_secret": SIGNING})
    body = crm.assert_json_response(client.request(
        method, url(chan["id"]), {"config": {"outbound_url": OUTBOUND + "/v2"}}, token=admin),
        200)
    assert body["config"] == {"outbound_url": OUTBOUND + "/v2", "has_signing_secret": True}, body
    body = crm.assert_json_response(client.request(
        method, url(chan["id"]), {"is_active": False}, token=admin), 200)
    assert body["is_active"] is False and body["config"]["has_signing_secret"] is True, body


def test_webhook_secret_can_be_set_rotated_and_removed(client, admin):
    chan = crm.create_channel(client, admin)
    assert chan["has_secret"] is False
    body = crm.assert_json_response(client.patch(url(chan["id"]), {"webhook_secret": SECRET},
                                                 token=admin), 200)
    assert body["has_secret"] is True, body
    body = crm.assert_json_response(client.patch(
        url(chan["id"]), {"webhook_secret": "rotated-" + secrets.token_hex(10)}, token=admin), 200)
    assert body["has_secret"] is True, body
    body = crm.assert_json_response(client.patch(url(chan["id"]), {"webhook_secret": None},
                                                 token=admin), 200)
    assert body["has_secret"] is False, body
    assert crm.get_channel(client, admin, chan["id"])["has_secret"] is False


@pytest.mark.parametrize("method", UPDATE_METHODS)
@pytest.mark.parametrize("new_type", ["telegram", "whatsapp"])
def test_type_cannot_change(client, admin, method, new_type):
    chan = crm.create_channel(client, admin, type="api", webhook_secret=SECRET)
    body = {"type": new_type}
    if new_type == "telegram":
        body["config"] = {"bot_token": crm.bot_token()}
    if new_type == "whatsapp":
        body["config"] = crm.whatsapp_config()
    crm.assert_error(client.request(method, url(chan["id"]), body, token=admin), 409, "CONFLICT")
    assert crm.get_channel(client, admin, chan["id"]) == chan


@pytest.mark.parametrize("method", UPDATE_METHODS)
@pytest.mark.parametrize("body,expected", [
    ({"name": ""}, [("body", "name")]),
    ({"name": "   "}, [("body", "name")]),
    ({"webhook_secret": "short"}, [(("body", "webhook_secret"), "string_too_short")]),
    ({"config": {"bot_token": "not-a-token"}}, [("body", "config", "bot_token")]),
    ({"config": {"x": "1"}}, [(("body", "config", "x"), "extra_forbidden")]),
    ({"id": 5}, [(("body", "id"), "extra_forbidden")]),
    ({"name": "Would change", "webhook_secret": "short"},
     [(("body", "webhook_secret"), "string_too_short")]),
])
def test_invalid_update_is_422_and_changes_nothing(client, admin, method, body, expected):
    chan = crm.create_channel(client, admin, type="telegram", webhook_secret=SECRET,
                              config={"bot_token": crm.bot_token()})
    resp = client.request(method, url(chan["id"]), body, token=admin)
    if isinstance(expected[0][0], tuple):
        crm.assert_validation(resp, *expected)
    else:
        crm.assert_validation_locs(resp, *expected)
    assert crm.get_channel(client, admin, chan["id"]) == chan


# ---- delete ---------------------------------------------------------------------------------


def test_delete_is_204_then_404_everywhere(client, admin):
    chan = crm.create_channel(client, admin, webhook_secret=SECRET)
    crm.assert_no_content(client.delete(url(chan["id"]), token=admin))
    for method, path, body in [("GET", url(chan["id"]), None),
                               ("PATCH", url(chan["id"]), {"name": "x"}),
                               ("PUT", url(chan["id"]), {"name": "x"}),
                               ("DELETE", url(chan["id"]), None)]:
        crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")
    ids = {c["id"] for c in crm.list_all(client, admin, CHANNELS)}
    assert chan["id"] not in ids
    # Its inbound webhook is gone too.
    resp = crm.post_channel_webhook(client, chan["id"], SECRET,
                                    crm.inbound_body({"phone": crm.unique_phone()}))
    crm.assert_error(resp, 404, "NOT_FOUND")


def test_delete_takes_the_conversations_and_messages_with_it(client, fresh):
    t = fresh.admin
    chan = crm.create_channel(client, t, webhook_secret=SECRET)
    ack = crm.inbound(client, chan["id"], SECRET, {"phone": crm.unique_phone(), "name": "Gone"})
    crm.get_conversation(client, t, ack["conversation_id"])
    crm.assert_no_content(client.delete(url(chan["id"]), token=t))
    crm.assert_error(client.get(crm.conversation_url(ack["conversation_id"]), token=t), 404,
                     "NOT_FOUND")
    crm.assert_error(client.get(crm.messages_url(ack["conversation_id"]), token=t), 404,
                     "NOT_FOUND")
    assert crm.list_total(client, t, crm.CONVERSATIONS, {"channel_id": chan["id"]}) == 0
    # The contact the message created stays: it belongs to the contacts area.
    crm.get_contact(client, t, ack["contact_id"])


# ---- validation on create -------------------------------------------------------------------


def chan_body(override: dict) -> dict:
    return crm.with_override({"name": "Validated", "type": "api", "webhook_secret": SECRET,
                              "config": {"outbound_url": OUTBOUND}}, override)


def tg_config(**override) -> dict:
    return crm.with_override({"bot_token": crm.bot_token()}, override)


# expected: a list of (loc, type) pairs (exact), or a list of locs (exact locs, any type)
INVALID_CREATE = [
    ("name missing", {"name": MISSING}, [(("body", "name"), "missing")]),
    ("name empty", {"name": ""}, [("body", "name")]),
    ("name blank", {"name": "   "}, [("body", "name")]),
    ("name 201", {"name": "n" * 201}, [(("body", "name"), "string_too_long")]),
    ("name int", {"name": 5}, [("body", "name")]),
    ("type missing", {"type": MISSING, "config": MISSING}, [(("body", "type"), "missing")]),
    ("type unknown", {"type": "fax", "config": MISSING}, [(("body", "type"), "enum")]),
    ("type capitalised", {"type": "API", "config": MISSING}, [(("body", "type"), "enum")]),
    ("telegram without bot_token", {"type": "telegram", "config": {}},
     [(("body", "config", "bot_token"), "missing")]),
    ("telegram bot_token without colon", {"type": "telegram",
                                          "config": tg_config(bot_token="123456" + "a" * 30)},
     [("body", "config", "bot_token")]),
    ("telegram bot_token short tail", {"type": "telegram",
                                       "config": tg_config(bot_token="123456:" + "a" * 19)},
     [("body", "config", "bot_token")]),
    ("telegram bot_token letters before colon",
     {"type": "telegram", "config": tg_config(bot_token="bot:" + "a" * 30)},
     [("body", "config", "bot_token")]),
    ("telegram bot_token with a space",
     {"type": "telegram", "config": tg_config(bot_token="123456:" + "a" * 20 + " b")},
     [("body", "config", "bot_token")]),
    ("telegram api_base_url ftp", {"type": "telegram",
                                   "config": tg_config(api_base_url="ftp://tg.example.test")},
     [("body", "config", "api_base_url")]),
    ("api outbound_url ftp", {"config": {"outbound_url": "ftp://integrator.example.test/x"}},
     [("body", "config", "outbound_url")]),
    ("api outbound_url without scheme", {"config": {"outbound_url": "integrator.example.test"}},
     [("body", "config", "outbound_url")]),
    ("api outbound_url int", {"config": {"outbound_url": 7}},
     [("body", "config", "outbound_url")]),
    ("api signing_secret 15", {"config": {"signing_secret": "s" * 15}},
     [(("body", "config", "signing_secret"), "string_too_short")]),
    ("api signing_secret 257", {"config": {"signing_secret": "s" * 257}},
     [(("body", "config", "signing_secret"), "string_too_long")]),
    ("api extra config key", {"config": {"outbound_url": OUTBOUND, "x": "1"}},
     [(("body", "config", "x"), "extra_forbidden")]),
    ("telegram extra config key", {"type": "telegram", "config": tg_config(x="1")},
     [(("body", "config", "x"), "extra_forbidden")]),
    ("api config with a telegram key", {"config": {"bot_token": crm.bot_token()}},
     [(("body", "config", "bot_token"), "extra_forbidden")]),
    ("config not an object", {"config": "outbound_url=x"}, [("body", "config")]),
    ("email port not a number", {"type": "email", "config": crm.email_config(smtp_port="x")},
     [("body", "config", "smtp_port")]),
    ("email from not an address", {"type": "email",
                                   "config": crm.email_config(from_address="desk")},
     [(("body", "config", "from_address"), "value_error.email")]),
    ("email unknown key", {"type": "email", "config": crm.email_config(note="n")},
     [(("body", "config", "note"), "extra_forbidden")]),
    ("sms without its account, number and token", {"type": "sms", "config": {}},
     [(("body", "config", "account_sid"), "missing"),
      (("body", "config", "from_number"), "missing"),
      (("body", "config", "auth_token"), "missing")]),
    ("sms from a number that is not E.164",
     {"type": "sms", "config": {**crm.sms_config(), "from_number": "5550006"}},
     [(("body", "config", "from_number"), "value_error.phone")]),
    ("whatsapp without its number and secrets", {"type": "whatsapp", "config": {}},
     [(("body", "config", "phone_number_id"), "missing"),
      (("body", "config", "access_token"), "missing"),
      (("body", "config", "app_secret"), "missing"),
      (("body", "config", "verify_token"), "missing")]),
    ("whatsapp number id not digits",
     {"type": "whatsapp", "config": {**crm.whatsapp_config(), "phone_number_id": "+1555"}},
     [(("body", "config", "phone_number_id"), "value_error")]),
    ("whatsapp unknown key", {"type": "whatsapp", "config": {**crm.whatsapp_config(), "x": "1"}},
     [(("body", "config", "x"), "extra_forbidden")]),
    ("webhook_secret 15", {"webhook_secret": "s" * 15},
     [(("body", "webhook_secret"), "string_too_short")]),
    ("webhook_secret 257", {"webhook_secret": "s" * 257},
     [(("body", "webhook_secret"), "string_too_long")]),
    ("is_active string", {"is_active": "perhaps"}, [("body", "is_active")]),
    ("id", {"id": 1}, [(("body", "id"), "extra_forbidden")]),
    ("has_secret", {"has_secret": True}, [(("body", "has_secret"), "extra_forbidden")]),
    ("webhook_url", {"webhook_url": "https://x.example.test"},
     [(("body", "webhook_url"), "extra_forbidden")]),
    ("tenant_id", {"tenant_id": 1}, [(("body", "tenant_id"), "extra_forbidden")]),
    ("unknown", {"colour": "red"}, [(("body", "colour"), "extra_forbidden")]),
    ("every failure at once", {"name": MISSING, "webhook_secret": "short", "colour": 1,
                               "config": {"outbound_url": OUTBOUND, "x": "1"}},
     [(("body", "name"), "missing"), (("body", "webhook_secret"), "string_too_short"),
      (("body", "colour"), "extra_forbidden"), (("body", "config", "x"), "extra_forbidden")]),
]


def check_rejection(resp, expected) -> None:
    if isinstance(expected[0][0], tuple):
        crm.assert_validation(resp, *expected)
    else:
        crm.assert_validation_locs(resp, *expected)


@pytest.mark.parametrize("override,expected", [c[1:] for c in INVALID_CREATE],
                         ids=[c[0] for c in INVALID_CREATE])
def test_invalid_create_is_422_and_stores_nothing(client, admin, override, expected):
    before = total(client, admin)
    check_rejection(client.post(CHANNELS, chan_body(override), token=admin), expected)
    assert total(client, admin) == before, "a rejected channel was stored"


@pytest.mark.parametrize("override", [
    {"name": "n" * 200}, {"webhook_secret": "s" * 16}, {"webhook_secret": "s" * 256},
    {"webhook_secret": None}, {"config": {}}, {"config": MISSING},
    {"config": {"outbound_url": "http://integrator.example.test:8080/a?b=c"}},
    {"config": {"signing_secret": "s" * 16}}, {"config": {"signing_secret": "s" * 256}},
    {"type": "telegram", "config": {"bot_token": "1:" + "A_-" * 7}},
    {"type": "email", "config": crm.email_config(smtp_password="p" * 1000)},
    {"type": "sms", "config": crm.sms_config()},
    {"type": "whatsapp", "config": crm.whatsapp_config(api_version="v21.0")},
    {"type": "email", "config": crm.email_config()}, {"is_active": False},
])
def test_valid_edges_are_accepted(client, admin, override):
    chan = crm.create_channel(client, admin, **chan_body(override))
    if "name" in override:
        assert chan["name"] == override["name"], chan
    if "webhook_secret" in override:
        assert chan["has_secret"] is (override["webhook_secret"] is not None), chan


@pytest.mark.parametrize("raw", ['{"name": ', "name=x", "[1, 2]"])
def test_malformed_json_is_422(client, admin, raw):
    before = total(client, admin)
    crm.assert_validation(client.post(CHANNELS, raw=raw, token=admin),
                          (("body",), "json_invalid"))
    assert total(client, admin) == before


# ---- roles and tenants ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def target(client, admin) -> dict:
    return crm.create_channel(client, admin, name="Target", type="api", webhook_secret=SECRET,
                              config={"outbound_url": OUTBOUND, "signing_secret": SIGNING})


def routes(channel_id) -> dict:
    return {
        "list": ("GET", CHANNELS, None),
        "create": ("POST", CHANNELS, chan_body({})),
        "get": ("GET", url(channel_id), None),
        "put": ("PUT", url(channel_id), {"name": "hijacked"}),
        "patch": ("PATCH", url(channel_id), {"is_active": False}),
        "delete": ("DELETE", url(channel_id), None),
    }


ROUTES = list(routes(1))
ITEM_ROUTES = [r for r in ROUTES if r not in ("list", "create")]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("role", ["viewer", "agent", "manager"])
def test_only_admins_manage_channels(client, sess, target, role, route):
    before = total(client, sess.admin)
    method, path, body = routes(target["id"])[route]
    crm.assert_error(client.request(method, path, body, token=sess.tokens[role]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_channel(client, sess.admin, target["id"]) == target
    assert total(client, sess.admin) == before


@pytest.mark.parametrize("route", ROUTES)
def test_routes_without_token_are_401(client, admin, target, route):
    method, path, body = routes(target["id"])[route]
    crm.assert_error(client.request(method, path, body), 401, "INVALID_CREDENTIALS")
    assert crm.get_channel(client, admin, target["id"]) == target


@pytest.fixture(scope="module")
def chan_b(client, sess_b) -> dict:
    return crm.create_channel(client, sess_b.admin, name="Tenant B line", webhook_secret=SECRET)


@pytest.mark.parametrize("route", ITEM_ROUTES)
def test_another_tenants_channel_is_403_and_unchanged(client, admin, sess_b, chan_b, route):
    method, path, body = routes(chan_b["id"])[route]
    crm.assert_error(client.request(method, path, body, token=admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_channel(client, sess_b.admin, chan_b["id"]) == chan_b
    assert chan_b["id"] not in {c["id"] for c in crm.list_all(client, admin, CHANNELS)}


@pytest.mark.parametrize("route", ITEM_ROUTES)
def test_channel_of_no_tenant_is_404(client, admin, route):
    method, path, body = routes(NOWHERE_ID)[route]
    crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")


def test_path_id_that_is_not_an_integer_is_422(client, admin):
    crm.assert_validation(client.get(url("abc"), token=admin), (("path", "id"), "int_parsing"))
