"""appointment.* events (contract §10, docs/appointments.md "Events"): each booking, reschedule,
cancellation, confirmation, no-show and completion is written to the outbox in its own
transaction (none while no workflow or subscription listens) and reaches webhook subscriptions
and workflows; a workflow on appointment.booked
tags the patient, and a trigger's calendar_id filters which bookings start it."""
import crm

SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}
MONDAY = "2030-01-07"
TIMEOUT = 20.0


def ts(local: str) -> str:
    return f"{local}:00.000000Z"


def clinic(client, t):
    cal = crm.create_calendar(client, t)
    svc = crm.create_service(client, t, [cal["id"]])
    return cal, svc, crm.create_contact(client, t)["id"]


def test_each_change_reaches_a_subscription_with_the_appointment(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    t = s.admin
    cal, svc, contact = clinic(client, t)
    with crm.Receiver([200]) as rcv:
        crm.create_subscription(client, t, url=rcv.url(), events=[
            "appointment.booked", "appointment.rescheduled", "appointment.confirmed",
            "appointment.cancelled", "appointment.completed", "appointment.no_show"],
                                secret="s" * 24)
        appt = crm.booked(client, t, contact, svc["id"], cal["id"], ts(f"{MONDAY}T08:00"))
        url = crm.appointment_url(appt["id"])
        crm.assert_json_response(client.patch(url, {"status": "confirmed"}, token=t), 200)
        crm.assert_json_response(client.post(crm.appointment_url(appt["id"], "reschedule"), {
            "start": ts(f"{MONDAY}T09:00")}, token=t), 200)
        # Arriving, and a change of notes, emit nothing.
        crm.assert_json_response(client.patch(url, {"status": "arrived", "notes": "early"},
                                               token=t), 200)
        crm.assert_json_response(client.patch(url, {"status": "completed"}, token=t), 200)
        other = crm.booked(client, t, contact, svc["id"], cal["id"], ts(f"{MONDAY}T10:00"))
        crm.assert_json_response(client.post(crm.appointment_url(other["id"], "cancel"), {
            "reason": "fever"}, token=t), 200)
        got = rcv.wait_for(6, TIMEOUT)
    # Deliveries go out concurrently and may arrive in any order (docs/automation.md); their ids
    # (webhook-id msg_<delivery id>) follow the changes' order.
    got.sort(key=lambda r: int(r.header("webhook-id").rsplit("_", 1)[-1]))
    bodies = [r.json for r in got]
    assert [b["type"] for b in bodies] == [
        "appointment.booked", "appointment.confirmed", "appointment.rescheduled",
        "appointment.completed", "appointment.booked", "appointment.cancelled"], bodies
    for b in bodies:
        assert b["data"]["contact_id"] == contact and b["data"]["tenant_id"] == \
            s.tenant.tenant_id, b
    moved = bodies[2]["data"]
    assert (moved["appointment_id"], moved["appointment"]["start"], moved["previous_start"],
            moved["previous_calendar_id"]) == (appt["id"], ts(f"{MONDAY}T09:00"),
                                               ts(f"{MONDAY}T08:00"), cal["id"]), moved
    assert bodies[5]["data"]["appointment"]["cancel_reason"] == "fever", bodies[5]


def test_nothing_is_written_while_nobody_listens_and_a_new_listener_hears_the_next(
        client, cli_env, database):
    s = crm.tenant_session(client, cli_env)
    t = s.admin
    cal, svc, contact = clinic(client, t)
    quiet = crm.booked(client, t, contact, svc["id"], cal["id"], ts(f"{MONDAY}T08:00"))
    crm.assert_json_response(client.patch(crm.appointment_url(quiet["id"]),
                                          {"status": "confirmed"}, token=t), 200)
    events = ("SELECT count(*) AS n FROM outbox WHERE tenant_id = "
              f"{s.tenant.tenant_id} AND event LIKE 'appointment.%'")
    assert crm.sql_rows(database, events)[0]["n"] == 0
    with crm.Receiver([200]) as rcv:
        crm.create_subscription(client, t, url=rcv.url(), events=["appointment.booked"],
                                secret="s" * 24)
        heard = crm.booked(client, t, contact, svc["id"], cal["id"], ts(f"{MONDAY}T09:00"))
        [got] = rcv.wait_for(1, TIMEOUT)
    assert (got.json["type"], got.json["data"]["appointment_id"]) == (
        "appointment.booked", heard["id"]), got.json
    assert crm.sql_rows(database, events)[0]["n"] == 1


def test_a_workflow_on_booking_tags_the_patient_of_its_calendar_only(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    t = s.admin
    cal, svc, contact = clinic(client, t)
    room = crm.create_calendar(client, t)
    crm.assert_json_response(client.patch(crm.service_url(svc["id"]), {
        "calendar_ids": [cal["id"], room["id"]]}, token=t), 200)
    wf = crm.create_workflow(client, t, trigger_type="appointment.booked",
                             trigger_config={"calendar_id": cal["id"]},
                             actions=[{"type": "add_tag", "params": {"tag": "booked"}}])
    elsewhere = crm.create_contact(client, t)["id"]
    crm.booked(client, t, elsewhere, svc["id"], room["id"], ts(f"{MONDAY}T08:00"))
    crm.booked(client, t, contact, svc["id"], cal["id"], ts(f"{MONDAY}T08:00"))
    runs = crm.wait_runs(client, t, wf["id"], 1, timeout=TIMEOUT)
    assert crm.eventually(lambda: "booked" in crm.get_contact(client, t, contact)["tags"],
                          timeout=TIMEOUT), runs
    assert "booked" not in crm.get_contact(client, t, elsewhere)["tags"]
    assert len(crm.wait_runs(client, t, wf["id"], 1, timeout=TIMEOUT)) == 1  # the room's: none
    crm.assert_validation_locs(client.post(crm.WORKFLOWS, {
        "name": "x", "trigger_type": "appointment.cancelled",
        "trigger_config": {"pipeline_id": 1}}, token=t), ("body", "trigger_config", "pipeline_id"))
