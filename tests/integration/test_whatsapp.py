"""WhatsApp channels through the Cloud API's wire protocol (contract §12, docs/channels.md
"WhatsApp"), against a local server standing in for the Graph API: Meta's subscription
handshake (403 for a wrong verify token), inbound messages signed with X-Hub-Signature-256
(forged or missing → 401, nothing stored; Meta's retry of the same POST stored once), delivery
statuses that only move forward, text sends with the access token, the provider's errors that
must not be retried, the 24-hour window (free text refused outside it with 409, an approved
template accepted and sent as one), the template list, and the consent and AI hand-off rules on
a WhatsApp conversation."""
import base64
import hashlib
import hmac
import json
import time
import urllib.parse

import pytest

import crm

TENANT_IDLE_TIMEOUT = 2
SERVER_ENV = {"CARECRM_TENANT_IDLE_TIMEOUT": TENANT_IDLE_TIMEOUT,
              "CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}
WAIT = 20.0
PATIENT = "5511987654321"


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


@pytest.fixture
def graph():
    """The Graph API: every send answered with a new wamid, templates listed."""
    with crm.Receiver([sent_ok("wamid.OUT1")]) as rcv:
        yield rcv


def sent_ok(wamid: str):
    return (200, {"Content-Type": "application/json"},
            json.dumps({"messaging_product": "whatsapp",
                        "contacts": [{"input": PATIENT, "wa_id": PATIENT}],
                        "messages": [{"id": wamid}]}))


def graph_error(status: int, code: int, message: str):
    return (status, {"Content-Type": "application/json"},
            json.dumps({"error": {"message": message, "type": "OAuthException", "code": code,
                                  "fbtrace_id": "AbC"}}))


def wa_channel(client, token, graph_url: str = "http://127.0.0.1:9", **config) -> dict:
    cfg = crm.whatsapp_config(api_base_url=graph_url, **config)
    chan = crm.create_channel(client, token, type="whatsapp", config=cfg)
    chan["_config"] = cfg
    return chan


def webhook_url(channel_id) -> str:
    return f"/api/v1/channels/{channel_id}/whatsapp/webhook"


def change(chan, messages=(), statuses=(), name="Ana Souza", wa_id=PATIENT) -> dict:
    value = {"messaging_product": "whatsapp",
             "metadata": {"display_phone_number": "15550001111",
                          "phone_number_id": chan["_config"]["phone_number_id"]},
             "contacts": [{"profile": {"name": name}, "wa_id": wa_id}]}
    if messages:
        value["messages"] = list(messages)
    if statuses:
        value["statuses"] = list(statuses)
    return {"object": "whatsapp_business_account",
            "entry": [{"id": "WABA1", "changes": [{"field": "messages", "value": value}]}]}


def text_message(text: str, wamid: str | None = None, wa_id: str = PATIENT) -> dict:
    return {"from": wa_id, "id": wamid or crm.unique("wamid.IN"),
            "timestamp": str(int(time.time())), "type": "text", "text": {"body": text}}


def status(wamid: str, state: str, **extra) -> dict:
    return {"id": wamid, "status": state, "timestamp": str(int(time.time())),
            "recipient_id": PATIENT, **extra}


def post(client, chan, body: dict, *, secret: str | None = None, signature: str | None = None,
         raw: bytes | None = None):
    raw = raw if raw is not None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if signature is None:
        key = (secret or chan["_config"]["app_secret"]).encode()
        signature = "sha256=" + hmac.new(key, raw, hashlib.sha256).hexdigest()
    if signature != "":
        headers["X-Hub-Signature-256"] = signature
    return client.request("POST", webhook_url(chan["id"]), raw=raw, headers=headers)


def receive(client, chan, text: str, wamid: str | None = None, **kw) -> dict:
    resp = post(client, chan, change(chan, [text_message(text, wamid)], **kw))
    body = crm.assert_json_response(resp, 200)
    assert body["status"] == "accepted" and len(body["messages"]) == 1, body
    return body["messages"][0]


def conversations(client, token) -> list:
    return crm.list_all(client, token, "/api/v1/conversations", {})


# ---- the subscription handshake ---------------------------------------------------------------


def test_the_handshake_echoes_the_challenge_only_for_the_verify_token(client, fresh):
    chan = wa_channel(client, fresh.admin)
    assert chan["webhook_url"].endswith(webhook_url(chan["id"])), chan
    token = chan["_config"]["verify_token"]
    ok = client.get(webhook_url(chan["id"]) + "?hub.mode=subscribe&hub.verify_token=" + token +
                    "&hub.challenge=1158201444")
    assert ok.status == 200 and ok.body == b"1158201444", ok.describe()
    assert ok.header("Content-Type").startswith("text/plain"), ok.describe()
    wrong = client.get(webhook_url(chan["id"]) +
                       "?hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1")
    crm.assert_error(wrong, 403, "INSUFFICIENT_PERMISSIONS")
    mode = client.get(webhook_url(chan["id"]) + "?hub.mode=unsubscribe&hub.verify_token=" +
                      token + "&hub.challenge=1")
    crm.assert_error(mode, 403, "INSUFFICIENT_PERMISSIONS")
    crm.assert_validation(client.get(webhook_url(chan["id"]) + "?hub.mode=subscribe"),
                          (("query", "hub.challenge"), "missing"))
    crm.assert_error(client.get(webhook_url(10**12) + "?hub.mode=subscribe&hub.verify_token=" +
                                token + "&hub.challenge=1"), 404, "NOT_FOUND")
    # An api channel has no WhatsApp webhook.
    api = crm.create_channel(client, fresh.admin, type="api")
    crm.assert_error(client.get(webhook_url(api["id"]) + "?hub.mode=subscribe&hub.verify_token=" +
                                token + "&hub.challenge=1"), 404, "NOT_FOUND")


# ---- inbound ------------------------------------------------------------------------------------


def test_a_signed_message_is_stored_with_its_sender_and_a_retry_stores_nothing_twice(
        client, fresh):
    t = fresh.admin
    chan = wa_channel(client, t)
    body = change(chan, [text_message("Posso remarcar para quinta?", "wamid.A1")])
    first = crm.assert_json_response(post(client, chan, body), 200)
    assert first["statuses"] == 0 and first["ignored"] == 0, first
    [ack] = first["messages"]
    assert ack["duplicate"] is False, first
    contact = crm.assert_json_response(client.get(crm.contact_url(ack["contact_id"]), token=t), 200)
    assert contact["phone"] == "+" + PATIENT and contact["first_name"] == "Ana", contact
    conv = crm.get_conversation(client, t, ack["conversation_id"])
    assert conv["channel_id"] == chan["id"] and conv["unread_count"] == 1, conv
    assert conv["last_inbound_at"] is not None, conv
    [msg] = crm.list_messages(client, t, ack["conversation_id"])
    crm.assert_message(msg, direction="inbound", text="Posso remarcar para quinta?",
                       external_message_id="wamid.A1", status="received")
    # Meta retries a POST it did not see answered: the same ids, nothing stored twice.
    again = crm.assert_json_response(post(client, chan, body), 200)
    assert again["messages"] == [{**ack, "duplicate": True}], again
    assert len(crm.list_messages(client, t, ack["conversation_id"])) == 1
    # The next message of the same number joins the conversation.
    nxt = receive(client, chan, "Obrigada")
    assert nxt["conversation_id"] == ack["conversation_id"], nxt


@pytest.mark.parametrize("how", ["missing", "wrong secret", "body changed", "not hex"])
def test_a_forged_or_missing_signature_is_401_and_stores_nothing(client, fresh, how):
    t = fresh.admin
    chan = wa_channel(client, t)
    body = change(chan, [text_message("forged")])
    raw = json.dumps(body).encode()
    if how == "missing":
        resp = post(client, chan, body, signature="")
    elif how == "wrong secret":
        resp = post(client, chan, body, secret="not-the-app-secret")
    elif how == "body changed":
        good = "sha256=" + hmac.new(chan["_config"]["app_secret"].encode(), raw,
                                    hashlib.sha256).hexdigest()
        resp = post(client, chan, body, signature=good, raw=raw.replace(b"forged", b"f0rged"))
    else:
        resp = post(client, chan, body, signature="sha256=zz")
    crm.assert_error(resp, 401, "INVALID_CREDENTIALS")
    assert conversations(client, t) == []


def test_an_inactive_channel_is_409_and_a_malformed_body_is_422(client, fresh):
    t = fresh.admin
    chan = wa_channel(client, t)
    crm.assert_validation(post(client, chan, {}, raw=b"{not json"), (("body",), "json_invalid"))
    bad = change(chan, [{"id": "wamid.X", "type": "text", "text": {"body": "no sender"}}])
    crm.assert_validation(post(client, chan, bad), (
        ("body", "entry", 0, "changes", 0, "value", "messages", 0, "from"), "value_error"))
    crm.assert_json_response(client.patch(crm.channel_url(chan["id"]), {"is_active": False},
                                          token=t), 200)
    crm.assert_error(post(client, chan, change(chan, [text_message("late")])), 409, "CONFLICT")
    assert conversations(client, t) == []


def test_another_numbers_changes_are_acknowledged_and_not_stored(client, fresh):
    t = fresh.admin
    chan = wa_channel(client, t)
    body = change(chan, [text_message("for the other number")])
    body["entry"][0]["changes"][0]["value"]["metadata"]["phone_number_id"] = "999"
    answer = crm.assert_json_response(post(client, chan, body), 200)
    assert answer == {"status": "accepted", "messages": [], "statuses": 0, "ignored": 1}, answer
    assert conversations(client, t) == []


# ---- outbound -----------------------------------------------------------------------------------


def test_a_reply_goes_to_the_graph_api_and_statuses_only_move_it_forward(client, fresh, graph):
    t = fresh.admin
    chan = wa_channel(client, t, graph.url(""))
    ack = receive(client, chan, "Oi")
    cid = ack["conversation_id"]
    queued = crm.send_message(client, t, cid, "Olá Ana, como podemos ajudar?")
    [req] = graph.wait_for(1, WAIT)
    assert req.method == "POST", req.describe()
    assert req.path == f"/v19.0/{chan['_config']['phone_number_id']}/messages", req.describe()
    assert req.header("Authorization") == "Bearer " + chan["_config"]["access_token"]
    assert req.json == {"messaging_product": "whatsapp", "recipient_type": "individual",
                        "to": PATIENT, "type": "text",
                        "text": {"preview_url": False, "body": "Olá Ana, como podemos ajudar?"},
                        "biz_opaque_callback_data": str(queued["id"])}
    sent = crm.wait_message(client, t, cid, queued["id"], timeout=WAIT)
    crm.assert_message(sent, status="sent", external_message_id="wamid.OUT1", attempts=1)

    def state():
        return [m for m in crm.list_messages(client, t, cid) if m["id"] == queued["id"]][0]

    for step, expected in (("delivered", "delivered"), ("read", "read"),
                           ("delivered", "read"), ("sent", "read")):
        answer = crm.assert_json_response(
            post(client, chan, change(chan, statuses=[status("wamid.OUT1", step)])), 200)
        assert answer["statuses"] == 1, answer
        assert state()["status"] == expected, (step, state())
    # A status for a message carecrm never sent changes nothing.
    crm.assert_json_response(
        post(client, chan, change(chan, statuses=[status("wamid.UNKNOWN", "failed")])), 200)
    assert state()["status"] == "read", state()
    assert [m["status"] for m in crm.list_messages(client, t, cid)] == ["received", "read"]


def test_a_failed_status_records_the_providers_reason(client, fresh, graph):
    t = fresh.admin
    chan = wa_channel(client, t, graph.url(""))
    cid = receive(client, chan, "Oi")["conversation_id"]
    queued = crm.send_message(client, t, cid, "Lembrete")
    crm.wait_message(client, t, cid, queued["id"], timeout=WAIT)
    err = {"code": 131026, "title": "Message undeliverable",
           "error_data": {"details": "the number is not on WhatsApp"}}
    crm.assert_json_response(post(client, chan, change(
        chan, statuses=[status("wamid.OUT1", "failed", errors=[err])])), 200)
    [msg] = [m for m in crm.list_messages(client, t, cid) if m["id"] == queued["id"]]
    crm.assert_message(msg, status="failed")
    assert "131026" in msg["error"] and "not on WhatsApp" in msg["error"], msg


def test_an_error_that_cannot_pass_is_not_retried_but_throttling_is(client, fresh):
    t = fresh.admin
    with crm.Receiver([graph_error(401, 190, "Error validating access token")]) as rcv:
        chan = wa_channel(client, t, rcv.url(""))
        cid = receive(client, chan, "Oi")["conversation_id"]
        queued = crm.send_message(client, t, cid, "hello")
        failed = crm.wait_message(client, t, cid, queued["id"], timeout=WAIT)
        time.sleep(1.5)  # a retry would come 1 s after the first attempt
        attempts = len(rcv.requests)
    crm.assert_message(failed, status="failed", attempts=1)
    assert "190" in failed["error"] and "access token" in failed["error"], failed
    assert attempts == 1
    with crm.Receiver([graph_error(400, 130429, "Rate limit hit"), sent_ok("wamid.LATER")]) as rcv:
        chan = wa_channel(client, t, rcv.url(""))
        cid = receive(client, chan, "Oi", wa_id=PATIENT)["conversation_id"]
        queued = crm.send_message(client, t, cid, "hello again")
        sent = crm.wait_message(client, t, cid, queued["id"], timeout=WAIT)
    crm.assert_message(sent, status="sent", attempts=2, external_message_id="wamid.LATER")


def test_outside_the_24_hour_window_only_a_template_is_sent(client, fresh, database, server):
    t = fresh.admin
    with crm.Receiver([sent_ok("wamid.TPL")]) as rcv:
        chan = wa_channel(client, t, rcv.url(""))
        cid = receive(client, chan, "Oi")["conversation_id"]
        # The patient wrote 25 hours ago: the tenant reads it so once it wakes again.
        database.query(f"UPDATE conversations SET last_inbound_at = now() - interval '25 hours'"
                       f" WHERE id = {cid}")
        metrics = server.metrics_client()

        def asleep():
            body = crm.assert_json_response(metrics.get("/actors"), 200)
            return fresh.tenant.tenant_id not in {x["tenant_id"] for x in body["tenants"]}

        assert crm.eventually(asleep, TENANT_IDLE_TIMEOUT + 15, 0.25), "the tenant stayed awake"
        resp = client.post(crm.messages_url(cid), {"text": "Free text, a day later"}, token=t)
        crm.assert_error(resp, 409, "CONFLICT")
        assert "24-hour" in resp.json["detail"], resp.describe()
        tpl = {"name": "lembrete_consulta", "language": "pt_BR", "parameters": ["Ana", "10:00"]}
        resp = client.post(crm.messages_url(cid), {"template": tpl}, token=t)
        queued = crm.assert_json_response(resp, 201)
        assert queued["text"] == "[template lembrete_consulta (pt_BR)] Ana | 10:00", queued
        [req] = rcv.wait_for(1, WAIT)
        crm.wait_message(client, t, cid, queued["id"], timeout=WAIT)
    assert req.json["type"] == "template", req.json
    assert req.json["template"] == {
        "name": "lembrete_consulta", "language": {"code": "pt_BR"},
        "components": [{"type": "body", "parameters": [{"type": "text", "text": "Ana"},
                                                       {"type": "text", "text": "10:00"}]}]}
    # Only the template reached the provider.
    assert [m["text"] for m in crm.list_messages(client, t, cid)] == [
        "Oi", "[template lembrete_consulta (pt_BR)] Ana | 10:00"]


def test_a_template_is_checked_and_only_for_whatsapp(client, fresh):
    t = fresh.admin
    chan = wa_channel(client, t)
    cid = receive(client, chan, "Oi")["conversation_id"]
    crm.assert_validation(
        client.post(crm.messages_url(cid), {"template": {"name": "Bad Name"}}, token=t),
        (("body", "template", "name"), "value_error"),
        (("body", "template", "language"), "missing"))
    crm.assert_validation(client.post(crm.messages_url(cid), {}, token=t),
                          (("body", "text"), "missing"))
    api = crm.create_channel(client, t, type="api", webhook_secret="s" * 16)
    other = crm.inbound(client, api["id"], "s" * 16, {"phone": crm.unique_phone()}, "hi")
    resp = client.post(crm.messages_url(other["conversation_id"]),
                       {"template": {"name": "x", "language": "en"}}, token=t)
    crm.assert_error(resp, 409, "CONFLICT")


def test_the_template_list_comes_from_the_business_account(client, fresh):
    t = fresh.admin
    listing = {"data": [{"name": "lembrete_consulta", "language": "pt_BR",
                         "status": "APPROVED", "category": "UTILITY",
                         "components": [{"type": "BODY",
                                         "text": "Olá {{1}}, sua consulta é às {{2}}."}]}]}
    with crm.Receiver([(200, {"Content-Type": "application/json"}, json.dumps(listing))]) as rcv:
        chan = wa_channel(client, t, rcv.url(""), business_account_id="4455")
        body = crm.assert_json_response(
            client.get(f"/api/v1/channels/{chan['id']}/templates", token=t), 200)
        [req] = rcv.wait_for(1, WAIT)
    assert req.method == "GET" and req.path.startswith("/v19.0/4455/message_templates"), req.path
    assert req.header("Authorization") == "Bearer " + chan["_config"]["access_token"]
    assert body == {"items": [{"name": "lembrete_consulta", "language": "pt_BR",
                               "status": "APPROVED", "category": "UTILITY",
                               "body": "Olá {{1}}, sua consulta é às {{2}}.",
                               "parameters": 2}]}, body
    # No business account configured: the channel cannot list them.
    plain = wa_channel(client, t)
    crm.assert_error(client.get(f"/api/v1/channels/{plain['id']}/templates", token=t), 409,
                     "CONFLICT")


# ---- consent and AI hand-off on WhatsApp --------------------------------------------------------


def test_stop_on_whatsapp_withdraws_consent_and_later_sends_are_refused(client, fresh, graph):
    t = fresh.admin
    chan = wa_channel(client, t, graph.url(""))
    ack = receive(client, chan, "STOP")
    resp = client.post(crm.messages_url(ack["conversation_id"]),
                       {"text": "Promoção!", "purpose": "marketing"}, token=t)
    crm.assert_error(resp, 409, "CONFLICT")
    resp = client.post(crm.messages_url(ack["conversation_id"]), {"text": "Sua consulta"},
                       token=t)
    crm.assert_error(resp, 409, "CONFLICT")
    assert graph.requests == []


def test_an_urgent_whatsapp_message_is_handed_to_a_person(client, fresh, graph):
    t = fresh.admin
    chan = wa_channel(client, t, graph.url(""))
    agent = crm.create_agent(client, t, channel_ids=[chan["id"]], auto_reply=True,
                             emergency_message="Ligue 192 agora.")
    ack = receive(client, chan, "I have chest pain and I cannot breathe")
    cid = ack["conversation_id"]

    def handed_off():
        conv = crm.get_conversation(client, t, cid)
        return conv if conv["ai_paused"] else None

    conv = crm.eventually(handed_off, WAIT, 0.2)
    assert conv and conv["handoff_reason"] == "urgent", crm.get_conversation(client, t, cid)
    # The emergency text goes out through the Graph API, first, as the agent's message.
    [req] = graph.wait_for(1, WAIT)[:1]
    assert req.json["text"]["body"].startswith("Ligue 192 agora."), req.json
    sent = [m for m in crm.list_messages(client, t, cid) if m["direction"] == "outbound"]
    assert sent and sent[0]["sender_agent_id"] == agent["id"], sent
    assert sent[0]["text"].startswith("Ligue 192 agora."), sent


# ---- media ------------------------------------------------------------------------------------

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 40 + b"\xff\xd9"


def media_message(kind: str, media_id: str, **part) -> dict:
    return {"from": PATIENT, "id": crm.unique("wamid.IN"), "timestamp": str(int(time.time())),
            "type": kind, kind: {"id": media_id, **part}}


def attachment_url(message_id, n=0) -> str:
    return f"/api/v1/messages/{message_id}/attachments/{n}"


def wait_attachments(client, token, conversation_id, message_id) -> list:
    found = {}

    def settled():
        [m] = [m for m in crm.list_messages(client, token, conversation_id)
               if m["id"] == message_id]
        found["a"] = m["attachments"]
        return all(a["status"] != "pending" for a in m["attachments"])

    assert crm.eventually(settled, WAIT, 0.2), found
    return found["a"]


def test_media_is_fetched_through_the_graph_api_kept_and_served_to_staff(client, fresh, cli_env):
    t = fresh.admin
    with crm.Receiver() as rcv:
        rcv.set_responses([
            # The lookup: the file's short-lived URL, on the same stand-in.
            (200, {"Content-Type": "application/json"},
             json.dumps({"url": rcv.url("/files/img1"), "mime_type": "image/jpeg",
                         "file_size": len(JPEG), "id": "MEDIA1",
                         "messaging_product": "whatsapp"})),
            (200, {"Content-Type": "image/jpeg"}, JPEG)])
        chan = wa_channel(client, t, rcv.url(""))
        resp = post(client, chan, change(chan, [media_message(
            "image", "MEDIA1", mime_type="image/jpeg", caption="my exam")]))
        ack = crm.assert_json_response(resp, 200)["messages"][0]
        [att] = wait_attachments(client, t, ack["conversation_id"], ack["message_id"])
        assert (att["n"], att["status"], att["content_type"], att["size"]) == \
            (0, "stored", "image/jpeg", len(JPEG)), att
        lookup, download = rcv.wait_for(2)
        # Both with the channel's access token: the lookup by media id, then the file.
        assert lookup.path == "/v19.0/MEDIA1", lookup.describe()
        assert download.path == "/files/img1", download.describe()
        for req in (lookup, download):
            assert req.header("Authorization") == \
                "Bearer " + chan["_config"]["access_token"], req.describe()
    got = client.get(attachment_url(ack["message_id"]), token=t)
    assert got.status == 200 and got.body == JPEG, got.describe()
    assert got.header("Content-Type") == "image/jpeg", got.describe()
    assert (got.header("Content-Disposition") or "").startswith("attachment"), got.describe()
    # Reading a patient's file is audited; another tenant's user gets 403, a wrong n 404.
    rows = crm.audit_rows(client, t, resource="message", resource_id=ack["message_id"])
    assert [r["action"] for r in rows] == ["read_attachment"], rows
    other = crm.tenant_session(client, cli_env)
    crm.assert_error(client.get(attachment_url(ack["message_id"]), token=other.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.get(attachment_url(ack["message_id"], 1), token=t), 404, "NOT_FOUND")
    crm.assert_validation_locs(client.get(attachment_url(ack["message_id"], 99), token=t),
                               ("path", "n"))


def test_media_of_a_type_not_kept_or_too_large_is_refused_with_why(client, fresh):
    t = fresh.admin
    with crm.Receiver() as rcv:
        chan = wa_channel(client, t, rcv.url(""))
        rcv.set_responses([
            (200, {"Content-Type": "application/json"},
             json.dumps({"url": rcv.url("/files/x"), "mime_type": "application/x-msdownload"})),
            (200, {"Content-Type": "application/x-msdownload"}, b"MZ" + b"\0" * 100)])
        ack = crm.assert_json_response(post(client, chan, change(chan, [media_message(
            "document", "EXE1", filename="invoice.exe")])), 200)["messages"][0]
        [att] = wait_attachments(client, t, ack["conversation_id"], ack["message_id"])
        assert att["status"] == "refused" and "not kept" in att["error"], att
        crm.assert_error(client.get(attachment_url(ack["message_id"]), token=t), 409, "CONFLICT")
        # The lookup says the file is larger than 16 MiB: it is not even downloaded.
        rcv.set_responses([(200, {"Content-Type": "application/json"},
                            json.dumps({"url": rcv.url("/files/big"), "mime_type": "audio/ogg",
                                        "file_size": 17 * 1024 * 1024}))])
        seen = len(rcv.wait_for(2))
        ack = crm.assert_json_response(post(client, chan, change(chan, [media_message(
            "audio", "BIG1")])), 200)["messages"][0]
        [att] = wait_attachments(client, t, ack["conversation_id"], ack["message_id"])
        assert att["status"] == "failed" and "16 MiB" in att["error"], att
        assert len(rcv.wait_for(seen + 1)) == seen + 1


def test_a_provider_failing_for_a_while_gets_the_file_on_a_later_attempt(client, fresh):
    t = fresh.admin
    with crm.Receiver() as rcv:
        chan = wa_channel(client, t, rcv.url(""))
        rcv.set_responses([
            (503, {}, "busy"),
            (200, {"Content-Type": "application/json"},
             json.dumps({"url": rcv.url("/files/a"), "mime_type": "audio/ogg"})),
            (200, {"Content-Type": "audio/ogg; codecs=opus"}, b"OggS" + b"\1" * 500)])
        ack = crm.assert_json_response(post(client, chan, change(chan, [media_message(
            "audio", "VOICE1")])), 200)["messages"][0]
        [att] = wait_attachments(client, t, ack["conversation_id"], ack["message_id"])
        assert (att["status"], att["content_type"]) == ("stored", "audio/ogg"), att
        assert len(rcv.wait_for(3)) == 3


def file(name: str, content_type: str, data: bytes) -> dict:
    return {"filename": name, "content_type": content_type,
            "data": base64.b64encode(data).decode()}


def test_a_file_is_sent_by_a_link_the_provider_fetches_once_signed(client, fresh, graph):
    t = fresh.admin
    chan = wa_channel(client, t, graph.url(""))
    cid = receive(client, chan, "Pode mandar o resultado?")["conversation_id"]
    pdf = b"%PDF-1.7 result " + bytes(range(256))
    sent = crm.assert_json_response(client.post(crm.messages_url(cid), {
        "text": "Seu resultado", "attachments": [file("resultado.pdf", "application/pdf", pdf)]},
        token=t), 201)
    assert [(a["n"], a["status"], a["size"]) for a in sent["attachments"]] == \
        [(0, "stored", len(pdf))], sent
    [req] = graph.wait_for(1, WAIT)
    assert req.json["type"] == "document", req.describe()
    doc = req.json["document"]
    assert (doc["caption"], doc["filename"]) == ("Seu resultado", "resultado.pdf"), doc
    link = urllib.parse.urlsplit(doc["link"])
    assert link.path.startswith("/api/v1/media/"), doc
    # The provider's fetch: no token of a user, the file as it was sent.
    got = client.request("GET", link.path)
    assert got.status == 200 and got.body == pdf, got.describe()
    assert got.header("Content-Type") == "application/pdf", got.describe()
    # A token altered anywhere, or of another message, names nothing.
    payload, mac = link.path.rsplit("/", 1)[1].split(".")
    for bad in (payload + "." + mac[:-2] + ("A" if mac[-2] != "A" else "B") + mac[-1],
                payload[:-1] + "x." + mac, "x.y", payload):
        assert client.request("GET", "/api/v1/media/" + bad).status == 404, bad
    # Rules of WhatsApp: one file a message; an audio without text; none beside a template.
    ogg = file("voice.ogg", "audio/ogg", b"OggS" + b"\0" * 50)
    crm.assert_error(client.post(crm.messages_url(cid), {
        "attachments": [ogg, ogg]}, token=t), 409, "CONFLICT")
    crm.assert_error(client.post(crm.messages_url(cid), {
        "text": "ouça", "attachments": [ogg]}, token=t), 409, "CONFLICT")
    voice = crm.assert_json_response(client.post(crm.messages_url(cid), {
        "attachments": [ogg]}, token=t), 201)
    assert voice["text"] == "[voice.ogg]", voice
    second = graph.wait_for(2, WAIT)[1]
    assert second.json["type"] == "audio" and set(second.json["audio"]) == {"link"}, \
        second.describe()
    # An image without text: staff read its name; the patient gets no caption of it.
    photo = crm.assert_json_response(client.post(crm.messages_url(cid), {
        "attachments": [file("foto.jpg", "image/jpeg", JPEG)]}, token=t), 201)
    assert photo["text"] == "[foto.jpg]", photo
    third = graph.wait_for(3, WAIT)[2]
    assert third.json["type"] == "image" and set(third.json["image"]) == {"link"}, \
        third.describe()


def test_files_sent_are_checked(client, fresh, graph):
    t = fresh.admin
    chan = wa_channel(client, t, graph.url(""))
    cid = receive(client, chan, "Oi")["conversation_id"]
    for bad, loc in (
            ([{"filename": "a.png", "content_type": "image/png", "data": "%%%"}],
             ("body", "attachments", 0, "data")),
            ([file("a.html", "text/html", b"<script>")], ("body", "attachments", 0)),
            ([{"filename": "a.png", "content_type": "image/png"}],
             ("body", "attachments", 0, "data")),
            ([file("a.png", "image/png", b"x") | {"url": "http://x"}],
             ("body", "attachments", 0, "url")),
            ([], ("body", "attachments"))):
        crm.assert_validation_locs(client.post(crm.messages_url(cid), {"attachments": bad},
                                               token=t), loc)
    assert [m["direction"] for m in crm.list_messages(client, t, cid)] == ["inbound"]
