"""Conversations and messages (contract §8, docs/channels.md "Conversations", "Messages",
"Adapters"): the list with its filters and order, GET, PATCH of status and assignee (an active
user of the tenant), POST read; who may read and write; outbound messages through the
adapters: an api channel POSTs a Standard-Webhooks-signed body to its outbound_url, a Telegram
channel calls sendMessage on its api_base_url (a local Receiver standing in for the Bot API);
retries (3 attempts, 1 s then 5 s apart) and failures (provider down, refused connection, the
Bot API saying no, no outbound_url, a type without an adapter); an inactive channel refuses
(409); and the workflow action send_message.

Conversations are made through the inbound channel webhook. Tenant A (`sess`) has no workflow;
tests that count or that need workflows use a tenant of their own (`fresh`)."""
import secrets

import pytest

import crm

PUBLIC_URL = "https://crm.example.test"
SERVER_ENV = {"CARECRM_PUBLIC_URL": PUBLIC_URL,
              "CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}

CONVERSATIONS = crm.CONVERSATIONS
NOWHERE_ID = crm.NOWHERE_ID
SECRET = "conv-secret-" + secrets.token_hex(10)  # 32 characters
SIGNING = "signing-secret-" + secrets.token_hex(10)
SEND_TIMEOUT = 20.0   # sent or failed, retries included (1 s + 5 s by default)
TELEGRAM_CHAT = 4242


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env, ("agent",))


def conv_url(conversation_id) -> str:
    return crm.conversation_url(conversation_id)


def new_conversation(client, channel_id, **contact) -> dict:
    """An inbound message from a new contact on the channel; returns its acknowledgement."""
    contact.setdefault("phone", crm.unique_phone())
    return crm.inbound(client, channel_id, SECRET, contact, "inbound " + secrets.token_hex(3))


def api_channel(client, token, **config) -> dict:
    return crm.create_channel(client, token, type="api", webhook_secret=SECRET, config=config)


def telegram_channel(client, token, base_url: str, bot: str) -> dict:
    return crm.create_channel(client, token, type="telegram", webhook_secret=SECRET,
                              config={"bot_token": bot, "api_base_url": base_url})


def telegram_conversation(client, channel_id) -> dict:
    resp = crm.post_telegram_webhook(client, channel_id, SECRET, crm.telegram_update(
        1, 7, chat_id=TELEGRAM_CHAT, text="hi", first_name="Ada", last_name="L"))
    return crm.assert_inbound_ack(resp, duplicate=False)


def ids(items) -> list:
    return [i["id"] for i in items]


def list_ids(client, token, **params) -> list:
    items = crm.list_all(client, token, CONVERSATIONS, params)
    for item in items:
        crm.assert_conversation(item)
    return ids(items)


def outbound_requests(rcv) -> list:
    return [r for r in rcv.requests if r.method == "POST"]


@pytest.fixture(scope="module")
def plain(client, admin) -> dict:
    """Tenant A's api channel without an outbound_url."""
    return api_channel(client, admin)


@pytest.fixture
def conv(client, admin, plain) -> dict:
    """A new conversation on `plain` (one unread inbound message); returns the acknowledgement."""
    return new_conversation(client, plain["id"], name="Conv Person")


# ---- list, filters, order -------------------------------------------------------------------


def test_list_filters_and_order(client, fresh):
    t = fresh.admin
    agent_id = fresh.users["agent"]["id"]
    ch1, ch2 = api_channel(client, t), api_channel(client, t)
    p1 = crm.unique_phone()
    a1 = new_conversation(client, ch1["id"], phone=p1)
    a2 = new_conversation(client, ch1["id"])
    a3 = new_conversation(client, ch2["id"])
    c1, c2, c3 = a1["conversation_id"], a2["conversation_id"], a3["conversation_id"]
    for cid, body in ((c2, {"status": "pending"}), (c3, {"status": "closed"}),
                      (c1, {"assignee_id": agent_id})):
        crm.assert_json_response(client.patch(conv_url(cid), body, token=t), 200)
    # A later message makes c1 the most recent.
    again = crm.inbound(client, ch1["id"], SECRET, {"phone": p1}, "again")
    assert again["conversation_id"] == c1, again

    assert list_ids(client, t) == [c1, c3, c2]
    assert list_ids(client, t, status="open") == [c1]
    assert list_ids(client, t, status="pending") == [c2]
    assert list_ids(client, t, status="closed") == [c3]
    assert list_ids(client, t, channel_id=ch1["id"]) == [c1, c2]
    assert list_ids(client, t, channel_id=ch2["id"]) == [c3]
    assert list_ids(client, t, contact_id=a3["contact_id"]) == [c3]
    assert list_ids(client, t, assignee_id=agent_id) == [c1]
    assert list_ids(client, t, assignee_id=fresh.tenant.admin_id) == []
    assert list_ids(client, t, status="open", channel_id=ch2["id"]) == []
    assert list_ids(client, t, status="pending", channel_id=ch1["id"]) == [c2]

    body = crm.list_page(client, t, CONVERSATIONS, {"per_page": 2})
    crm.assert_page(body, total=3, page=1, per_page=2)
    assert ids(body["items"]) == [c1, c3], body
    body = crm.list_page(client, t, CONVERSATIONS, {"per_page": 2, "page": 2})
    crm.assert_page(body, total=3, page=2, per_page=2)
    assert ids(body["items"]) == [c2], body
    body = crm.list_page(client, t, CONVERSATIONS, {"per_page": 2, "page": 3})
    assert body["items"] == [] and body["total"] == 3, body
    # Items are the same shape as GET by id.
    assert crm.list_all(client, t, CONVERSATIONS)[0] == crm.get_conversation(client, t, c1)


@pytest.mark.parametrize("params,loc", [
    ({"status": "archived"}, ("query", "status")),
    ({"channel_id": "abc"}, ("query", "channel_id")),
    ({"contact_id": "abc"}, ("query", "contact_id")),
    ({"assignee_id": "x"}, ("query", "assignee_id")),
    ({"page": 0}, ("query", "page")),
    ({"per_page": 101}, ("query", "per_page")),
])
def test_list_with_bad_query_is_422(client, admin, params, loc):
    crm.assert_validation_locs(client.get(crm.with_query(CONVERSATIONS, params), token=admin), loc)


def test_get_one_conversation(client, admin, plain, conv):
    got = crm.get_conversation(client, admin, conv["conversation_id"])
    crm.assert_conversation(got, id=conv["conversation_id"], channel_id=plain["id"],
                            contact_id=conv["contact_id"], status="open", assignee_id=None,
                            unread_count=1)
    assert got["last_message_at"] >= got["created_at"], got


def test_messages_page_oldest_first(client, admin, plain):
    phone = crm.unique_phone()
    acks = [crm.inbound(client, plain["id"], SECRET, {"phone": phone}, f"m{i}") for i in range(3)]
    cid = acks[0]["conversation_id"]
    body = crm.list_page(client, admin, crm.messages_url(cid), {"per_page": 2})
    crm.assert_page(body, total=3, page=1, per_page=2)
    assert [m["text"] for m in body["items"]] == ["m0", "m1"], body
    body = crm.list_page(client, admin, crm.messages_url(cid), {"per_page": 2, "page": 2})
    assert [m["text"] for m in body["items"]] == ["m2"], body
    assert [m["id"] for m in crm.list_messages(client, admin, cid)] == \
        [a["message_id"] for a in acks]


# ---- PATCH and read -------------------------------------------------------------------------


def test_patch_status(client, admin, conv):
    cid = conv["conversation_id"]
    before = crm.get_conversation(client, admin, cid)
    for status in ("pending", "closed", "open"):
        body = crm.assert_json_response(client.patch(conv_url(cid), {"status": status},
                                                     token=admin), 200)
        crm.assert_conversation(body, id=cid, status=status, unread_count=1)
        # Closing resolves it; opening it again clears that.
        assert (body["resolved_at"] is not None) == (status == "closed"), body
        assert body == dict(before, status=status, updated_at=body["updated_at"],
                            resolved_at=body["resolved_at"]), body
        assert crm.get_conversation(client, admin, cid) == body


def test_patch_assignee_to_an_active_user_of_the_tenant_and_back(client, sess, conv):
    cid = conv["conversation_id"]
    for assignee in (sess.users["agent"]["id"], sess.users["viewer"]["id"],
                     sess.tenant.admin_id, None):
        body = crm.assert_json_response(client.patch(conv_url(cid), {"assignee_id": assignee},
                                                     token=sess.tokens["agent"]), 200)
        crm.assert_conversation(body, id=cid, assignee_id=assignee, status="open")
        assert crm.get_conversation(client, sess.admin, cid)["assignee_id"] == assignee


def test_patch_status_and_assignee_together(client, sess, conv):
    cid = conv["conversation_id"]
    body = crm.assert_json_response(client.patch(conv_url(cid), {
        "status": "pending", "assignee_id": sess.users["manager"]["id"]}, token=sess.admin), 200)
    crm.assert_conversation(body, status="pending", assignee_id=sess.users["manager"]["id"])


@pytest.fixture(scope="module")
def inactive_user(client, admin) -> dict:
    user, _, _ = crm.create_user(client, admin, "agent")
    crm.assert_no_content(client.delete(f"/api/v1/users/{user['id']}", token=admin))
    return user


@pytest.mark.parametrize("case", ["another tenant's user", "no user", "inactive user",
                                  "string", "status unknown", "status null", "unread_count",
                                  "contact_id", "unknown key"])
def test_invalid_patch_is_422_and_changes_nothing(client, sess, sess_b, inactive_user, conv,
                                                  case):
    cid = conv["conversation_id"]
    crm.assert_json_response(client.patch(conv_url(cid), {
        "assignee_id": sess.users["agent"]["id"]}, token=sess.admin), 200)
    before = crm.get_conversation(client, sess.admin, cid)
    body, expected = {
        "another tenant's user": ({"assignee_id": sess_b.tenant.admin_id},
                                  [("body", "assignee_id")]),
        "no user": ({"assignee_id": NOWHERE_ID}, [("body", "assignee_id")]),
        "inactive user": ({"assignee_id": inactive_user["id"]}, [("body", "assignee_id")]),
        "string": ({"assignee_id": "agent"}, [("body", "assignee_id")]),
        "status unknown": ({"status": "archived"}, [(("body", "status"), "enum")]),
        "status null": ({"status": None}, [("body", "status")]),
        "unread_count": ({"unread_count": 0}, [(("body", "unread_count"), "extra_forbidden")]),
        "contact_id": ({"contact_id": conv["contact_id"]},
                       [(("body", "contact_id"), "extra_forbidden")]),
        "unknown key": ({"status": "closed", "colour": "red"},
                        [(("body", "colour"), "extra_forbidden")]),
    }[case]
    resp = client.patch(conv_url(cid), body, token=sess.admin)
    if isinstance(expected[0][0], tuple):
        crm.assert_validation(resp, *expected)
    else:
        crm.assert_validation_locs(resp, *expected)
    assert crm.get_conversation(client, sess.admin, cid) == before


def test_read_sets_the_unread_count_to_zero(client, admin, plain):
    phone = crm.unique_phone()
    first = crm.inbound(client, plain["id"], SECRET, {"phone": phone}, "one")
    crm.inbound(client, plain["id"], SECRET, {"phone": phone}, "two")
    cid = first["conversation_id"]
    assert crm.get_conversation(client, admin, cid)["unread_count"] == 2
    body = crm.assert_json_response(client.post(crm.read_url(cid), token=admin), 200)
    crm.assert_conversation(body, id=cid, unread_count=0, status="open")
    assert crm.get_conversation(client, admin, cid)["unread_count"] == 0
    assert len(crm.list_messages(client, admin, cid)) == 2
    # Reading again is harmless; a new message counts from zero.
    crm.assert_json_response(client.post(crm.read_url(cid), token=admin), 200)
    crm.inbound(client, plain["id"], SECRET, {"phone": phone}, "three")
    assert crm.get_conversation(client, admin, cid)["unread_count"] == 1


# ---- roles and tenants ----------------------------------------------------------------------


def routes(cid) -> dict:
    return {
        "list": ("GET", CONVERSATIONS, None),
        "get": ("GET", conv_url(cid), None),
        "messages": ("GET", crm.messages_url(cid), None),
        "patch": ("PATCH", conv_url(cid), {"status": "closed"}),
        "send": ("POST", crm.messages_url(cid), {"text": "from a role test"}),
        "read": ("POST", crm.read_url(cid), None),
    }


READ_ROUTES = ["list", "get", "messages"]
WRITE_ROUTES = ["patch", "send", "read"]


@pytest.mark.parametrize("route", READ_ROUTES)
@pytest.mark.parametrize("role", ["viewer", "agent", "manager", "admin"])
def test_every_role_reads(client, sess, conv, role, route):
    method, path, body = routes(conv["conversation_id"])[route]
    got = crm.assert_json_response(client.request(method, path, body,
                                                  token=sess.tokens[role]), 200)
    if route == "get":
        crm.assert_conversation(got, id=conv["conversation_id"])
    elif route == "messages":
        crm.assert_page(got, total=1)
        assert got["items"][0]["id"] == conv["message_id"], got
    else:
        crm.assert_page(got)


@pytest.mark.parametrize("route", WRITE_ROUTES)
def test_viewer_cannot_write(client, sess, conv, route):
    cid = conv["conversation_id"]
    before = crm.get_conversation(client, sess.admin, cid)
    method, path, body = routes(cid)[route]
    crm.assert_error(client.request(method, path, body, token=sess.tokens["viewer"]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_conversation(client, sess.admin, cid) == before
    assert ids(crm.list_messages(client, sess.admin, cid)) == [conv["message_id"]]


@pytest.mark.parametrize("route", WRITE_ROUTES)
@pytest.mark.parametrize("role", ["agent", "manager", "admin"])
def test_agents_managers_and_admins_write(client, sess, conv, role, route):
    method, path, body = routes(conv["conversation_id"])[route]
    resp = client.request(method, path, body, token=sess.tokens[role])
    if route == "send":
        got = crm.assert_json_response(resp, 201)
        crm.assert_message(got, direction="outbound", text="from a role test", status="queued")
    else:
        crm.assert_conversation(crm.assert_json_response(resp, 200),
                                id=conv["conversation_id"])


@pytest.mark.parametrize("route", READ_ROUTES + WRITE_ROUTES)
def test_routes_without_token_are_401(client, conv, route):
    method, path, body = routes(conv["conversation_id"])[route]
    crm.assert_error(client.request(method, path, body), 401, "INVALID_CREDENTIALS")


@pytest.fixture(scope="module")
def conv_b(client, sess_b) -> dict:
    chan_b = crm.create_channel(client, sess_b.admin, webhook_secret=SECRET)
    return new_conversation(client, chan_b["id"])


@pytest.mark.parametrize("route", [r for r in READ_ROUTES + WRITE_ROUTES if r != "list"])
def test_another_tenants_conversation_is_403_and_unchanged(client, admin, sess_b, conv_b, route):
    cid = conv_b["conversation_id"]
    before = crm.get_conversation(client, sess_b.admin, cid)
    method, path, body = routes(cid)[route]
    crm.assert_error(client.request(method, path, body, token=admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.get_conversation(client, sess_b.admin, cid) == before
    assert ids(crm.list_messages(client, sess_b.admin, cid)) == [conv_b["message_id"]]
    assert cid not in list_ids(client, admin)


@pytest.mark.parametrize("route", [r for r in READ_ROUTES + WRITE_ROUTES if r != "list"])
def test_conversation_of_no_tenant_is_404(client, admin, route):
    method, path, body = routes(NOWHERE_ID)[route]
    crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")


def test_filter_by_another_tenants_channel_shows_nothing(client, admin, sess_b, conv_b):
    chan_b = crm.get_conversation(client, sess_b.admin, conv_b["conversation_id"])["channel_id"]
    resp = client.get(crm.with_query(CONVERSATIONS, {"channel_id": chan_b}), token=admin)
    if resp.status == 200:
        assert resp.json["items"] == [] and resp.json["total"] == 0, resp.describe()
    else:
        crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")


# ---- POST messages: validation --------------------------------------------------------------


@pytest.mark.parametrize("body,expected", [
    ({}, [(("body", "text"), "missing")]),
    ({"text": ""}, [(("body", "text"), "string_too_short")]),
    ({"text": "t" * 4097}, [(("body", "text"), "string_too_long")]),
    ({"text": 5}, [("body", "text")]),
    ({"text": "hi", "direction": "inbound"}, [(("body", "direction"), "extra_forbidden")]),
    ({"text": "hi", "status": "sent"}, [(("body", "status"), "extra_forbidden")]),
])
def test_invalid_outbound_message_is_422_and_stores_nothing(client, admin, conv, body, expected):
    resp = client.post(crm.messages_url(conv["conversation_id"]), body, token=admin)
    if isinstance(expected[0][0], tuple):
        crm.assert_validation(resp, *expected)
    else:
        crm.assert_validation_locs(resp, *expected)
    assert ids(crm.list_messages(client, admin, conv["conversation_id"])) == [conv["message_id"]]


def test_outbound_message_of_4096_characters_is_accepted(client, admin, conv):
    crm.send_message(client, admin, conv["conversation_id"], "t" * 4096)


# ---- outbound through the api adapter -------------------------------------------------------


def test_api_channel_posts_the_documented_body_signed(client, sess):
    t = sess.tokens["agent"]
    with crm.Receiver([200]) as rcv:
        chan = api_channel(client, sess.admin, outbound_url=rcv.url("/outbound"),
                           signing_secret=SIGNING)
        phone, email, ext_id = crm.unique_phone(), crm.unique_email("out"), crm.unique("pat")
        ack = crm.inbound(client, chan["id"], SECRET,
                          {"phone": phone, "email": email, "external_id": ext_id,
                           "name": "Out Bound"}, "hello clinic")
        cid = ack["conversation_id"]
        queued = crm.send_message(client, t, cid, "Your appointment is at 10:00")
        assert queued["sender_user_id"] == sess.users["agent"]["id"], queued
        assert queued["attempts"] == 0 and queued["sent_at"] is None, queued
        req = rcv.wait_for(1, SEND_TIMEOUT)[0]
        sent = crm.wait_message(client, t, cid, queued["id"], timeout=SEND_TIMEOUT)
    assert req.method == "POST" and req.path == "/outbound", req.describe()
    assert (req.header("Content-Type") or "").startswith("application/json"), req.describe()
    assert crm.verify_standard_webhook(SIGNING, req.headers, req.body, tolerance=60), \
        f"signature does not verify with the channel's signing_secret: {req.describe()}"
    assert not crm.verify_standard_webhook(SIGNING, req.headers, req.body + b" ")
    body = req.json
    assert isinstance(body, dict) and set(body) == {"type", "timestamp", "data"}, req.describe()
    assert body["type"] == "message.sent", body
    crm.assert_timestamp(body["timestamp"])
    data = body["data"]
    assert set(data) == {"message_id", "conversation_id", "contact_id", "channel_id", "text",
                         "contact"}, data
    assert data == {"message_id": queued["id"], "conversation_id": cid,
                    "contact_id": ack["contact_id"], "channel_id": chan["id"],
                    "text": "Your appointment is at 10:00",
                    "contact": {"phone": phone, "email": email, "external_id": ext_id}}, data
    crm.assert_message(sent, id=queued["id"], direction="outbound", status="sent", error=None,
                       attempts=1, sender_user_id=sess.users["agent"]["id"],
                       text="Your appointment is at 10:00")
    assert sent["sent_at"] >= sent["created_at"], sent
    msgs = crm.list_messages(client, t, cid)
    assert [(m["direction"], m["id"]) for m in msgs] == \
        [("inbound", ack["message_id"]), ("outbound", queued["id"])], msgs


def test_api_channel_without_signing_secret_sends_unsigned(client, admin):
    with crm.Receiver([200]) as rcv:
        chan = api_channel(client, admin, outbound_url=rcv.url("/plain"))
        ack = new_conversation(client, chan["id"])
        queued = crm.send_message(client, admin, ack["conversation_id"], "unsigned")
        req = rcv.wait_for(1, SEND_TIMEOUT)[0]
        crm.wait_message(client, admin, ack["conversation_id"], queued["id"], ("sent",),
                         SEND_TIMEOUT)
    assert req.json["data"]["text"] == "unsigned", req.describe()
    assert req.header("webhook-signature") is None, req.describe()


def test_a_failed_attempt_is_retried_and_then_sent(client, admin):
    with crm.Receiver([503, 200]) as rcv:
        chan = api_channel(client, admin, outbound_url=rcv.url(), signing_secret=SIGNING)
        ack = new_conversation(client, chan["id"])
        queued = crm.send_message(client, admin, ack["conversation_id"], "second time lucky")
        sent = crm.wait_message(client, admin, ack["conversation_id"], queued["id"],
                                timeout=SEND_TIMEOUT)
        reqs = rcv.wait_for(2, SEND_TIMEOUT)
    assert sent["status"] == "sent" and sent["attempts"] == 2, sent
    assert [r.status for r in reqs] == [503, 200], [r.describe() for r in reqs]
    assert reqs[0].json["data"]["message_id"] == reqs[1].json["data"]["message_id"] == queued["id"]
    assert reqs[1].at - reqs[0].at >= 0.5, "the retry came without the documented delay"
    for r in reqs:
        assert crm.verify_standard_webhook(SIGNING, r.headers, r.body), r.describe()


def test_provider_answering_500_fails_after_three_attempts(client, admin):
    with crm.Receiver([500]) as rcv:
        chan = api_channel(client, admin, outbound_url=rcv.url())
        ack = new_conversation(client, chan["id"])
        queued = crm.send_message(client, admin, ack["conversation_id"], "nobody home")
        failed = crm.wait_message(client, admin, ack["conversation_id"], queued["id"],
                                  timeout=SEND_TIMEOUT)
        reqs = outbound_requests(rcv)
    crm.assert_message(failed, status="failed", attempts=3)
    assert failed["error"] and failed["sent_at"] is None, failed
    assert len(reqs) == 3, [r.describe() for r in reqs]
    gaps = [b.at - a.at for a, b in zip(reqs, reqs[1:])]
    # 1 s, then 5 s by default (some slack for scheduling).
    assert gaps[0] >= 0.5 and gaps[1] >= 3.0, gaps


def test_refused_connection_fails_after_three_attempts(client, admin):
    chan = api_channel(client, admin, outbound_url=crm.closed_port_url())
    ack = new_conversation(client, chan["id"])
    queued = crm.send_message(client, admin, ack["conversation_id"], "into the void")
    failed = crm.wait_message(client, admin, ack["conversation_id"], queued["id"],
                              timeout=SEND_TIMEOUT)
    crm.assert_message(failed, status="failed", attempts=3)
    assert failed["error"], failed


def test_api_channel_without_outbound_url_fails_not_configured(client, admin, plain, conv):
    queued = crm.send_message(client, admin, conv["conversation_id"], "where to?")
    failed = crm.wait_message(client, admin, conv["conversation_id"], queued["id"],
                              timeout=SEND_TIMEOUT)
    assert failed["status"] == "failed", failed
    assert "not configured" in failed["error"] and "outbound_url" in failed["error"], failed


def test_inactive_channel_refuses_outbound_with_409(client, admin):
    with crm.Receiver([200]) as rcv:
        chan = api_channel(client, admin, outbound_url=rcv.url())
        ack = new_conversation(client, chan["id"])
        crm.assert_json_response(client.patch(crm.channel_url(chan["id"]), {"is_active": False},
                                              token=admin), 200)
        resp = client.post(crm.messages_url(ack["conversation_id"]), {"text": "hello?"},
                           token=admin)
        crm.assert_error(resp, 409, "CONFLICT")
        assert ids(crm.list_messages(client, admin, ack["conversation_id"])) == \
            [ack["message_id"]]
        # Active again: accepted and sent.
        crm.assert_json_response(client.patch(crm.channel_url(chan["id"]), {"is_active": True},
                                              token=admin), 200)
        queued = crm.send_message(client, admin, ack["conversation_id"], "hello again")
        crm.wait_message(client, admin, ack["conversation_id"], queued["id"], ("sent",),
                         SEND_TIMEOUT)
        assert [r.json["data"]["text"] for r in outbound_requests(rcv)] == ["hello again"]


def test_outbound_message_reopens_a_closed_conversation(client, admin, conv):
    cid = conv["conversation_id"]
    crm.assert_json_response(client.patch(conv_url(cid), {"status": "closed"}, token=admin), 200)
    crm.send_message(client, admin, cid, "following up")
    assert crm.get_conversation(client, admin, cid)["status"] == "open"


# ---- outbound through the Telegram adapter --------------------------------------------------


def test_telegram_channel_calls_send_message(client, admin):
    bot = crm.bot_token()
    with crm.Receiver([crm.telegram_ok(555)]) as rcv:
        chan = telegram_channel(client, admin, rcv.url(""), bot)
        ack = telegram_conversation(client, chan["id"])
        cid = ack["conversation_id"]
        queued = crm.send_message(client, admin, cid, "See you at 10")
        req = rcv.wait_for(1, SEND_TIMEOUT)[0]
        sent = crm.wait_message(client, admin, cid, queued["id"], timeout=SEND_TIMEOUT)
    assert req.method == "POST" and req.path == f"/bot{bot}/sendMessage", req.describe()
    assert (req.header("Content-Type") or "").startswith("application/json"), req.describe()
    body = req.json
    assert isinstance(body, dict), req.describe()
    assert str(body.get("chat_id")) == str(TELEGRAM_CHAT), body
    assert body.get("text") == "See you at 10", body
    crm.assert_message(sent, id=queued["id"], status="sent", error=None, attempts=1)
    # The provider's id (Telegram's message_id is unique per chat).
    assert sent["external_message_id"] in ("555", f"{TELEGRAM_CHAT}:555"), sent


def test_telegram_ok_false_fails_with_the_description(client, admin):
    with crm.Receiver([crm.telegram_error("Forbidden: bot was blocked by the user", 200)]) as rcv:
        chan = telegram_channel(client, admin, rcv.url(""), crm.bot_token())
        ack = telegram_conversation(client, chan["id"])
        queued = crm.send_message(client, admin, ack["conversation_id"], "blocked?")
        failed = crm.wait_message(client, admin, ack["conversation_id"], queued["id"],
                                  timeout=SEND_TIMEOUT)
        n = len(outbound_requests(rcv))
    crm.assert_message(failed, status="failed", attempts=3)
    assert "bot was blocked by the user" in failed["error"], failed
    assert n == 3


def test_telegram_error_status_fails_with_the_description(client, admin):
    with crm.Receiver([crm.telegram_error("Bad Request: chat not found", 400)]) as rcv:
        chan = telegram_channel(client, admin, rcv.url(""), crm.bot_token())
        ack = telegram_conversation(client, chan["id"])
        queued = crm.send_message(client, admin, ack["conversation_id"], "anyone?")
        failed = crm.wait_message(client, admin, ack["conversation_id"], queued["id"],
                                  timeout=SEND_TIMEOUT)
    crm.assert_message(failed, status="failed", attempts=3)
    assert "chat not found" in failed["error"], failed


def test_telegram_rotated_bot_token_is_used(client, admin):
    old_bot, new_bot = crm.bot_token(), crm.bot_token()
    with crm.Receiver([crm.telegram_ok(1), crm.telegram_ok(2)]) as rcv:
        chan = telegram_channel(client, admin, rcv.url(""), old_bot)
        ack = telegram_conversation(client, chan["id"])
        cid = ack["conversation_id"]
        first = crm.send_message(client, admin, cid, "old token")
        crm.wait_message(client, admin, cid, first["id"], ("sent",), SEND_TIMEOUT)
        crm.assert_json_response(client.patch(crm.channel_url(chan["id"]), {
            "config": {"bot_token": new_bot, "api_base_url": rcv.url("")}}, token=admin), 200)
        second = crm.send_message(client, admin, cid, "new token")
        crm.wait_message(client, admin, cid, second["id"], ("sent",), SEND_TIMEOUT)
        paths = [r.path for r in outbound_requests(rcv)]
    assert paths == [f"/bot{old_bot}/sendMessage", f"/bot{new_bot}/sendMessage"], paths


# ---- the workflow action send_message -------------------------------------------------------


def test_send_message_action_replies_to_an_inbound_message(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as rcv:
        chan = api_channel(client, t, outbound_url=rcv.url("/reply"), signing_secret=SIGNING)
        wf = crm.create_workflow(client, t, trigger_type="message.received", actions=[
            {"type": "send_message", "params": {"text": "Thanks {{contact.first_name}}"}}])
        ack = crm.inbound(client, chan["id"], SECRET, {"phone": crm.unique_phone(),
                                                       "name": "Grace Hopper"}, "hello")
        req = rcv.wait_for(1, SEND_TIMEOUT, where=lambda r: r.path == "/reply")[0]
        [run] = crm.wait_runs(client, t, wf["id"], 1, SEND_TIMEOUT)
        cid = ack["conversation_id"]
        msgs = crm.list_messages(client, t, cid)
    assert crm.verify_standard_webhook(SIGNING, req.headers, req.body), req.describe()
    data = req.json["data"]
    assert data["text"] == "Thanks Grace", data
    assert data["conversation_id"] == cid and data["contact_id"] == ack["contact_id"], data
    assert run["status"] == "succeeded", run
    assert [s["type"] for s in run["steps"]] == ["send_message"], run
    assert run["steps"][0]["status"] == "succeeded", run
    assert run["steps"][0]["params"]["text"] == "Thanks Grace", run
    outbound = [m for m in msgs if m["direction"] == "outbound"]
    assert [m["text"] for m in outbound] == ["Thanks Grace"], msgs
    assert outbound[0]["id"] == data["message_id"], (outbound, data)


def test_send_message_action_on_the_contacts_most_recent_conversation(client, fresh):
    t = fresh.admin
    with crm.Receiver([200]) as rcv_a, crm.Receiver([200]) as rcv_b:
        chan_a = api_channel(client, t, outbound_url=rcv_a.url())
        chan_b = api_channel(client, t, outbound_url=rcv_b.url())
        phone = crm.unique_phone()
        on_a = crm.inbound(client, chan_a["id"], SECRET, {"phone": phone, "name": "Two Lines"})
        on_b = crm.inbound(client, chan_b["id"], SECRET, {"phone": phone})
        assert on_a["contact_id"] == on_b["contact_id"]
        cid = on_a["contact_id"]
        latest = crm.create_workflow(client, t, trigger_type="contact.tag_added",
                                     trigger_config={"tag": "remind-latest"}, actions=[
                                         {"type": "send_message", "params": {"text": "Latest"}}])
        pinned = crm.create_workflow(client, t, trigger_type="contact.tag_added",
                                     trigger_config={"tag": "remind-a"}, actions=[
                                         {"type": "send_message", "params": {
                                             "text": "On A", "channel_id": chan_a["id"]}}])
        crm.assert_json_response(client.post(crm.contact_url(cid) + "/tags",
                                             {"tags": ["remind-latest"]}, token=t), 200)
        req_b = rcv_b.wait_for(1, SEND_TIMEOUT)[0]
        crm.assert_json_response(client.post(crm.contact_url(cid) + "/tags",
                                             {"tags": ["remind-a"]}, token=t), 200)
        req_a = rcv_a.wait_for(1, SEND_TIMEOUT)[0]
        assert crm.wait_runs(client, t, latest["id"], 1, SEND_TIMEOUT)[0]["status"] == "succeeded"
        assert crm.wait_runs(client, t, pinned["id"], 1, SEND_TIMEOUT)[0]["status"] == "succeeded"
        assert len(rcv_a.requests) == 1 and len(rcv_b.requests) == 1
    assert req_b.json["data"]["text"] == "Latest", req_b.describe()
    assert req_b.json["data"]["conversation_id"] == on_b["conversation_id"], req_b.describe()
    assert req_a.json["data"]["text"] == "On A", req_a.describe()
    assert req_a.json["data"]["conversation_id"] == on_a["conversation_id"], req_a.describe()


def test_send_message_action_without_a_conversation_fails_the_step(client, fresh):
    t = fresh.admin
    wf = crm.create_workflow(client, t, trigger_type="contact.created", actions=[
        {"type": "send_message", "params": {"text": "Welcome"}},
        {"type": "add_tag", "params": {"tag": "never"}}])
    c = crm.create_contact(client, t, first_name="Lonely")
    [run] = crm.wait_runs(client, t, wf["id"], 1, SEND_TIMEOUT)
    crm.assert_run(run, status="failed")
    assert run["steps"][0]["type"] == "send_message" and run["steps"][0]["status"] == "failed", run
    assert len(run["steps"]) == 1 or run["steps"][1]["status"] != "succeeded", run
    assert crm.get_contact(client, t, c["id"])["tags"] == []


def test_send_message_action_without_text_is_422(client, admin):
    before = crm.list_total(client, admin, crm.WORKFLOWS)
    resp = client.post(crm.WORKFLOWS, {"name": crm.unique("wf"),
                                       "trigger_type": "message.received",
                                       "actions": [{"type": "send_message", "params": {}}]},
                       token=admin)
    items = crm.validation_items(resp)
    assert all(i["loc"][:2] == ["body", "actions"] for i in items), resp.describe()
    assert crm.list_total(client, admin, crm.WORKFLOWS) == before
