"""The shared inbox at the front desk (contract §12, docs/channels.md "Canned responses",
"Labels and priority", "Business hours"): canned responses kept under a shortcode and sent with
the contact's name filled in; a conversation's labels and priority, with their filters; and a
channel's business hours, outside which a patient who writes gets the after-hours reply once per
conversation per closed period (not for a STOP, not when an agent answers), sent through the
channel like any message and kept when the patient writes again."""
import base64
import secrets
import time
import urllib.parse

import pytest

import crm

SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}
SECRET = "desk-secret-" + secrets.token_hex(8)
CANNED = "/api/v1/canned-responses"
ALWAYS_OPEN = {d: [["00:00", "24:00"]] for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")}
AFTER_HOURS = "Clinica Sol is closed now: we answer from 8 am. In an emergency call 192."


@pytest.fixture
def desk(client, cli_env):
    s = crm.tenant_session(client, cli_env, ("agent", "manager"))
    return s


def conversation(client, token, chan, text="Olá", **contact) -> dict:
    contact.setdefault("phone", crm.unique_phone())
    ack = crm.inbound(client, chan["id"], SECRET, contact, text)
    return crm.get_conversation(client, token, ack["conversation_id"])


def outbound(client, token, conversation_id) -> list[dict]:
    return [m for m in crm.list_messages(client, token, conversation_id)
            if m["direction"] == "outbound"]


# ---- canned responses -------------------------------------------------------------------------

def test_a_canned_response_is_sent_with_the_contacts_name(client, desk):
    s = desk
    t = s.admin
    made = crm.assert_json_response(client.post(CANNED, {
        "shortcode": "fasting",
        "text": "Hello {{contact.first_name}} ({{ contact.full_name }}), please fast for 8 "
                "hours before your blood test."}, token=s.tokens["manager"]), 201)
    assert made["shortcode"] == "fasting" and made["created_by"] == s.users["manager"]["id"], made
    with crm.Receiver() as rcv:
        chan = crm.create_channel(client, t, type="api", webhook_secret=SECRET,
                                  config={"outbound_url": rcv.url("/out")})
        conv = conversation(client, t, chan, name="Ana Souza")
        # An agent sends it; the placeholders are the conversation's contact's.
        sent = crm.assert_json_response(client.post(crm.messages_url(conv["id"]), {
            "canned_response_id": made["id"]}, token=s.tokens["agent"]), 201)
        want = "Hello Ana (Ana Souza), please fast for 8 hours before your blood test."
        crm.assert_message(sent, text=want, direction="outbound",
                           sender_user_id=s.users["agent"]["id"])
        req = rcv.wait_for(1)[0]
        assert req.json["data"]["text"] == want, req.describe()


def test_canned_responses_are_checked_listed_and_kept_by_managers(client, desk, sess_b):
    s = desk
    t = s.admin
    for bad, loc in (({"shortcode": "Bad Code", "text": "x"}, ("body", "shortcode")),
                     ({"shortcode": "ok", "text": "Hi {{contact.age}}"}, ("body", "text")),
                     ({"shortcode": "ok", "text": "   "}, ("body", "text")),
                     ({"shortcode": "x" * 33, "text": "x"}, ("body", "shortcode"))):
        crm.assert_validation_locs(client.post(CANNED, bad, token=t), loc)
    crm.assert_error(client.post(CANNED, {"shortcode": "ok", "text": "x"},
                                 token=s.tokens["agent"]), 403, "INSUFFICIENT_PERMISSIONS")
    hello = crm.assert_json_response(client.post(CANNED, {"shortcode": "hello", "text": "Hello!"},
                                                 token=t), 201)
    crm.assert_json_response(client.post(CANNED, {"shortcode": "parking",
                                                  "text": "Parking is free behind the clinic."},
                                         token=t), 201)
    crm.assert_error(client.post(CANNED, {"shortcode": "hello", "text": "Hi"}, token=t),
                     409, "CONFLICT")
    # The list: by shortcode; q matches a shortcode's start or a word of the text.
    every = crm.list_all(client, s.tokens["agent"], CANNED)
    assert [c["shortcode"] for c in every] == ["hello", "parking"], every
    found = crm.list_all(client, t, CANNED, {"q": "PARK"})
    assert [c["shortcode"] for c in found] == ["parking"], found
    assert [c["shortcode"] for c in crm.list_all(client, t, CANNED, {"q": "hel"})] == ["hello"]
    # A rename onto a taken shortcode is refused; a PATCH changes only what it sends.
    url = f"{CANNED}/{hello['id']}"
    crm.assert_error(client.patch(url, {"shortcode": "parking"}, token=t), 409, "CONFLICT")
    changed = crm.assert_json_response(client.patch(url, {"text": "Hello again!"}, token=t), 200)
    assert (changed["shortcode"], changed["text"]) == ("hello", "Hello again!"), changed
    # Another tenant sees none of them, and cannot send them.
    crm.assert_error(client.get(url, token=sess_b.admin), 403, "INSUFFICIENT_PERMISSIONS")
    assert crm.list_all(client, sess_b.admin, CANNED) == []
    chan_b = crm.create_channel(client, sess_b.admin, type="api", webhook_secret=SECRET)
    conv_b = conversation(client, sess_b.admin, chan_b)
    crm.assert_validation(client.post(crm.messages_url(conv_b["id"]), {
        "canned_response_id": hello["id"]}, token=sess_b.admin),
        (("body", "canned_response_id"), "value_error"))
    # Text and a canned response together: which would be sent is unclear.
    chan = crm.create_channel(client, t, type="api", webhook_secret=SECRET)
    conv = conversation(client, t, chan)
    crm.assert_validation(client.post(crm.messages_url(conv["id"]), {
        "canned_response_id": hello["id"], "text": "hi"}, token=t),
        (("body", "canned_response_id"), "value_error"))
    assert outbound(client, t, conv["id"]) == []
    crm.assert_no_content(client.delete(url, token=t))
    crm.assert_error(client.get(url, token=t), 404, "NOT_FOUND")


# ---- labels and priority ----------------------------------------------------------------------

def test_labels_and_priority_sort_the_inbox(client, desk):
    s = desk
    t = s.admin
    chan = crm.create_channel(client, t, type="api", webhook_secret=SECRET)
    first, second, third = (conversation(client, t, chan) for _ in range(3))
    assert (first["labels"], first["priority"]) == ([], None), first
    got = crm.assert_json_response(client.patch(crm.conversation_url(first["id"]), {
        "labels": ["lab results", " billing ", "lab results"], "priority": "urgent"},
        token=s.tokens["agent"]), 200)
    assert (got["labels"], got["priority"]) == (["billing", "lab results"], "urgent"), got
    crm.assert_json_response(client.patch(crm.conversation_url(second["id"]), {
        "labels": ["billing"], "priority": "low"}, token=t), 200)

    def ids(params):
        return sorted(c["id"] for c in crm.list_all(client, t, crm.CONVERSATIONS, params))

    assert ids({"label": "billing"}) == sorted([first["id"], second["id"]])
    assert ids({"label": "lab results"}) == [first["id"]]
    assert ids({"priority": "urgent"}) == [first["id"]]
    assert ids({"label": "billing", "priority": "low"}) == [second["id"]]
    # null clears the priority; an empty list the labels; the rest stays.
    cleared = crm.assert_json_response(client.patch(crm.conversation_url(first["id"]), {
        "priority": None}, token=t), 200)
    assert (cleared["labels"], cleared["priority"]) == (["billing", "lab results"], None), cleared
    cleared = crm.assert_json_response(client.patch(crm.conversation_url(first["id"]), {
        "labels": []}, token=t), 200)
    assert cleared["labels"] == [], cleared
    assert crm.get_conversation(client, t, third["id"])["labels"] == []
    for bad, loc in (({"priority": "asap"}, ("body", "priority")),
                     ({"labels": "billing"}, ("body", "labels")),
                     ({"labels": ["x"] * 21}, ("body", "labels")),
                     ({"labels": ["ok", ""]}, ("body", "labels", 1)),
                     ({"labels": ["y" * 51]}, ("body", "labels", 0))):
        crm.assert_validation_locs(client.patch(crm.conversation_url(second["id"]), bad,
                                                token=t), loc)
    crm.assert_validation_locs(client.get(crm.with_query(crm.CONVERSATIONS,
                                                         {"priority": "asap"}), token=t),
                               ("query", "priority"))
    assert crm.get_conversation(client, t, second["id"])["priority"] == "low"


# ---- business hours ---------------------------------------------------------------------------

def test_outside_business_hours_the_patient_is_told_once_per_closed_period(client, desk):
    s = desk
    t = s.admin
    with crm.Receiver() as rcv:
        # No open day at all: closed now, whatever the time of the test.
        chan = crm.create_channel(client, t, type="api", webhook_secret=SECRET,
                                  config={"outbound_url": rcv.url("/out")},
                                  business_hours={}, time_zone="America/Sao_Paulo",
                                  after_hours_reply=AFTER_HOURS)
        assert (chan["business_hours"], chan["time_zone"], chan["after_hours_reply"]) == \
            ({}, "America/Sao_Paulo", AFTER_HOURS), chan
        phone = crm.unique_phone()
        conv = conversation(client, t, chan, "Can I book for tomorrow?", phone=phone)
        replies = outbound(client, t, conv["id"])
        assert [m["text"] for m in replies] == [AFTER_HOURS], replies
        assert replies[0]["sender_user_id"] is None and replies[0]["sender_agent_id"] is None
        crm.wait_message(client, t, conv["id"], replies[0]["id"], ("sent",))
        assert rcv.wait_for(1)[0].json["data"]["text"] == AFTER_HOURS
        # The same closed period: the patient writes again, nothing more is sent.
        again = crm.inbound(client, chan["id"], SECRET, {"phone": phone}, "Hello?")
        assert again["conversation_id"] == conv["id"], again
        assert len(outbound(client, t, conv["id"])) == 1
        # A STOP never gets it, even in a new conversation.
        stop = conversation(client, t, chan, "STOP")
        assert outbound(client, t, stop["id"]) == []
        # Open all week: no reply.
        crm.assert_json_response(client.patch(crm.channel_url(chan["id"]), {
            "business_hours": ALWAYS_OPEN}, token=t), 200)
        assert outbound(client, t, conversation(client, t, chan)["id"]) == []
        # No hours at all (null): always open.
        body = crm.assert_json_response(client.patch(crm.channel_url(chan["id"]), {
            "business_hours": None}, token=t), 200)
        assert body["business_hours"] is None and body["after_hours_reply"] == AFTER_HOURS
        assert outbound(client, t, conversation(client, t, chan)["id"]) == []
        time.sleep(0.2)
        assert len(rcv.wait_for(1)) == 1, "only the first conversation got a reply"
    # The reply is audited as carecrm's own doing.
    rows = crm.audit_rows(client, t, resource="conversation", resource_id=conv["id"])
    assert any(r["action"] == "after_hours_reply" for r in rows), rows


def test_business_hours_are_checked(client, desk):
    t = desk.admin
    chan = crm.create_channel(client, t, type="api", webhook_secret=SECRET)
    for bad, loc in (({"time_zone": "Mars/Olympus"}, ("body", "time_zone")),
                     ({"business_hours": {"mon": [["09:00", "08:00"]]}},
                      ("body", "business_hours", "mon", 0)),
                     ({"business_hours": {"funday": [["09:00", "10:00"]]}},
                      ("body", "business_hours", "funday")),
                     ({"after_hours_reply": ""}, ("body", "after_hours_reply")),
                     ({"after_hours_reply": "x" * 1001}, ("body", "after_hours_reply"))):
        resp = client.patch(crm.channel_url(chan["id"]), bad, token=t)
        assert resp.status == 422, (bad, resp.body)
        locs = [tuple(i["loc"]) for i in crm.validation_items(resp)]
        assert any(l[:len(loc)] == loc for l in locs), (bad, locs)
    assert crm.get_channel(client, t, chan["id"])["business_hours"] is None
    assert crm.get_channel(client, t, chan["id"])["time_zone"] == "UTC"


def test_a_channel_shows_the_team_its_conversations_go_to(client, desk):
    t = desk.admin
    chan = crm.create_channel(client, t, type="api", webhook_secret=SECRET)
    assert chan["team_id"] is None
    team = crm.assert_json_response(client.post("/api/v1/teams", {
        "name": "Desk", "channel_ids": [chan["id"]]}, token=t), 201)
    assert crm.get_channel(client, t, chan["id"])["team_id"] == team["id"]
    crm.assert_no_content(client.delete(f"/api/v1/teams/{team['id']}", token=t))
    assert crm.get_channel(client, t, chan["id"])["team_id"] is None


def test_a_channel_is_given_to_a_team_from_the_channel(client, desk, sess_b):
    t = desk.admin
    agent = desk.users["agent"]["id"]
    chan = crm.create_channel(client, t, type="api", webhook_secret=SECRET)
    teams = [crm.assert_json_response(client.post("/api/v1/teams", {
        "name": name, "member_ids": [agent]}, token=t), 201) for name in ("Desk", "Lab")]
    desk_team, lab = teams

    def team(tid):
        return crm.assert_json_response(client.get(f"/api/v1/teams/{tid}", token=t), 200)

    got = crm.assert_json_response(client.patch(crm.channel_url(chan["id"]), {
        "team_id": desk_team["id"], "name": "WhatsApp desk"}, token=t), 200)
    assert (got["team_id"], got["name"]) == (desk_team["id"], "WhatsApp desk"), got
    assert team(desk_team["id"])["channel_ids"] == [chan["id"]]
    assert conversation(client, t, chan)["team_id"] == desk_team["id"]
    # Moved: taken from one team, given to the other, in one change.
    got = crm.assert_json_response(client.patch(crm.channel_url(chan["id"]), {
        "team_id": lab["id"]}, token=t), 200)
    assert got["team_id"] == lab["id"], got
    assert (team(desk_team["id"])["channel_ids"], team(lab["id"])["channel_ids"]) == \
        ([], [chan["id"]])
    assert conversation(client, t, chan)["team_id"] == lab["id"]
    # No team, no such team, another tenant's team.
    other = crm.assert_json_response(client.post("/api/v1/teams", {"name": "B"},
                                                 token=sess_b.admin), 201)
    for bad in (10**12, other["id"]):
        crm.assert_validation(client.patch(crm.channel_url(chan["id"]), {
            "team_id": bad, "name": "Renamed"}, token=t), (("body", "team_id"), "value_error"))
    # Refused whole: the name sent beside it is not changed either.
    assert crm.get_channel(client, t, chan["id"])["team_id"] == lab["id"]
    assert crm.get_channel(client, t, chan["id"])["name"] == "WhatsApp desk"
    got = crm.assert_json_response(client.patch(crm.channel_url(chan["id"]), {"team_id": None},
                                                token=t), 200)
    assert got["team_id"] is None and team(lab["id"])["channel_ids"] == [], got
    assert conversation(client, t, chan)["team_id"] is None


# ---- files sent on api and Telegram channels ----------------------------------------------------

def test_an_api_channel_receiver_gets_links_to_the_files_and_telegram_refuses_them(client, desk):
    t = desk.admin
    png = b"\x89PNG\r\n\x1a\n" + b"\2" * 64
    files = [{"filename": "raio-x.png", "content_type": "image/png",
              "data": base64.b64encode(png).decode()}]
    with crm.Receiver() as rcv:
        chan = crm.create_channel(client, t, type="api", webhook_secret=SECRET,
                                  config={"outbound_url": rcv.url("/out")})
        conv = conversation(client, t, chan)
        crm.assert_json_response(client.post(crm.messages_url(conv["id"]), {
            "text": "Seu raio-x", "attachments": files}, token=t), 201)
        data = rcv.wait_for(1)[0].json["data"]
        [att] = data["attachments"]
        assert (att["content_type"], att["filename"]) == ("image/png", "raio-x.png"), data
    got = client.request("GET", urllib.parse.urlsplit(att["url"]).path)
    assert got.status == 200 and got.body == png, got.describe()
    bot = crm.create_channel(client, t, type="telegram", webhook_secret=SECRET,
                             config={"bot_token": crm.bot_token()})
    update = crm.telegram_update(1, 7, chat_id=99, text="oi", first_name="Ana")
    ack = crm.assert_inbound_ack(crm.post_telegram_webhook(client, bot["id"], SECRET, update))
    crm.assert_error(client.post(crm.messages_url(ack["conversation_id"]), {
        "text": "x", "attachments": files}, token=t), 409, "CONFLICT")
