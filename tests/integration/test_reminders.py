"""Appointment reminders and the patient's answers (contract §10, docs/appointments.md
"Reminders"): a service's reminder goes to the patient's conversation on its channel once its
time has come, rendered from its template, once, even across a kill -9; consent
appointment_reminders is checked; "1" confirms and "cancelar" cancels the next live appointment
(source patient_reply) with an acknowledgement, and neither is a STOP; any other text is an
ordinary message.

The outbound side is a local HTTP server standing in for the api channel's outbound_url.
Tests that restart this module's server use `server.client()` afterwards."""
import datetime as dt
import hashlib
import hmac
import json
import re
import secrets
import time
import urllib.parse
from zoneinfo import ZoneInfo

import crm

SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true",
              "CARECRM_AUTOMATION_POLL": "0.5"}
SECRET = "reminder-secret-" + secrets.token_hex(8)  # 32 characters
ZONE = "America/Sao_Paulo"
TIMEOUT = 20.0
TEMPLATE = ("Olá {{contact.first_name}}, {{ service.name }} em {{appointment.start_local}} "
            "({{calendar.name}}). Responda 1 para confirmar ou 2 para cancelar.{{unknown}}")


LATEST_OFFSET = 180  # minutes: no test books further from now than this (plus 30 minutes)


def slot_after(minutes: int, step: int = 5) -> dt.datetime:
    """The first start on a `step`-minute grid at least `minutes` from now (UTC). The calendar's
    day ends at 24:00 in São Paulo, and an appointment cannot run past it (409): when the
    tests' slots (up to LATEST_OFFSET minutes ahead) would reach the next local day, every slot
    counts from the next local midnight instead, so the slots of one test keep their order and
    spacing whatever the hour it runs at (all within the 24 hours a reminder looks ahead)."""
    now = dt.datetime.now(dt.timezone.utc)
    here = now.astimezone(ZoneInfo(ZONE))
    if (here + dt.timedelta(minutes=LATEST_OFFSET + 30)).date() != here.date():
        midnight = (here + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0,
                                                          microsecond=0)
        now = midnight.astimezone(dt.timezone.utc)
    t = now + dt.timedelta(minutes=minutes)
    t = t.replace(second=0, microsecond=0)
    return t + dt.timedelta(minutes=(-t.minute) % step)


def rfc3339(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.000000Z")


def local(t: dt.datetime) -> str:
    return t.astimezone(ZoneInfo(ZONE)).strftime("%Y-%m-%d %H:%M")


def texts(rcv) -> list:
    return [r.json["data"]["text"] for r in rcv.requests if r.method == "POST"]


def clinic(client, t, rcv, reminders=True):
    """An api channel sending to `rcv`, a patient who wrote in on it, an all-day calendar in
    São Paulo with a 5-minute grid, and a service reminding 24 hours before (or not)."""
    chan = crm.create_channel(client, t, type="api", webhook_secret=SECRET,
                              config={"outbound_url": rcv.url("/out")})
    ack = crm.inbound(client, chan["id"], SECRET,
                      {"phone": crm.unique_phone(), "name": "Maria Silva"}, "Oi")
    cal = crm.create_calendar(client, t, name="Dra. Ana", time_zone=ZONE, slot_step_minutes=5,
                              working_hours=crm.every_day(("00:00", "24:00")))
    rules = [{"before_minutes": 1440, "channel_id": chan["id"], "text": TEMPLATE}]
    svc = crm.create_service(client, t, [cal["id"]], name="Check-up",
                             reminders=rules if reminders else [])
    return chan, ack, cal, svc


def say(client, chan, phone: str, text: str) -> dict:
    """The patient of `phone` writes `text` on the channel."""
    return crm.inbound(client, chan["id"], SECRET, {"phone": phone}, text)


def wait_texts(rcv, n: int, timeout: float = TIMEOUT) -> list:
    rcv.wait_for(n, timeout)
    return texts(rcv)


def test_a_reminder_goes_out_once_and_one_confirms(client, sess):
    t = sess.admin
    with crm.Receiver([200]) as rcv:
        chan, ack, cal, svc = clinic(client, t, rcv)
        contact, conv = ack["contact_id"], ack["conversation_id"]
        start = slot_after(30)
        appt = crm.booked(client, t, contact, svc["id"], cal["id"], rfc3339(start))
        sent = wait_texts(rcv, 1)
        assert sent == [f"Olá Maria, Check-up em {local(start)} (Dra. Ana). Responda 1 para "
                        "confirmar ou 2 para cancelar."], sent
        # Ticks come every second: still one after a few of them.
        time.sleep(3)
        assert len(texts(rcv)) == 1, texts(rcv)
        # The patient answers "1": confirmed by the patient, and thanked.
        phone = crm.get_contact(client, t, contact)["phone"]
        say(client, chan, phone, " 1 ")
        assert crm.eventually(lambda: crm.assert_json_response(client.get(
            crm.appointment_url(appt["id"]), token=t), 200)["status"] == "confirmed",
                              timeout=TIMEOUT)
        after = crm.assert_json_response(client.get(crm.appointment_url(appt["id"]), token=t), 200)
        assert after["source"] == "patient_reply", after
        sent = wait_texts(rcv, 2)
        assert sent[1] == f"Thank you! Your appointment on {local(start)} is confirmed.", sent
    # Both are messages of the conversation: the answer an ordinary inbound one.
    msgs = crm.list_messages(client, t, conv)
    assert [(m["direction"], m["text"].strip()) for m in msgs][-3:] == [
        ("outbound", sent[0]), ("inbound", "1"), ("outbound", sent[1])], msgs
    # The confirmation is in the patient's audit trail, by the patient's channel.
    rows = crm.audit_rows(client, t, resource="contact", resource_id=contact,
                          action="update_appointment")
    assert any(r["actor_ref"] == f"channel:{chan['id']}" for r in rows), rows


def test_after_the_assistant_offers_times_the_patients_number_is_for_the_assistant(client, sess):
    """A reminder says "1 to confirm or 2 to cancel"; the patient then asks the assistant to
    move the appointment and gets numbered times: their "2" picks the second time (the
    appointment moves), it does not cancel the appointment as an answer to the reminder."""
    t = sess.admin
    with crm.Receiver([200]) as rcv:
        chan, ack, cal, svc = clinic(client, t, rcv)
        agent = crm.create_agent(client, t, channel_ids=[chan["id"]], auto_reply=True,
                                 service_ids=[svc["id"]])
        contact, conv = ack["contact_id"], ack["conversation_id"]
        start = slot_after(30)
        appt = crm.booked(client, t, contact, svc["id"], cal["id"], rfc3339(start))
        wait_texts(rcv, 1)  # the reminder
        phone = crm.get_contact(client, t, contact)["phone"]
        say(client, chan, phone, "Preciso remarcar minha consulta")
        msgs = crm.wait_ai_messages(client, t, conv,
                                    lambda ms: len(crm.by_agent(ms, agent["id"])) >= 1, TIMEOUT)
        offer = crm.by_agent(msgs, agent["id"])[0]["text"]
        times = dict(re.findall(r"^(\d)\) \S+ (\d{4}-\d\d-\d\d \d\d:\d\d)$", offer, re.M))
        assert sorted(times) == ["1", "2", "3"], offer
        say(client, chan, phone, "2")
        crm.wait_ai_messages(client, t, conv,
                             lambda ms: len(crm.by_agent(ms, agent["id"])) >= 2, TIMEOUT)
        after = crm.assert_json_response(client.get(crm.appointment_url(appt["id"]), token=t), 200)
        assert after["status"] == "booked", after
        got = dt.datetime.fromisoformat(after["start"].replace("Z", "+00:00"))
        assert local(got) == times["2"], (after, times)


def test_cancelar_cancels_the_next_and_is_no_stop(client, sess, database):
    t = sess.admin
    with crm.Receiver([200]) as rcv:
        chan, ack, cal, svc = clinic(client, t, rcv)
        contact = ack["contact_id"]
        phone = crm.get_contact(client, t, contact)["phone"]
        first = crm.booked(client, t, contact, svc["id"], cal["id"], rfc3339(slot_after(40)))
        later = crm.booked(client, t, contact, svc["id"], cal["id"], rfc3339(slot_after(90)))
        wait_texts(rcv, 2)
        # Something else first: an ordinary message, nothing changes, nobody answers.
        say(client, chan, phone, "que horas?")
        time.sleep(1.5)
        assert len(texts(rcv)) == 2, texts(rcv)
        say(client, chan, phone, "Cancelar!")
        sent = wait_texts(rcv, 3)
        assert sent[2].startswith("Sua consulta de ") and sent[2].endswith(" foi cancelada."), sent
        got = crm.assert_json_response(client.get(crm.appointment_url(first["id"]), token=t), 200)
        assert (got["status"], got["source"]) == ("cancelled", "patient_reply"), got
        assert got["cancel_reason"], got
        assert crm.assert_json_response(client.get(
            crm.appointment_url(later["id"]), token=t), 200)["status"] == "booked"
    # "cancelar" answered the reminder: no consent was withdrawn.
    consents = crm.assert_json_response(client.get(
        f"{crm.contact_url(contact)}/consents", token=t), 200)
    assert consents["items"] == [], consents


def skipped_reminders(database) -> dict:
    rows = crm.sql_rows(database, "SELECT appointment_id, status, reason FROM "
                        "appointment_reminders ORDER BY appointment_id")
    return {r["appointment_id"]: r for r in rows if r["status"] == "skipped"}


def test_no_reminder_without_consent_or_a_way_to_write_first(client, sess, database):
    t = sess.admin
    with crm.Receiver([200]) as rcv:
        chan, ack, cal, svc = clinic(client, t, rcv)
        contact = ack["contact_id"]
        phone = crm.get_contact(client, t, contact)["phone"]
        # STOP withdraws appointment_reminders (with every other kind) on the channel.
        say(client, chan, phone, "STOP")
        stopped = crm.booked(client, t, contact, svc["id"], cal["id"], rfc3339(slot_after(30)))
        # Telegram lets a bot write only to a chat the person started: a patient who never
        # wrote in on the bot cannot be reminded there.
        bot = crm.create_channel(client, t, type="telegram", webhook_secret=SECRET,
                                 config={"bot_token": crm.bot_token(),
                                         "api_base_url": rcv.url("/telegram")})
        by_bot = crm.create_service(client, t, [cal["id"]], name="Retorno", reminders=[
            {"before_minutes": 1440, "channel_id": bot["id"], "text": TEMPLATE}])
        stranger = crm.create_contact(client, t)["id"]
        silent = crm.booked(client, t, stranger, by_bot["id"], cal["id"],
                            rfc3339(slot_after(60)))
        assert crm.eventually(lambda: {stopped["id"], silent["id"]} <= set(
            skipped_reminders(database)), timeout=TIMEOUT), skipped_reminders(database)
        time.sleep(1.5)
        assert rcv.requests == [], [(r.method, r.path) for r in rcv.requests]
    reasons = skipped_reminders(database)
    assert "appointment_reminders" in reasons[stopped["id"]]["reason"], reasons
    assert "no chat on this channel" in reasons[silent["id"]]["reason"], reasons
    convs = crm.list_all(client, t, crm.CONVERSATIONS, {"contact_id": stranger})
    assert convs == [], convs  # nothing was opened for a message that could not go


def test_a_patient_who_never_wrote_in_is_reminded_in_a_conversation_opened_for_it(client,
                                                                                   sess):
    t = sess.admin
    with crm.Receiver([200]) as rcv:
        chan, _, cal, svc = clinic(client, t, rcv)
        phone = crm.unique_phone()
        patient = crm.create_contact(client, t, first_name="Joana", phone=phone)["id"]
        start = slot_after(30)
        appt = crm.booked(client, t, patient, svc["id"], cal["id"], rfc3339(start))
        rcv.wait_for(1, TIMEOUT)
        sent = rcv.requests[0].json["data"]
        assert sent["text"].startswith(f"Olá Joana, Check-up em {local(start)}"), sent
        assert (sent["contact_id"], sent["contact"]["phone"]) == (patient, phone), sent
        convs = crm.list_all(client, t, crm.CONVERSATIONS, {"contact_id": patient})
        assert [(c["id"], c["channel_id"], c["status"]) for c in convs] == [
            (sent["conversation_id"], chan["id"], "open")], convs
        # The patient's answer reaches that conversation and confirms.
        answer = say(client, chan, phone, "1")
        assert answer["conversation_id"] == sent["conversation_id"], answer
        assert crm.eventually(lambda: crm.assert_json_response(client.get(
            crm.appointment_url(appt["id"]), token=t), 200)["status"] == "confirmed",
            timeout=TIMEOUT)
        assert wait_texts(rcv, 2)[1].startswith("Thank you! Your appointment on"), texts(rcv)


def test_cancelar_with_nothing_left_to_cancel_is_a_stop(client, sess):
    """The reminded appointment was cancelled by staff since: "cancelar" then withdraws
    consent, as a STOP does, and nobody answers."""
    t = sess.admin
    with crm.Receiver([200]) as rcv:
        chan, ack, cal, svc = clinic(client, t, rcv)
        contact = ack["contact_id"]
        phone = crm.get_contact(client, t, contact)["phone"]
        appt = crm.booked(client, t, contact, svc["id"], cal["id"], rfc3339(slot_after(30)))
        wait_texts(rcv, 1)
        crm.assert_json_response(client.post(crm.appointment_url(appt["id"], "cancel"), {},
                                             token=t), 200)
        say(client, chan, phone, "cancelar")

        def withdrawn():
            body = crm.assert_json_response(client.get(
                f"{crm.contact_url(contact)}/consents", token=t), 200)
            return sorted(c["purpose"] for c in body["items"] if c["granted"] is False)

        assert crm.eventually(lambda: withdrawn() == [
            "appointment_reminders", "marketing", "treatment_communication"],
                              timeout=TIMEOUT), withdrawn()
        time.sleep(1)
        assert len(texts(rcv)) == 1, texts(rcv)


def test_a_reminder_for_a_moved_appointment_is_not_sent_for_the_old_time(client, sess, database):
    """Rescheduled before its reminder went out: the reminder names the new time, once."""
    t = sess.admin
    with crm.Receiver([200]) as rcv:
        chan, ack, cal, svc = clinic(client, t, rcv, reminders=False)
        first, later = slot_after(60), slot_after(120)
        appt = crm.booked(client, t, ack["contact_id"], svc["id"], cal["id"], rfc3339(first))
        crm.assert_json_response(client.post(crm.appointment_url(appt["id"], "reschedule"), {
            "start": rfc3339(later)}, token=t), 200)
        crm.assert_json_response(client.put(crm.service_url(svc["id"]), {
            "name": "Check-up", "duration_minutes": 30, "calendar_ids": [cal["id"]],
            "reminders": [{"before_minutes": 1440, "channel_id": chan["id"],
                           "text": "{{appointment.start_local}}"}]}, token=t), 200)
        assert wait_texts(rcv, 1) == [local(later)]
        time.sleep(2)
        assert texts(rcv) == [local(later)], texts(rcv)


def test_an_answer_left_unsettled_is_settled_once(client, sess, database):
    """The state a kill -9 between the answer's commit and the confirmation's leaves behind:
    the message and its reminder_answers row stored, the appointment untouched. The sweeper
    wakes the schedule actor, which confirms, says so once, and settles the answer."""
    t = sess.admin
    with crm.Receiver([200]) as rcv:
        chan, ack, cal, svc = clinic(client, t, rcv, reminders=False)
        contact, conv = ack["contact_id"], ack["conversation_id"]
        start = slot_after(60)
        appt = crm.booked(client, t, contact, svc["id"], cal["id"], rfc3339(start))
        tenant = crm.sql_rows(database, f"SELECT tenant_id FROM appointments WHERE id = {appt['id']}")[0]["tenant_id"]
        database.query(
            "WITH m AS (INSERT INTO messages (tenant_id, conversation_id, channel_id, direction,"
            " text, external_message_id, status, created_at) VALUES"
            f" ({tenant}, {conv}, {chan['id']}, 'inbound', 'sim', 'left-{secrets.token_hex(4)}',"
            " 'received', now() - interval '1 minute') RETURNING id)"
            " INSERT INTO reminder_answers (message_id, tenant_id, contact_id, conversation_id,"
            f" channel_id, created_at) SELECT id, {tenant}, {contact}, {conv}, {chan['id']},"
            " now() - interval '1 minute' FROM m")
        assert wait_texts(rcv, 1) == [f"Obrigado! Sua consulta de {local(start)} está confirmada."]
        got = crm.assert_json_response(client.get(crm.appointment_url(appt["id"]), token=t), 200)
        assert (got["status"], got["source"]) == ("confirmed", "patient_reply"), got
        assert crm.eventually(lambda: crm.sql_rows(
            database, f"SELECT count(*) AS n FROM reminder_answers WHERE tenant_id = {tenant}")[0]["n"] == 0,
                              timeout=TIMEOUT)
        time.sleep(2)  # four more sweeps: nothing more is said
        assert len(texts(rcv)) == 1, texts(rcv)
    rows = crm.audit_rows(client, t, resource="contact", resource_id=contact,
                          action="update_appointment")
    assert any(r["actor_ref"] == f"channel:{chan['id']}" for r in rows), rows


# Last: it restarts this module's server (the module's `client` then points nowhere).
def test_sms_reaches_a_patient_who_never_wrote_in_but_whatsapp_does_not(client, sess, database):
    """SMS reaches any phone, so carecrm opens the conversation; WhatsApp lets a business write
    first only with an approved template, so the reminder is skipped with that reason."""
    t = sess.admin
    twilio_ok = (201, {"Content-Type": "application/json"}, '{"sid": "SMrem1"}')
    with crm.Receiver([twilio_ok]) as twilio:
        sms = crm.create_channel(client, t, type="sms",
                                 config=crm.sms_config(api_base_url=twilio.url("")))
        wa = crm.create_channel(client, t, type="whatsapp",
                                config=crm.whatsapp_config(api_base_url=twilio.url("")))
        cal = crm.create_calendar(client, t, name="Dr. Sms", time_zone=ZONE, slot_step_minutes=5,
                                  working_hours=crm.every_day(("00:00", "24:00")))
        by_sms = crm.create_service(client, t, [cal["id"]], name="Exame", reminders=[
            {"before_minutes": 1440, "channel_id": sms["id"], "text": TEMPLATE}])
        by_wa = crm.create_service(client, t, [cal["id"]], name="Retorno", reminders=[
            {"before_minutes": 1440, "channel_id": wa["id"], "text": TEMPLATE}])
        phone = crm.unique_phone()
        patient = crm.create_contact(client, t, first_name="Bia", phone=phone)["id"]
        start = slot_after(30)
        crm.booked(client, t, patient, by_sms["id"], cal["id"], rfc3339(start))
        other = crm.create_contact(client, t, first_name="Caio", phone=crm.unique_phone())["id"]
        on_wa = crm.booked(client, t, other, by_wa["id"], cal["id"], rfc3339(slot_after(60)))
        [req] = twilio.wait_for(1, TIMEOUT)
        assert crm.eventually(lambda: on_wa["id"] in skipped_reminders(database),
                              timeout=TIMEOUT), skipped_reminders(database)
        time.sleep(1)
        paths = [r.path for r in twilio.requests]
    form = dict(urllib.parse.parse_qsl(req.body.decode()))
    assert form["To"] == phone and form["Body"].startswith(f"Olá Bia, Exame em {local(start)}"), form
    assert all("/Messages.json" in p for p in paths), paths  # nothing went to the Graph API
    reason = skipped_reminders(database)[on_wa["id"]]["reason"]
    assert "approved template" in reason, reason
    convs = crm.list_all(client, t, crm.CONVERSATIONS, {"contact_id": patient})
    assert [c["channel_id"] for c in convs] == [sms["id"]], convs


def test_on_whatsapp_a_reminder_is_an_approved_template_and_the_patient_confirms(client, sess):
    """CLINIC-DAY step 4: the 24-hour window has closed (or never opened), so the reminder leaves
    as the service's approved template, its parameters filled like the text; the patient's "1"
    on WhatsApp confirms and is thanked in the window it opens."""
    t = sess.admin
    sent_ok = (200, {"Content-Type": "application/json"},
               json.dumps({"messaging_product": "whatsapp", "messages": [{"id": "wamid.REM1"}]}))
    with crm.Receiver([sent_ok]) as graph:
        cfg = crm.whatsapp_config(api_base_url=graph.url(""))
        wa = crm.create_channel(client, t, type="whatsapp", config=cfg)
        cal = crm.create_calendar(client, t, name="Dra. Ana", time_zone=ZONE, slot_step_minutes=5,
                                  working_hours=crm.every_day(("00:00", "24:00")))
        tpl = {"name": "lembrete_consulta", "language": "pt_BR",
               "parameters": ["{{contact.first_name}}", "{{appointment.start_local}}"]}
        svc = crm.create_service(client, t, [cal["id"]], name="Check-up", reminders=[
            {"before_minutes": 1440, "channel_id": wa["id"], "text": TEMPLATE, "template": tpl}])
        assert svc["reminders"][0]["template"] == tpl, svc
        phone = crm.unique_phone()
        patient = crm.create_contact(client, t, first_name="Bia", phone=phone)["id"]
        start = slot_after(30)
        appt = crm.booked(client, t, patient, svc["id"], cal["id"], rfc3339(start))
        [req] = graph.wait_for(1, TIMEOUT)
        assert req.json["to"] == phone[1:] and req.json["type"] == "template", req.describe()
        assert req.json["template"]["name"] == "lembrete_consulta", req.describe()
        params = [p["text"] for c in req.json["template"]["components"] for p in c["parameters"]]
        assert params == ["Bia", local(start)], req.describe()
        # The patient answers on WhatsApp.
        [conv] = crm.list_all(client, t, crm.CONVERSATIONS, {"contact_id": patient})
        body = json.dumps({"object": "whatsapp_business_account", "entry": [{"id": "W", "changes": [
            {"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"phone_number_id": cfg["phone_number_id"]},
                "contacts": [{"profile": {"name": "Bia"}, "wa_id": phone[1:]}],
                "messages": [{"from": phone[1:], "id": crm.unique("wamid.IN"),
                              "timestamp": str(int(time.time())), "type": "text",
                              "text": {"body": "1"}}]}}]}]}).encode()
        sig = "sha256=" + hmac.new(cfg["app_secret"].encode(), body, hashlib.sha256).hexdigest()
        resp = client.request("POST", f"/api/v1/channels/{wa['id']}/whatsapp/webhook", raw=body,
                              headers={"Content-Type": "application/json",
                                       "X-Hub-Signature-256": sig})
        assert crm.assert_json_response(resp, 200)["messages"][0]["conversation_id"] == conv["id"]
        assert crm.eventually(lambda: crm.assert_json_response(client.get(
            crm.appointment_url(appt["id"]), token=t), 200)["status"] == "confirmed",
                              timeout=TIMEOUT)
        thanks = graph.wait_for(2, TIMEOUT)[1]
        assert thanks.json["type"] == "text" and "confirm" in thanks.json["text"]["body"], \
            thanks.describe()
    # A template goes on a WhatsApp channel only.
    api = crm.create_channel(client, t, type="api", webhook_secret=SECRET)
    crm.assert_validation_locs(client.post("/api/v1/services", {
        "name": "X", "duration_minutes": 30, "calendar_ids": [cal["id"]],
        "reminders": [{"before_minutes": 60, "channel_id": api["id"], "text": "x",
                       "template": tpl}]}, token=t), ("body", "reminders", 0, "template"))


def test_a_reminder_due_while_down_goes_out_once_across_kills(server, cli_env, database):
    s = crm.tenant_session(server.client(), cli_env)
    t = s.admin
    client = server.client()
    with crm.Receiver([200]) as rcv:
        chan, ack, cal, svc = clinic(client, t, rcv, reminders=False)
        appt = crm.booked(client, t, ack["contact_id"], svc["id"], cal["id"],
                          rfc3339(slot_after(30)))
        server.kill()
        # While carecrm is down the service gains a reminder that is due at once.
        database.query( "UPDATE services SET reminders = '[{\"before_minutes\": 1440, "
                 f"\"channel_id\": {chan['id']}, \"text\": \"Lembrete\"}}]' WHERE id = {svc['id']}")
        server.start()
        client = server.client()
        # Nobody asks for the tenant: the sweeper wakes its schedule actor.
        assert wait_texts(rcv, 1) == ["Lembrete"]
        # Killed once the provider's acceptance is recorded (a kill between the two would send
        # the queued message again, with the same webhook-id: delivery is at least once).
        row = crm.sql_rows(database, "SELECT message_id FROM appointment_reminders WHERE "
                           f"appointment_id = {appt['id']}")[0]
        crm.wait_message(client, t, ack["conversation_id"], row["message_id"], ("sent",))
        server.kill()
        server.start()
        client = server.client()  # the access token outlives a restart
        # The tenant's schedule is loaded again and ticks: still nothing more is sent.
        crm.assert_json_response(client.get(crm.appointment_url(appt["id"]), token=t), 200)
        time.sleep(3)
        assert texts(rcv) == ["Lembrete"], texts(rcv)
    rows = crm.sql_rows(database, "SELECT status, message_id FROM appointment_reminders WHERE "
                        f"appointment_id = {appt['id']}")
    assert len(rows) == 1 and rows[0]["status"] == "sent" and rows[0]["message_id"], rows

