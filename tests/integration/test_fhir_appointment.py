"""FHIR R4 Appointment (contract §10, docs/appointments.md "FHIR"): GET /fhir/Appointment/{id}
and the searchset of GET /fhir/Appointment?patient=&date=, every answer valid against HL7's R4
JSON schema (the pinned npm package in tests/fhir, as for Patient); reads and searches audited
on the patients' records; another tenant's appointment is 403."""
import crm
from test_fhir import assert_fhir

FHIR = "/api/v1/fhir/Appointment"


def ts(local: str) -> str:
    return f"{local}:00.000000Z"


def test_appointments_read_and_search_as_fhir(client, sess, sess_b):
    t = sess.admin
    cal = crm.create_calendar(client, t, name="Dr. Ana Souza")
    svc = crm.create_service(client, t, [cal["id"]], name="Check-up", duration_minutes=45)
    ana, bruno = (crm.create_contact(client, t)["id"] for _ in range(2))
    first = crm.booked(client, t, ana, svc["id"], cal["id"], ts("2030-01-07T08:00"),
                       notes="fasting")
    second = crm.booked(client, t, ana, svc["id"], cal["id"], ts("2030-01-08T09:00"))
    third = crm.booked(client, t, bruno, svc["id"], cal["id"], ts("2030-01-07T10:00"))
    crm.assert_json_response(client.patch(crm.appointment_url(first["id"]),
                                          {"status": "confirmed"}, token=t), 200)
    crm.assert_json_response(client.post(crm.appointment_url(second["id"], "cancel"),
                                         {"reason": "travel"}, token=t), 200)

    a = assert_fhir(client.get(f"{FHIR}/{first['id']}", token=sess.tokens["viewer"]), 200)
    assert (a["resourceType"], a["id"], a["status"], a["start"], a["end"], a["minutesDuration"],
            a["comment"], a["serviceType"][0]["text"]) == (
        "Appointment", str(first["id"]), "booked", ts("2030-01-07T08:00"),
        ts("2030-01-07T08:45"), 45, "fasting", "Check-up"), a
    patient, practitioner = a["participant"]
    assert (patient["actor"]["reference"], patient["status"]) == (f"Patient/{ana}", "accepted")
    assert practitioner["actor"]["display"] == "Dr. Ana Souza", a
    cancelled = assert_fhir(client.get(f"{FHIR}/{second['id']}", token=t), 200)
    assert (cancelled["status"], cancelled["cancelationReason"]["text"]) == ("cancelled",
                                                                             "travel"), cancelled

    def ids(query):
        b = assert_fhir(client.get(f"{FHIR}?{query}", token=t), 200)
        assert b["resourceType"] == "Bundle" and b["type"] == "searchset", b
        assert all(e["fullUrl"].endswith(f"/api/v1/fhir/Appointment/{e['resource']['id']}")
                   for e in b["entry"]), b
        return [int(e["resource"]["id"]) for e in b["entry"]]

    assert ids(f"patient={ana}") == [first["id"], second["id"]]
    assert ids(f"patient=Patient/{ana}&date=2030-01-08") == [second["id"]]
    assert ids(f"patient={ana}&date=ge2030-01-08") == [second["id"]]
    assert ids(f"patient={ana}&date=lt2030-01-08") == [first["id"]]
    assert ids(f"patient={bruno}&date=ge2030-01-07&date=le2030-01-07") == [third["id"]]
    assert ids(f"patient={bruno}&date=ge2030-01-08&date=le2030-01-09") == []
    assert ids(f"patient={ana}&date=gt2030-01-08") == []
    paged = assert_fhir(client.get(f"{FHIR}?patient={ana}&_count=1", token=t), 200)
    assert paged["total"] == 2 and len(paged["entry"]) == 1, paged
    assert any(link["relation"] == "next" for link in paged["link"]), paged
    for query, loc in [("patient=abc", "patient"), ("date=tomorrow", "date"),
                       ("status=booked", "status"), ("patient=", "patient")]:
        crm.assert_validation_locs(client.get(f"{FHIR}?{query}", token=t), ("query", loc))
    # Another tenant's appointment, and one of nobody.
    crm.assert_error(client.get(f"{FHIR}/{first['id']}", token=sess_b.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.get(f"{FHIR}/{crm.NOWHERE_ID}", token=t), 404, "NOT_FOUND")
    assert ids(f"patient={ana}") == [first["id"], second["id"]]

    # Audited as reads of the patients' records.
    def rows():
        return [r for r in crm.audit_rows(client, t, resource="contact", limit=100)
                if r["action"].startswith("fhir_") and "appointment" in r["action"]]

    assert crm.eventually(lambda: any(r["action"] == "fhir_read_appointment" and
                                      r["resource_id"] == ana for r in rows()), timeout=5), rows()
    assert any(r["action"] == "fhir_search_appointments" and ana in (r["ids"] or [])
               for r in rows()), rows()
