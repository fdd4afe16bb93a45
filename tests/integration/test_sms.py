"""SMS channels through Twilio's Messages API (contract §12, docs/channels.md "SMS"), against a
local server standing in for Twilio: incoming messages and status callbacks posted as Twilio's
form and signed with X-Twilio-Signature over the channel's public URL (forged, missing, or
signed for another URL → 401 and nothing stored; Twilio's retry stored once), sends as a form
POST with basic auth and the status callback, segments shown, statuses that only move forward,
errors not retried versus throttling retried, MMS media described, another account refused."""
import base64
import hashlib
import hmac
import time
import urllib.parse

import pytest

import crm

PUBLIC_URL = "https://crm.clinic.example"
SERVER_ENV = {"CARECRM_PUBLIC_URL": PUBLIC_URL, "CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}
WAIT = 20.0
PATIENT = "+5511987654321"


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


def sent_ok(sid: str):
    return (201, {"Content-Type": "application/json"},
            f'{{"sid": "{sid}", "status": "queued", "num_segments": "1"}}')


def twilio_error(status: int, code: int, message: str):
    return (status, {"Content-Type": "application/json"},
            f'{{"code": {code}, "message": "{message}", "status": {status}}}')


def sms_channel(client, token, base_url: str = "http://127.0.0.1:9") -> dict:
    cfg = crm.sms_config(api_base_url=base_url)
    chan = crm.create_channel(client, token, type="sms", config=cfg)
    chan["_config"] = cfg
    return chan


def path(chan) -> str:
    return f"/api/v1/channels/{chan['id']}/sms/webhook"


def sign(token: str, url: str, fields: list) -> str:
    data = url + "".join(k + v for k, v in sorted(fields, key=lambda kv: kv[0]))
    return base64.b64encode(hmac.new(token.encode(), data.encode(), hashlib.sha1).digest()).decode()


def post(client, chan, fields: list, *, token: str | None = None, url: str | None = None,
         signature: str | None = None):
    if signature is None:
        signature = sign(token or chan["_config"]["auth_token"], url or PUBLIC_URL + path(chan),
                         fields)
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if signature:
        headers["X-Twilio-Signature"] = signature
    return client.request("POST", path(chan), raw=urllib.parse.urlencode(fields).encode(),
                          headers=headers)


def incoming(chan, body: str, sid: str | None = None, sender: str = PATIENT, **extra) -> list:
    fields = [("ToCountry", "US"), ("SmsMessageSid", sid or crm.unique("SM")),
              ("NumMedia", str(extra.pop("num_media", 0))), ("SmsSid", sid or "x"),
              ("SmsStatus", "received"), ("Body", body), ("To", chan["_config"]["from_number"]),
              ("NumSegments", "1"), ("MessageSid", sid or crm.unique("SM")),
              ("AccountSid", chan["_config"]["account_sid"]), ("From", sender),
              ("ApiVersion", "2010-04-01")]
    fields += list(extra.items())
    return fields


def callback(chan, sid: str, status: str, **extra) -> list:
    return [("AccountSid", chan["_config"]["account_sid"]), ("MessageSid", sid),
            ("SmsSid", sid), ("MessageStatus", status), ("SmsStatus", status),
            ("From", chan["_config"]["from_number"]), ("To", PATIENT),
            ("ApiVersion", "2010-04-01")] + list(extra.items())


def conversations(client, token) -> list:
    return crm.list_all(client, token, "/api/v1/conversations", {})


def only_conversation(client, token) -> dict:
    convs = conversations(client, token)
    assert len(convs) == 1, convs
    return convs[0]


def accepted(resp) -> None:
    assert resp.status == 200, resp.describe()
    assert resp.header("Content-Type").startswith("text/xml"), resp.describe()
    assert b"<Response></Response>" in resp.body, resp.describe()


# ---- inbound ------------------------------------------------------------------------------------


def test_a_signed_sms_is_stored_once_even_when_twilio_retries(client, fresh):
    t = fresh.admin
    chan = sms_channel(client, t)
    assert chan["webhook_url"] == PUBLIC_URL + path(chan), chan
    fields = incoming(chan, "Preciso remarcar", sid="SM0001")
    accepted(post(client, chan, fields))
    accepted(post(client, chan, fields))  # Twilio's retry of the same request
    conv = only_conversation(client, t)
    [msg] = crm.list_messages(client, t, conv["id"])
    crm.assert_message(msg, direction="inbound", text="Preciso remarcar",
                       external_message_id="SM0001", status="received")
    contact = crm.assert_json_response(client.get(crm.contact_url(conv["contact_id"]), token=t),
                                       200)
    assert contact["phone"] == PATIENT, contact


@pytest.mark.parametrize("how", ["missing", "wrong token", "the internal URL", "a field changed"])
def test_a_forged_signature_is_401_and_stores_nothing(client, fresh, how):
    t = fresh.admin
    chan = sms_channel(client, t)
    fields = incoming(chan, "forged")
    if how == "missing":
        resp = post(client, chan, fields, signature="")
    elif how == "wrong token":
        resp = post(client, chan, fields, token="not-the-auth-token")
    elif how == "the internal URL":
        resp = post(client, chan, fields, url=f"http://{client.host}:{client.port}{path(chan)}")
    else:
        good = sign(chan["_config"]["auth_token"], PUBLIC_URL + path(chan), fields)
        changed = [(k, "forged!" if k == "Body" else v) for k, v in fields]
        resp = post(client, chan, changed, signature=good)
    crm.assert_error(resp, 401, "INVALID_CREDENTIALS")
    assert conversations(client, t) == []


def test_mms_media_is_described_and_another_account_is_refused(client, fresh):
    t = fresh.admin
    chan = sms_channel(client, t)
    fields = incoming(chan, "Foto do exame", num_media=1,
                      MediaUrl0="https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1",
                      MediaContentType0="image/jpeg")
    accepted(post(client, chan, fields))
    [msg] = crm.list_messages(client, t, only_conversation(client, t)["id"])
    assert msg["text"].startswith("Foto do exame [media image/jpeg https://api.twilio.com/"), msg
    other = [(k, "AC" + "f" * 32 if k == "AccountSid" else v) for k, v in incoming(chan, "hi")]
    crm.assert_validation(post(client, chan, other), (("body", "AccountSid"), "value_error"))


def test_mms_media_is_fetched_with_the_accounts_credentials_following_twilios_redirect(
        client, fresh):
    t = fresh.admin
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 300
    with crm.Receiver() as rcv:
        rcv.set_responses([(307, {"Location": rcv.url("/bucket/ME1.png")}, b""),
                           (200, {"Content-Type": "image/png"}, png)])
        chan = sms_channel(client, t)
        fields = incoming(chan, "Foto do exame", num_media=1,
                          MediaUrl0=rcv.url("/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1"),
                          MediaContentType0="image/png")
        accepted(post(client, chan, fields))
        conv = only_conversation(client, t)

        def stored():
            [msg] = crm.list_messages(client, t, conv["id"])
            return msg["attachments"] and msg["attachments"][0]["status"] == "stored" and msg

        msg = crm.eventually(stored, 20.0, 0.2)
        assert msg, crm.list_messages(client, t, conv["id"])
        first, second = rcv.wait_for(2)
        sid, token = chan["_config"]["account_sid"], chan["_config"]["auth_token"]
        assert first.header("Authorization") == "Basic " + base64.b64encode(
            f"{sid}:{token}".encode()).decode(), first.describe()
        assert second.path == "/bucket/ME1.png", second.describe()
    got = client.get(f"/api/v1/messages/{msg['id']}/attachments/0", token=t)
    assert got.status == 200 and got.body == png and got.header("Content-Type") == "image/png", \
        got.describe()


def test_an_inactive_sms_channel_is_409(client, fresh):
    t = fresh.admin
    chan = sms_channel(client, t)
    crm.assert_json_response(client.patch(crm.channel_url(chan["id"]), {"is_active": False},
                                          token=t), 200)
    crm.assert_error(post(client, chan, incoming(chan, "late")), 409, "CONFLICT")
    assert conversations(client, t) == []


# ---- outbound -----------------------------------------------------------------------------------


def test_a_reply_is_a_signed_form_post_and_its_status_callbacks_move_it_forward(client, fresh):
    t = fresh.admin
    with crm.Receiver([sent_ok("SMout1")]) as twilio:
        chan = sms_channel(client, t, twilio.url(""))
        accepted(post(client, chan, incoming(chan, "Oi")))
        cid = only_conversation(client, t)["id"]
        text = "Confirmação: sua consulta é amanhã às 10h. " * 2  # UCS-2, 88 characters
        queued = crm.send_message(client, t, cid, text)
        assert queued["segments"] == 2, queued
        [req] = twilio.wait_for(1, WAIT)
        sent = crm.wait_message(client, t, cid, queued["id"], timeout=WAIT)
    cfg = chan["_config"]
    assert req.method == "POST", req.describe()
    assert req.path == f"/2010-04-01/Accounts/{cfg['account_sid']}/Messages.json", req.describe()
    assert req.header("Content-Type") == "application/x-www-form-urlencoded", req.describe()
    expected_auth = base64.b64encode(f"{cfg['account_sid']}:{cfg['auth_token']}".encode()).decode()
    assert req.header("Authorization") == "Basic " + expected_auth, req.describe()
    form = dict(urllib.parse.parse_qsl(req.body.decode()))
    assert form == {"To": PATIENT, "From": cfg["from_number"], "Body": text,
                    "StatusCallback": PUBLIC_URL + path(chan) + f"?message={queued['id']}"}, form
    crm.assert_message(sent, status="sent", external_message_id="SMout1", attempts=1, segments=2)

    def state():
        return [m for m in crm.list_messages(client, t, cid) if m["id"] == queued["id"]][0]

    for step, expected in (("sending", "sent"), ("delivered", "delivered"), ("sent", "delivered")):
        accepted(post(client, chan, callback(chan, "SMout1", step)))
        assert state()["status"] == expected, (step, state())


def test_an_mms_gives_twilio_a_link_to_the_file(client, fresh):
    t = fresh.admin
    with crm.Receiver([sent_ok("SMOUT1")]) as twilio:
        chan = sms_channel(client, t, twilio.url(""))
        accepted(post(client, chan, incoming(chan, "Oi")))
        cid = only_conversation(client, t)["id"]
        jpeg = b"\xff\xd8\xff" + b"\1" * 400
        crm.assert_json_response(client.post(crm.messages_url(cid), {
            "text": "Seu pedido", "attachments": [{
                "filename": "pedido.jpg", "content_type": "image/jpeg",
                "data": base64.b64encode(jpeg).decode()}]}, token=t), 201)
        [req] = twilio.wait_for(1)
        form = urllib.parse.parse_qs(req.body.decode())
        assert form["Body"] == ["Seu pedido"], form
        [url] = form["MediaUrl"]
        assert url.startswith(PUBLIC_URL + "/api/v1/media/"), url
    got = client.request("GET", url[len(PUBLIC_URL):])
    assert got.status == 200 and got.body == jpeg, got.describe()


def test_an_undelivered_callback_records_twilios_error(client, fresh):
    t = fresh.admin
    with crm.Receiver([sent_ok("SMout2")]) as twilio:
        chan = sms_channel(client, t, twilio.url(""))
        accepted(post(client, chan, incoming(chan, "Oi")))
        cid = only_conversation(client, t)["id"]
        queued = crm.send_message(client, t, cid, "Lembrete")
        crm.wait_message(client, t, cid, queued["id"], timeout=WAIT)
        accepted(post(client, chan, callback(chan, "SMout2", "undelivered", ErrorCode="30003")))
    [msg] = [m for m in crm.list_messages(client, t, cid) if m["id"] == queued["id"]]
    crm.assert_message(msg, status="failed", segments=1)
    assert msg["error"] == "twilio: undelivered 30003", msg


def test_a_bad_number_is_not_retried_but_throttling_is(client, fresh):
    t = fresh.admin
    with crm.Receiver([twilio_error(400, 21211, "The To number is not a valid phone number.")]) \
            as twilio:
        chan = sms_channel(client, t, twilio.url(""))
        accepted(post(client, chan, incoming(chan, "Oi")))
        cid = only_conversation(client, t)["id"]
        queued = crm.send_message(client, t, cid, "hello")
        failed = crm.wait_message(client, t, cid, queued["id"], timeout=WAIT)
        time.sleep(1.5)  # a retry would come 1 s after the first attempt
        attempts = len(twilio.requests)
    crm.assert_message(failed, status="failed", attempts=1)
    assert "21211" in failed["error"], failed
    assert attempts == 1
    with crm.Receiver([twilio_error(429, 20429, "Too Many Requests"), sent_ok("SMlater")]) \
            as twilio:
        chan2 = sms_channel(client, t, twilio.url(""))
        accepted(post(client, chan2, incoming(chan2, "Oi", sender="+5511900000001")))
        cid2 = [c for c in conversations(client, t) if c["channel_id"] == chan2["id"]][0]["id"]
        queued = crm.send_message(client, t, cid2, "hello again")
        sent = crm.wait_message(client, t, cid2, queued["id"], timeout=WAIT)
    crm.assert_message(sent, status="sent", attempts=2, external_message_id="SMlater")


def test_stop_by_sms_withdraws_consent(client, fresh):
    t = fresh.admin
    with crm.Receiver([sent_ok("SMx")]) as twilio:
        chan = sms_channel(client, t, twilio.url(""))
        accepted(post(client, chan, incoming(chan, "PARAR")))
        cid = only_conversation(client, t)["id"]
        resp = client.post(crm.messages_url(cid), {"text": "Sua consulta"}, token=t)
        crm.assert_error(resp, 409, "CONFLICT")
        assert twilio.requests == []
