"""The OpenAPI document and the reference page (issue "The API described exactly, and carecrm
installed like a real service", item 1): Redocly's linter finds nothing, the document and the
routes served agree both ways, and GET /api/v1/docs renders the operations in Chromium."""
import json
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest

import crm

ROOT = pathlib.Path(__file__).resolve().parents[2]
REDOCLY = ROOT / "tests" / "openapi" / "node_modules" / ".bin" / "redocly"
DOC = "/api/v1/openapi.json"


@pytest.fixture(scope="module")
def doc(client):
    return crm.assert_json_response(client.get(DOC), 200)


def operations(doc):
    return [(method.upper(), path, op) for path, item in doc["paths"].items()
            for method, op in item.items()]


def test_redocly_finds_no_error_and_no_warning(doc):
    assert REDOCLY.exists(), "scripts/lib.sh ensure_test_tools installs tests/openapi"
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "openapi.json"
        path.write_text(json.dumps(doc))
        r = subprocess.run([str(REDOCLY), "lint", str(path), "--format=summary",
                            "--max-problems=1000"], capture_output=True, text=True, timeout=180,
                           cwd=tmp)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Your API description is valid" in out, out
    assert not re.search(r"^(error|warning)\s", out, re.M), out


def routes_in_the_source() -> set[tuple[str, str]]:
    """Every (method, path) the handlers register, read from the source (each r.add call), as an
    account independent of the router that generates the document."""
    verbs = {"get": "GET", "post": "POST", "put": "PUT", "patch": "PATCH", "del": "DELETE"}
    found = set()
    for f in list((ROOT / "http").glob("*.cpp")) + list((ROOT / "http" / "handlers").glob("*.cpp")):
        text = f.read_text()
        # Paths built from a named prefix: const std::string base = "/api/v1/...";
        names = dict(re.findall(r'const std::string (\w+) = "([^"]+)";', text))
        # r.add({verb::get, "/path", ...}) or r.add(wrapper({verb::get, "/path", ...})).
        calls = list(re.finditer(r"r\.add\(\s*(?:\w+\(\s*)?\{\s*(?:\.method\s*=\s*)?verb::(\w+),\s*"
                                 r'(?:\.path\s*=\s*)?((?:\w+\s*\+\s*)?"[^"]*"|\w+)', text))
        starts = re.findall(r"r\.add\(\s*(?:\w+\(\s*)?\{\s*(?:\.method|verb::)", text)
        assert len(calls) == len(starts), f"{f.name}: an r.add this test cannot read"
        # A route built field by field, then added: rt.method = verb::get; rt.path = "...";
        fields = re.findall(r'(\w+)\.method = verb::(\w+);\s*\1\.path = "([^"]+)";', text)
        moved = re.findall(r"r\.add\(std::move\(", text)
        assert len(fields) == len(moved), f"{f.name}: a route added this test cannot read"
        found.update((verbs[v], path) for _, v, path in fields)
        for m in calls:
            expr = m.group(2)
            prefix, _, literal = expr.rpartition("+")
            path = literal.strip().strip('"') if literal.strip().startswith('"') else ""
            name = (prefix or ("" if literal.strip().startswith('"') else literal)).strip()
            found.add((verbs[m.group(1)], names[name] + path if name else path))
    return found


def test_the_document_lists_every_route_served_and_nothing_else(client, doc):
    documented = {(m, p) for m, p, _ in operations(doc)}
    # The operations listener's routes (metrics, actors, health) are not the API's.
    source = {(m, p) for m, p in routes_in_the_source()
              if p.startswith("/api/") or p in ("/healthz", "/readyz")}
    assert documented == source, (sorted(documented - source), sorted(source - documented))
    # And each one is served: without credentials or a body, never an unknown route (404 with
    # detail "not found") nor a wrong method (405); and a method the document does not list
    # for a path is answered 405, its Allow header naming exactly the documented ones.
    for path, item in doc["paths"].items():
        concrete = re.sub(r"\{entity\}", "contact", re.sub(r"\{[a-z_]+\}", "1", path))
        other = next(m for m in ("PATCH", "PUT", "DELETE", "POST", "GET")
                     if m.lower() not in item)
        resp = client.request(other, concrete)
        assert resp.status == 405, (other, path, resp.describe())
        allow = {m.strip() for m in resp.header("Allow").split(",")}
        assert allow == {m.upper() for m in item}, (path, allow)
    for method, path, _ in operations(doc):
        concrete = re.sub(r"\{entity\}", "contact", re.sub(r"\{[a-z_]+\}", "1", path))
        resp = client.request(method, concrete,
                              raw=b"" if method in ("POST", "PUT", "PATCH") else None)
        assert resp.status != 405, (method, path, resp.describe())
        if resp.status == 404:
            assert resp.json["detail"] != "not found", (method, path, resp.describe())


def test_every_operation_says_how_it_is_authenticated_and_how_it_fails(doc):
    schemes = doc["components"]["securitySchemes"]
    for method, path, op in operations(doc):
        where = f"{method} {path}"
        assert re.fullmatch(r"[A-Za-z0-9]+", op["operationId"]), where
        assert op["tags"] and op["summary"], where
        names = {n for alternative in op["security"] for n in alternative}
        assert names <= set(schemes), where
        responses = op["responses"]
        for status in ("422", "429", "500", "503"):
            assert status in responses, where
        if names:
            assert "401" in responses, where
        if "bearerAuth" in names:
            assert "403" in responses, where
        if "{" in path:
            assert "404" in responses, where
    ids = [op["operationId"] for _, _, op in operations(doc)]
    assert len(ids) == len(set(ids))
    by_id = {op["operationId"]: (m, p, op) for m, p, op in operations(doc)}
    login = by_id["postAuthLogin"][2]
    assert login["security"] == [], login
    trigger = by_id["postWebhooksByWorkflowId"][2]
    assert {n for a in trigger["security"] for n in a} == {
        "xWebhookSecretHeader", "xWebhookSignatureHeader", "webhookSignatureHeader"}, trigger
    assert schemes["xWebhookSecretHeader"] == {
        "type": "apiKey", "in": "header", "name": "X-Webhook-Secret",
        "description": schemes["xWebhookSecretHeader"]["description"]}
    codes = set(doc["components"]["schemas"]["Error"]["properties"]["code"]["enum"])
    assert {"INVALID_CREDENTIALS", "NOT_FOUND", "RATE_LIMITED", "SERVICE_UNAVAILABLE"} <= codes


def test_error_answers_match_the_documents_error_schemas(client, doc, admin_token):
    """The error bodies the server gives are the shapes the document declares (the full check
    of every response body is the next step of the issue)."""
    import jsonschema  # Debian's python3-jsonschema (scripts/lib.sh)
    components = {"components": doc["components"]}

    def check(resp, name):
        schema = {"$ref": f"#/components/schemas/{name}", **components}
        jsonschema.validate(resp.json, schema)
    check(client.get("/api/v1/contacts"), "Error")                              # 401
    check(client.get("/api/v1/contacts/999999999", token=admin_token), "Error")  # 404
    check(client.post("/api/v1/contacts", {"first_name": ""}, token=admin_token),
          "ValidationError")                                                   # 422
    check(client.post("/api/v1/auth/login", {"email": "x"}), "ValidationError")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_the_reference_page_renders_the_operations_in_chromium(server, doc, tmp_path):
    browser = chromium()
    assert browser, "scripts/lib.sh installs Debian's chromium"
    url = f"http://{server.host}:{server.port}/api/v1/docs"
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
             "--virtual-time-budget=15000", "--window-size=1280,1600"]
    r = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    dom = r.stdout
    # Redoc has read the document and drawn an entry for the operations, by their summaries.
    summaries = [op["summary"] for _, _, op in operations(doc)]
    drawn = [s for s in summaries if s.replace("&", "&amp;") in dom]
    assert len(drawn) >= len(summaries) * 0.9, (len(drawn), len(summaries), dom[:2000])
    assert "carecrm API" in dom
    shot = tmp_path / "docs.png"
    r = subprocess.run(flags + [f"--screenshot={shot}", url], capture_output=True, text=True,
                       timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000, r.stderr[-2000:]
    (pathlib.Path(tempfile.gettempdir()) / "carecrm-docs.png").write_bytes(shot.read_bytes())


def test_answers_are_checked_against_the_documents_schemas(client, server, admin_token):
    """crm.Client checks every JSON answer against the schema the document declares for its
    operation and status: the users' and the sign-in's answers are declared, and one that
    drifted from its schema (a missing field, a field too many, a wrong type) is caught."""
    me = crm.assert_json_response(client.get("/api/v1/auth/me", token=admin_token), 200)
    doc = client.get(DOC).json
    user_schema = doc["components"]["schemas"]["User"]
    assert set(user_schema["required"]) == set(me), (user_schema, me)
    headers = client.get("/api/v1/auth/me", token=admin_token).headers
    for drifted in ({k: v for k, v in me.items() if k != "email"},
                    {**me, "nickname": "x"},
                    {**me, "is_active": "yes"}):
        fake = crm.Response(200, headers, drifted, json.dumps(drifted).encode())
        with pytest.raises(AssertionError, match="OpenAPI document does not allow"):
            crm.check_against_openapi(server.host, server.port, "GET", "/api/v1/auth/me", fake)
    crm.check_against_openapi(server.host, server.port, "GET", "/api/v1/auth/me",
                              crm.Response(200, headers, me, json.dumps(me).encode()))


def is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def test_every_operation_describes_its_bodies_and_parameters(doc):
    """Every request body and every success answer with a body names a component schema (or,
    for CSV, HTML and the like, its media type); every list declares its paging."""
    schemas = doc["components"]["schemas"]
    missing = []
    for method, path, op in operations(doc):
        where = f"{method} {path}"
        body = op.get("requestBody")
        if body:
            for media, content in body["content"].items():
                if is_json(media) and "$ref" not in content["schema"]:
                    missing.append(f"{where}: request body ({media}) has no schema")
        for status, answer in op["responses"].items():
            if not status.startswith("2") or status == "204":
                continue
            content = answer.get("content")
            if not content:
                missing.append(f"{where}: {status} answer has no body schema")
                continue
            for media, c in content.items():
                if is_json(media):
                    name = c["schema"].get("$ref", "").rsplit("/", 1)[-1]
                    if name not in schemas:
                        missing.append(f"{where}: {status} ({media}) names no component schema")
                    elif name.endswith("Page"):
                        params = {p["name"] for p in op.get("parameters", [])
                                  if p["in"] == "query"}
                        # A search sends its paging in its body (POST /contacts/search).
                        if body:
                            for c in body["content"].values():
                                ref = c["schema"].get("$ref", "").rsplit("/", 1)[-1]
                                params |= set(schemas.get(ref, {}).get("properties", {}))
                        if not {"page", "per_page"} <= params:
                            missing.append(f"{where}: a page without its paging parameters")
    assert not missing, "\n".join(missing)


def test_the_main_operations_carry_an_example_their_schema_accepts(doc):
    import jsonschema
    by_id = {op["operationId"]: op for _, _, op in operations(doc)}
    main = ["postAuthLogin", "postContacts", "postDeals", "postPipelines", "postWorkflows",
            "postChannels", "postConversationsByIdMessages", "postAiAgents", "postFhirPatient"]
    for op_id in main:
        content = by_id[op_id]["requestBody"]["content"]
        media, c = next(iter(content.items()))
        assert "example" in c, f"{op_id}: no example"
        schema = {**c["schema"], "components": doc["components"]}
        jsonschema.Draft202012Validator(schema).validate(c["example"])


def test_documented_query_parameters_are_the_ones_read(client, doc, admin_token):
    """Each documented integer or enum query parameter of a list is really read: a value outside
    its schema is refused with a 422 located at ("query", name)."""
    checked = 0
    for method, path, op in operations(doc):
        if method != "GET" or "{" in path or "bearerAuth" not in str(op["security"]):
            continue
        for p in op.get("parameters", []):
            if p["in"] != "query":
                continue
            s = p["schema"]
            if s.get("type") == "integer":
                bad = "x1"
            elif "enum" in s:
                bad = "no-such-value"
            else:
                continue
            r = client.get(f"{path}?{p['name']}={bad}", token=admin_token)
            assert r.status == 422, (path, p["name"], r.describe())
            locs = [tuple(d["loc"]) for d in r.json["detail"]]
            assert ("query", p["name"]) in locs, (path, p["name"], r.json)
            checked += 1
    assert checked >= 20, checked


def test_a_status_the_document_does_not_list_is_caught(server, admin_token):
    headers = {"Content-Type": "application/json"}
    teapot = crm.Response(418, headers, {"detail": "x", "code": "CONFLICT"}, b"{}")
    with pytest.raises(AssertionError, match="does not list"):
        crm.check_against_openapi(server.host, server.port, "GET", "/api/v1/auth/me", teapot)
