"""E-mail channels (contract §12, docs/channels.md "E-mail"): outbound over SMTP to a real
SMTP server (Debian's python3-aiosmtpd) that requires STARTTLS and AUTH, the mail UTF-8 MIME
with text and HTML, a Message-ID naming the conversation, In-Reply-To and References to the
patient's last mail and "Re:" its subject; inbound through Mailgun's route webhook (plain and
multipart forms) signed with HMAC-SHA256 of timestamp and token (forged or missing → 401,
nothing stored); a patient's reply joins the conversation it answers, even closed; a login the
server refuses fails the message at once."""
import base64
import email
import email.policy
import hashlib
import hmac
import secrets
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

import crm

CERTS = Path(tempfile.mkdtemp(prefix="carecrm-smtp-"))
subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                "-keyout", str(CERTS / "key.pem"), "-out", str(CERTS / "cert.pem")],
               check=True, capture_output=True)
SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true",
              "CARECRM_SMTP_CA_FILE": str(CERTS / "cert.pem")}
WAIT = 20.0
USER, PASSWORD = "crm-sender", "smtp-" + secrets.token_hex(8)


class Mailbox:
    """What the SMTP server accepted: (mail from, recipients, parsed message)."""

    def __init__(self):
        self.lock = threading.Condition()
        self.mails = []

    async def handle_DATA(self, server, session, envelope):
        msg = email.message_from_bytes(envelope.original_content or envelope.content,
                                       policy=email.policy.default)
        with self.lock:
            self.mails.append((envelope.mail_from, list(envelope.rcpt_tos), msg,
                               session.authenticated))
            self.lock.notify_all()
        return "250 OK"

    def wait(self, n: int, timeout: float = WAIT) -> list:
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.mails) < n:
                left = deadline - time.monotonic()
                assert left > 0, f"want {n} mails, got {len(self.mails)}"
                self.lock.wait(left)
            return list(self.mails)


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and auth_data.login == USER.encode() and \
        auth_data.password == PASSWORD.encode()
    return AuthResult(success=ok, handled=False)


@pytest.fixture(scope="module")
def smtp():
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(CERTS / "cert.pem", CERTS / "key.pem")
    box = Mailbox()
    port = crm.free_port()
    ctrl = Controller(box, hostname="127.0.0.1", port=port, tls_context=tls,
                      require_starttls=True, authenticator=authenticator, auth_required=True)
    ctrl.start()
    box.port = port
    yield box
    ctrl.stop()


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


def mail_channel(client, token, smtp, password: str = PASSWORD) -> dict:
    key = "key-" + secrets.token_hex(12)
    cfg = {"smtp_host": "localhost", "smtp_port": smtp.port, "smtp_security": "starttls",
           "smtp_username": USER, "smtp_password": password,
           "from_address": "recepcao@clinica-sol.example", "from_name": "Clínica Sol",
           "inbound_signing_key": key}
    chan = crm.create_channel(client, token, type="email", config=cfg)
    assert chan["config"]["has_smtp_password"] is True and "smtp_password" not in chan["config"]
    chan["_key"] = key
    return chan


def path(chan) -> str:
    return f"/api/v1/channels/{chan['id']}/email/webhook"


def signed(chan, fields: dict, key: str | None = None) -> dict:
    ts, token = str(int(time.time())), secrets.token_hex(25)
    sig = hmac.new((key or chan["_key"]).encode(), (ts + token).encode(), hashlib.sha256).hexdigest()
    return {**fields, "timestamp": ts, "token": token, "signature": sig}


def patient_mail(text: str, message_id: str | None = None, **extra) -> dict:
    return {"recipient": "recepcao@clinica-sol.example", "sender": "ana@patient.example",
            "from": "Ana Souza <ana@patient.example>", "subject": "Exames de sangue",
            "body-plain": text + "\n\n> old quoted text", "stripped-text": text,
            "Message-Id": message_id or f"<{secrets.token_hex(8)}@patient.example>", **extra}


def post(client, chan, fields: dict):
    return client.request("POST", path(chan), raw=urllib.parse.urlencode(fields).encode(),
                          headers={"Content-Type": "application/x-www-form-urlencoded"})


def conversations(client, token) -> list:
    return crm.list_all(client, token, "/api/v1/conversations", {})


def test_a_reply_goes_over_starttls_with_auth_and_threads_to_the_patients_mail(client, fresh,
                                                                               smtp):
    t = fresh.admin
    chan = mail_channel(client, t, smtp)
    assert chan["webhook_url"].endswith(path(chan)), chan
    first = crm.assert_json_response(
        post(client, chan, signed(chan, patient_mail("Os resultados já saíram?",
                                                     "<m1@patient.example>"))), 200)
    assert first["duplicate"] is False, first
    cid = first["conversation_id"]
    [inbound] = crm.list_messages(client, t, cid)
    assert inbound["text"] == "Os resultados já saíram?" and inbound["subject"] == \
        "Exames de sangue", inbound
    before = len(smtp.mails)
    queued = crm.send_message(client, t, cid, "Olá Ana,\nsim: já estão no portal.")
    sent = crm.wait_message(client, t, cid, queued["id"], timeout=WAIT)
    mail_from, rcpts, msg, authed = smtp.wait(before + 1)[before]
    crm.assert_message(sent, status="sent", attempts=1)
    assert mail_from == "recepcao@clinica-sol.example" and rcpts == ["ana@patient.example"]
    assert authed, "the message was sent without AUTH"
    assert str(msg["Subject"]) == "Re: Exames de sangue", msg["Subject"]
    assert str(msg["From"]) == "Clínica Sol <recepcao@clinica-sol.example>", msg["From"]
    assert msg["In-Reply-To"] == "<m1@patient.example>" and msg["References"] == \
        "<m1@patient.example>"
    assert msg["Message-ID"].startswith(f"<carecrm.c{cid}.m{queued['id']}@"), msg["Message-ID"]
    assert sent["external_message_id"] == msg["Message-ID"], sent
    plain = msg.get_body(("plain",)).get_content()
    html = msg.get_body(("html",)).get_content()
    assert plain.replace("\r\n", "\n").strip() == "Olá Ana,\nsim: já estão no portal.", plain
    assert "Olá Ana,<br>sim: já estão no portal." in html, html

    # The patient answers that mail after the conversation was closed: it joins it again.
    crm.assert_json_response(client.patch(crm.conversation_url(cid), {"status": "closed"},
                                          token=t), 200)
    again = crm.assert_json_response(post(client, chan, signed(chan, patient_mail(
        "Obrigada!", "<m2@patient.example>", **{"In-Reply-To": msg["Message-ID"],
                                               "References": "<m1@patient.example> " +
                                               msg["Message-ID"]}))), 200)
    assert again["conversation_id"] == cid, again
    assert crm.get_conversation(client, t, cid)["status"] == "open"
    # Mailgun posting the same mail again stores nothing twice.
    dup = crm.assert_json_response(post(client, chan, signed(chan, patient_mail(
        "Obrigada!", "<m2@patient.example>"))), 200)
    assert dup["duplicate"] is True and dup["message_id"] == again["message_id"], dup


@pytest.mark.parametrize("how", ["missing", "wrong key", "token changed"])
def test_a_forged_mailgun_post_is_401_and_stores_nothing(client, fresh, smtp, how):
    t = fresh.admin
    chan = mail_channel(client, t, smtp)
    fields = signed(chan, patient_mail("forged"), key="key-wrong" if how == "wrong key" else None)
    if how == "missing":
        fields.pop("signature")
    if how == "token changed":
        fields["token"] = secrets.token_hex(25)
    crm.assert_error(post(client, chan, fields), 401, "INVALID_CREDENTIALS")
    assert conversations(client, t) == []


def test_a_multipart_mail_keeps_its_attachments(client, fresh, smtp):
    t = fresh.admin
    chan = mail_channel(client, t, smtp)
    fields = signed(chan, patient_mail("Segue o exame"))
    boundary = "----carecrm" + secrets.token_hex(6)
    parts = []
    for k, v in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
                     .encode())
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="attachment-1"; '
                 f'filename="exame.pdf"\r\nContent-Type: application/pdf\r\n\r\n'.encode() +
                 b"%PDF-1.4 fake" + b"\r\n")
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="attachment-2"; '
                 f'filename="run.sh"\r\nContent-Type: text/x-shellscript\r\n\r\n'.encode() +
                 b"rm -rf /" + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    resp = client.request("POST", path(chan), raw=body, headers={
        "Content-Type": f"multipart/form-data; boundary={boundary}"})
    ack = crm.assert_json_response(resp, 200)
    [msg] = crm.list_messages(client, t, ack["conversation_id"])
    assert msg["text"] == ("Segue o exame [attachment exame.pdf (application/pdf, 13 bytes)] "
                           "[attachment run.sh (text/x-shellscript, 8 bytes)]"), msg
    # The files came with the mail: kept (or refused, with why) in the message's transaction.
    pdf, script = msg["attachments"]
    assert (pdf["status"], pdf["filename"], pdf["size"]) == ("stored", "exame.pdf", 13), pdf
    assert script["status"] == "refused" and "not kept" in script["error"], script
    got = client.get(f"/api/v1/messages/{msg['id']}/attachments/0", token=t)
    assert got.status == 200 and got.body == b"%PDF-1.4 fake", got.describe()
    assert got.header("Content-Type") == "application/pdf", got.describe()


def test_a_file_sent_by_email_is_an_attachment_of_the_mail(client, fresh, smtp):
    t = fresh.admin
    chan = mail_channel(client, t, smtp)
    cid = crm.assert_json_response(post(client, chan, signed(chan, patient_mail(
        "Pode mandar o laudo?"))), 200)["conversation_id"]
    before = len(smtp.mails)
    pdf = b"%PDF-1.7 laudo " + bytes(range(256)) * 4
    queued = crm.assert_json_response(client.post(crm.messages_url(cid), {
        "text": "Segue o laudo.",
        "attachments": [{"filename": "laudo.pdf", "content_type": "application/pdf",
                         "data": base64.b64encode(pdf).decode()}]}, token=t), 201)
    sent = crm.wait_message(client, t, cid, queued["id"], timeout=WAIT)
    crm.assert_message(sent, status="sent")
    _, _, msg, _ = smtp.wait(before + 1)[before]
    [att] = list(msg.iter_attachments())
    assert att.get_filename() == "laudo.pdf" and att.get_content_type() == "application/pdf", att
    assert att.get_content() == pdf
    assert msg.get_body(("plain",)).get_content().strip() == "Segue o laudo."


def test_a_login_the_server_refuses_fails_the_message_at_once(client, fresh, smtp):
    t = fresh.admin
    chan = mail_channel(client, t, smtp, password="not-the-password")
    ack = crm.assert_json_response(post(client, chan, signed(chan, patient_mail("Oi"))), 200)
    before = len(smtp.mails)
    queued = crm.send_message(client, t, ack["conversation_id"], "hello")
    failed = crm.wait_message(client, t, ack["conversation_id"], queued["id"], timeout=WAIT)
    crm.assert_message(failed, status="failed", attempts=1)
    assert "smtp:" in failed["error"], failed
    assert len(smtp.mails) == before


def test_email_config_is_checked(client, fresh):
    t = fresh.admin
    resp = client.post("/api/v1/channels", {"name": "Mail", "type": "email", "config": {
        "smtp_host": "relay", "smtp_security": "none", "smtp_username": "u",
        "from_address": "a@b.example"}}, token=t)
    crm.assert_validation(resp, (("body", "config", "smtp_security"), "value_error"))
    resp = client.post("/api/v1/channels", {"name": "Mail", "type": "email", "config": {}},
                       token=t)
    crm.assert_validation(resp, (("body", "config", "smtp_host"), "missing"),
                          (("body", "config", "from_address"), "missing"))
