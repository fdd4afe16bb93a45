"""FHIR R4 Patient (issue "Health-data compliance" item 3, docs/compliance.md "FHIR R4"). An
EHR or a lab system reads the clinic's contacts as FHIR R4 Patient resources and creates them
from Patients. Every resource carecrm emits here is validated against HL7's official FHIR R4
JSON schema (fhir.schema.json from the pinned npm package in tests/fhir, installed by the
scripts; never retyped)."""
import functools
import json
import os
import secrets
import urllib.parse

import jsonschema
import pytest

import crm

SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "..", "fhir", "node_modules", "@asymmetrik",
                           "fhir-json-schema-validator", "fhir.schema.json")
FHIR = "/api/v1/fhir/Patient"
FHIR_JSON = "application/fhir+json"


@functools.lru_cache(maxsize=1)
def validator() -> jsonschema.Draft6Validator:
    with open(SCHEMA_PATH) as f:
        schema = json.load(f)
    assert schema["id"] == "http://hl7.org/fhir/json-schema/4.0", schema["id"]
    return jsonschema.Draft6Validator(schema)


def assert_fhir(resp: crm.Response, status: int) -> dict:
    """`status`, application/fhir+json, and a body valid against the FHIR R4 schema."""
    assert resp.status == status, resp.describe()
    assert (resp.header("Content-Type") or "").startswith(FHIR_JSON), resp.describe()
    body = json.loads(resp.body)
    errors = sorted(validator().iter_errors(body), key=lambda e: list(e.absolute_path))
    assert not errors, "not a valid FHIR R4 resource: " + "; ".join(
        f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors[:5])
    return body


@pytest.fixture(scope="module")
def clinic(client, admin_token) -> dict:
    """Custom fields gender and birth_date, and a patient holding them."""
    crm.create_field(client, admin_token, "contact", name="gender", field_type="text")
    crm.create_field(client, admin_token, "contact", name="birth_date", field_type="date")
    phone = crm.unique_phone()
    contact = crm.create_contact(client, admin_token, first_name="Ana Clara", last_name="Souza",
                                 email=crm.unique_email("ana"), phone=phone,
                                 custom_fields={"gender": "female", "birth_date": "1990-04-02"})
    return contact


def test_a_contact_reads_as_a_valid_patient(client, admin_token, clinic, tenant):
    p = assert_fhir(client.get(f"{FHIR}/{clinic['id']}", token=admin_token), 200)
    assert p["resourceType"] == "Patient" and p["id"] == str(clinic["id"]), p
    assert p["identifier"] == [{"use": "usual",
                                "system": f"urn:carecrm:tenant:{tenant.tenant_id}:contact",
                                "value": str(clinic["id"])}], p
    assert p["name"] == [{"use": "official", "text": "Ana Clara Souza", "family": "Souza",
                          "given": ["Ana Clara"]}], p
    assert {"system": "phone", "value": clinic["phone"]} in p["telecom"], p
    assert {"system": "email", "value": clinic["email"]} in p["telecom"], p
    assert p["gender"] == "female" and p["birthDate"] == "1990-04-02", p
    stored = crm.get_contact(client, admin_token, clinic["id"])
    assert p["active"] is True and p["meta"]["lastUpdated"] == stored["updated_at"], (p, stored)


def test_a_minimal_contact_is_a_valid_patient_too(client, admin_token):
    c = crm.create_contact(client, admin_token, first_name="X")
    p = assert_fhir(client.get(f"{FHIR}/{c['id']}", token=admin_token), 200)
    assert p["name"] == [{"use": "official", "text": "X", "given": ["X"]}], p
    assert "telecom" not in p and "gender" not in p and "birthDate" not in p, p


def test_unknown_and_foreign_patients_are_not_found(client, admin_token, cli_env):
    crm.assert_error(client.get(f"{FHIR}/{crm.NOWHERE_ID}", token=admin_token), 404, "NOT_FOUND")
    other = crm.tenant_session(client, cli_env)
    c = crm.create_contact(client, other.admin, first_name="Elsewhere")
    resp = client.get(f"{FHIR}/{c['id']}", token=admin_token)
    assert resp.status in (403, 404), resp.describe()
    assert b"Elsewhere" not in resp.body
    crm.assert_error(client.get(f"{FHIR}/{c['id']}"), 401, "INVALID_CREDENTIALS")


def test_search_returns_a_valid_searchset_bundle(client, admin_token, clinic, tenant):
    digits = "".join(ch for ch in clinic["phone"] if ch.isdigit())
    for query in ("name=ana", "name=SOUZA", "name=clara", f"phone={digits}",
                  f"identifier=urn:carecrm:tenant:{tenant.tenant_id}:contact|{clinic['id']}",
                  f"identifier={clinic['id']}", f"_id={clinic['id']}",
                  f"email={clinic['email'].upper()}"):
        b = assert_fhir(client.get(f"{FHIR}?{query}", token=admin_token), 200)
        assert b["resourceType"] == "Bundle" and b["type"] == "searchset", b
        ids = [e["resource"]["id"] for e in b["entry"]]
        assert str(clinic["id"]) in ids, (query, b)
        assert all(e["search"]["mode"] == "match" and
                   e["fullUrl"].endswith(f"/api/v1/fhir/Patient/{e['resource']['id']}")
                   for e in b["entry"]), b
    for query in ("name=zzzz-nobody", "identifier=urn:other:system|1", "phone=000",
                  f"identifier={crm.NOWHERE_ID}"):
        b = assert_fhir(client.get(f"{FHIR}?{query}", token=admin_token), 200)
        assert b["total"] == 0 and b.get("entry", []) == [], (query, b)


def test_search_pages_with_count_and_offset(client, admin_token):
    # A name with a space and an ampersand: the next links must keep the query encoded.
    tag = "Pager" + secrets.token_hex(3) + " & Co"
    made = [crm.create_contact(client, admin_token, first_name=tag, last_name=str(i))["id"]
            for i in range(5)]
    name = urllib.parse.quote(tag, safe="")
    first = assert_fhir(client.get(f"{FHIR}?name={name}&_count=2", token=admin_token), 200)
    assert first["total"] == 5 and len(first["entry"]) == 2, first
    nxt = [l["url"] for l in first["link"] if l["relation"] == "next"]
    assert nxt, first
    seen = [e["resource"]["id"] for e in first["entry"]]
    path = nxt[0][nxt[0].index("/api/v1/"):]
    while path:
        page = assert_fhir(client.get(path, token=admin_token), 200)
        seen += [e["resource"]["id"] for e in page["entry"]]
        links = [l["url"] for l in page["link"] if l["relation"] == "next"]
        path = links[0][links[0].index("/api/v1/"):] if links else None
    assert seen == [str(i) for i in made], seen


@pytest.mark.parametrize("query, loc", [
    ("family=x", ("query", "family")),
    ("_count=0", ("query", "_count")),
    ("_count=201", ("query", "_count")),
    ("name=", ("query", "name")),
    ("phone=abc", ("query", "phone")),
])
def test_bad_search_parameters_are_422(client, admin_token, query, loc):
    crm.assert_validation_locs(client.get(f"{FHIR}?{query}", token=admin_token), loc)


def test_a_patient_posted_becomes_a_contact(client, admin_token):
    email = crm.unique_email("fhir")
    patient = {"resourceType": "Patient", "active": True,
               "name": [{"use": "nickname", "given": ["Bia"]},
                        {"use": "official", "family": "Lima", "given": ["Beatriz", "M"]}],
               "telecom": [{"system": "email", "value": email},
                           {"system": "phone", "value": "+5521999990001"}],
               "gender": "female", "birthDate": "1985-12-31"}
    resp = client.post(FHIR, patient, token=admin_token)
    p = assert_fhir(resp, 201)
    assert resp.header("Location") == f"{FHIR}/{p['id']}", resp.describe()
    c = crm.get_contact(client, admin_token, int(p["id"]))
    assert c["first_name"] == "Beatriz" and c["last_name"] == "Lima", c
    assert c["email"] == email and c["phone"] == "+5521999990001", c
    assert c["custom_fields"] == {"gender": "female", "birth_date": "1985-12-31"}, c
    assert p["gender"] == "female" and p["birthDate"] == "1985-12-31", p


@pytest.mark.parametrize("patient, loc", [
    ({"resourceType": "Observation"}, ("body", "resourceType")),
    ({"resourceType": "Patient"}, ("body", "name", 0, "given")),
    ({"resourceType": "Patient", "name": [{"family": "OnlyFamily"}]},
     ("body", "name", 0, "given")),
    ({"resourceType": "Patient", "name": [{"given": ["A"]}],
      "telecom": [{"system": "email", "value": "not-an-email"}]}, ("body", "email")),
])
def test_a_patient_that_cannot_be_a_contact_is_422_and_stores_nothing(client, admin_token,
                                                                      patient, loc):
    before = crm.list_total(client, admin_token)
    crm.assert_validation_locs(client.post(FHIR, patient, token=admin_token), loc)
    assert crm.list_total(client, admin_token) == before


def test_a_viewer_reads_but_cannot_create(client, cli_env):
    s = crm.tenant_session(client, cli_env, ("viewer",))
    c = crm.create_contact(client, s.admin, first_name="Vi")
    assert_fhir(client.get(f"{FHIR}/{c['id']}", token=s.tokens["viewer"]), 200)
    crm.assert_error(client.post(FHIR, {"resourceType": "Patient", "name": [{"given": ["V"]}]},
                                 token=s.tokens["viewer"]), 403, "INSUFFICIENT_PERMISSIONS")
