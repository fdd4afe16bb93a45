"""AI agents and their knowledge (contract §8, docs/ai.md "Who may do what", "Agents",
"Knowledge"): the admin-only agent CRUD with every field rule (422 with its loc), the
write-only api_key (has_api_key; the key in no response), PUT/PATCH changing only the fields
sent, DELETE taking documents and replies along, the list with its paging and filter, two active
auto-reply agents on one channel (409); knowledge documents from text and from question/answer
CSV (shape, kind, bytes, passages), their limits (exactly 1 MiB accepted, one byte more 422;
the knowledge routes take a 12 MiB body, for a PDF's base64, others keep 1 MiB), PUT replacing and DELETE removing a
document from retrieval; roles (viewer and agent read nothing; a manager reads and writes
knowledge but not agents); tenant isolation (403) and unknown ids (404); the SSRF guard on
base_url; and the index rebuilt from Postgres after a restart.

This module's server does NOT allow private outbound addresses: a loopback base_url must be
refused by the SSRF guard. Tests that count agents use a tenant of their own (`fresh`)."""
import json
import secrets

import pytest

import crm
import fake_llm

SERVER_ENV = {}

AGENTS = crm.AI_AGENTS
NOWHERE_ID = crm.NOWHERE_ID
MISSING = crm.MISSING
UPDATE_METHODS = ["PUT", "PATCH"]
KEY = "sk-agents-" + secrets.token_hex(20)
BASE_URL = "https://llm.example.test/v1"
MIB = 1024 * 1024
PARKING_Q = "Where can patients park?"
PARKING_FACT = "Rua Augusta, level 2"


@pytest.fixture
def fresh(client, cli_env) -> crm.TenantSession:
    return crm.tenant_session(client, cli_env)


# ---- helpers --------------------------------------------------------------------------------


def url(agent_id) -> str:
    return crm.agent_url(agent_id)


def total(client, token, params=None) -> int:
    return crm.list_total(client, token, AGENTS, params)


def no_key_in(resp, *keys) -> None:
    for key in keys or (KEY,):
        assert key.encode() not in resp.body, f"the api_key leaked: {resp.describe()}"


def rejected_at(resp, *prefixes) -> None:
    """422 whose every item's loc starts with one of `prefixes`, each reported at least once."""
    locs = [tuple(i["loc"]) for i in crm.validation_items(resp)]
    for loc in locs:
        assert any(loc[:len(p)] == tuple(p) for p in prefixes), \
            f"unexpected loc {loc} (want under {prefixes}): {resp.describe()}"
    for p in prefixes:
        assert any(loc[:len(p)] == tuple(p) for loc in locs), \
            f"nothing reported under {p}: {resp.describe()}"


def check_422(resp, expected) -> None:
    """expected: [(loc, type), ...] exact; [loc, ...] exact locs; ("under", loc, ...) prefixes."""
    if expected and expected[0] == "under":
        rejected_at(resp, *expected[1:])
    elif isinstance(expected[0][0], tuple):
        crm.assert_validation(resp, *expected)
    else:
        crm.assert_validation_locs(resp, *expected)


def documents(client, token, agent_id) -> list[dict]:
    items = crm.list_all(client, token, crm.knowledge_url(agent_id))
    for item in items:
        crm.assert_document(item, agent_id=agent_id)
    return items


def cites(answer: dict, document_id) -> bool:
    return any(p["document_id"] == document_id for p in answer["passages"])


def assert_counts_match_documents(client, token, agent_id) -> dict:
    """The agent's document_count and passage_count agree with its documents."""
    agent = crm.get_agent(client, token, agent_id)
    docs = documents(client, token, agent_id)
    assert agent["document_count"] == len(docs), (agent, docs)
    assert agent["passage_count"] == sum(d["passage_count"] for d in docs), (agent, docs)
    return agent


@pytest.fixture(scope="module")
def inactive_user(client, admin) -> dict:
    user, _, _ = crm.create_user(client, admin, "agent")
    crm.assert_no_content(client.delete(f"/api/v1/users/{user['id']}", token=admin))
    return user


# ---- create and read ------------------------------------------------------------------------


def test_create_with_only_a_name_has_the_documented_defaults(client, admin):
    resp = client.post(AGENTS, {"name": "Front desk"}, token=admin)
    created = crm.assert_json_response(resp, 201)
    crm.assert_agent(created, name="Front desk", instructions="", provider="builtin",
                     model=None, base_url=None, has_api_key=False, channel_ids=[],
                     auto_reply=False, handoff_keywords=[], reply_language="auto",
                     emergency_message=None, handoff_assignee_id=None, stream=False,
                     is_active=True, document_count=0, passage_count=0)
    assert resp.header("Location") == url(created["id"]), resp.describe()
    assert crm.get_agent(client, admin, created["id"]) == created


def test_create_with_every_field_returns_them_without_the_key(client, sess):
    admin = sess.admin
    chan = crm.create_channel(client, admin)
    body = {"name": "Sol assistant", "instructions": "You are the assistant of Clinica Sol.",
            "provider": "openai_compatible", "model": "clinic-model-1", "base_url": BASE_URL,
            "api_key": KEY, "channel_ids": [chan["id"]], "auto_reply": True,
            "handoff_keywords": ["refund", "speak to a human"], "reply_language": "pt",
            "emergency_message": "Ligue 192 agora.",
            "handoff_assignee_id": sess.users["manager"]["id"], "stream": True,
            "is_active": True}
    resp = client.post(AGENTS, body, token=admin)
    created = crm.assert_json_response(resp, 201)
    expected = {k: v for k, v in body.items() if k != "api_key"}
    crm.assert_agent(created, **expected, has_api_key=True, document_count=0, passage_count=0)
    no_key_in(resp)
    got = client.get(url(created["id"]), token=admin)
    assert crm.assert_json_response(got, 200) == created
    no_key_in(got)
    listing = client.get(crm.with_query(AGENTS, {"per_page": 100}), token=admin)
    crm.assert_json_response(listing, 200)
    no_key_in(listing)
    assert created in crm.list_all(client, admin, AGENTS)


def test_name_is_trimmed(client, admin):
    created = crm.create_agent(client, admin, name="  Reception bot  ")
    assert created["name"].strip() == "Reception bot", created


LONG_URL = "https://llm.example.test/" + "p" * (2000 - len("https://llm.example.test/"))
ACCEPTED = [
    ("name 200", {"name": "n" * 200}),
    ("name 200 between spaces", {"name": "  " + "n" * 200 + "  "}),
    ("instructions 8000", {"instructions": "i" * 8000}),
    ("model 200", {"model": "m" * 200}),
    ("base_url 2000", {"base_url": LONG_URL}),
    ("http base_url", {"provider": "openai_compatible", "model": "m",
                       "base_url": "http://llm.example.test:8080/v1"}),
    ("api_key 1", {"api_key": "\u00a7"}),  # a character no agent field holds
    ("api_key 500", {"api_key": "k" * 500}),
    ("api_key null", {"api_key": None}),
    ("50 keywords of 100", {"handoff_keywords": [f"{i:03d}" + "k" * 97 for i in range(50)]}),
    ("keyword of 1", {"handoff_keywords": ["x"]}),
    ("emergency 1", {"emergency_message": "!"}),
    ("emergency 1000", {"emergency_message": "e" * 1000}),
    ("emergency null", {"emergency_message": None}),
    ("reply_language en", {"reply_language": "en"}),
    ("reply_language es", {"reply_language": "es"}),
    ("reply_language auto", {"reply_language": "auto"}),
    ("inactive", {"is_active": False}),
    ("auto_reply without channels", {"auto_reply": True}),
    ("assignee null", {"handoff_assignee_id": None}),
]


@pytest.mark.parametrize("body", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_values_at_the_limits_are_accepted(client, admin, body):
    body = dict(body)
    body.setdefault("name", crm.unique("limits"))
    created = crm.create_agent(client, admin, **body)
    for key, value in body.items():
        if key == "api_key":
            assert created["has_api_key"] is (value is not None), created
        elif key == "name":
            assert created["name"].strip() == value.strip(), created
        else:
            assert created[key] == value, f"{key}: {created}"


# ---- validation -----------------------------------------------------------------------------


def agent_body(**override) -> dict:
    return crm.with_override({"name": "Valid agent"}, override)


INVALID_AGENTS = [
    ("name missing", agent_body(name=MISSING), [(("body", "name"), "missing")]),
    ("name empty", agent_body(name=""), [(("body", "name"), "string_too_short")]),
    ("name blank", agent_body(name="   "), [(("body", "name"), "string_too_short")]),
    ("name 201", agent_body(name="n" * 201), [(("body", "name"), "string_too_long")]),
    ("name int", agent_body(name=5), [("body", "name")]),
    ("name null", agent_body(name=None), [("body", "name")]),
    ("instructions 8001", agent_body(instructions="i" * 8001),
     [(("body", "instructions"), "string_too_long")]),
    ("instructions int", agent_body(instructions=1), [("body", "instructions")]),
    ("provider unknown", agent_body(provider="gpt"), [(("body", "provider"), "enum")]),
    ("openai without model and base_url", agent_body(provider="openai_compatible"),
     [("body", "model"), ("body", "base_url")]),
    ("openai without base_url", agent_body(provider="openai_compatible", model="m"),
     [("body", "base_url")]),
    ("openai without model", agent_body(provider="openai_compatible", base_url=BASE_URL),
     [("body", "model")]),
    ("model empty", agent_body(model=""), [(("body", "model"), "string_too_short")]),
    ("model 201", agent_body(model="m" * 201), [(("body", "model"), "string_too_long")]),
    ("base_url ftp", agent_body(base_url="ftp://llm.example.test/v1"), [("body", "base_url")]),
    ("base_url not a url", agent_body(base_url="not a url"), [("body", "base_url")]),
    ("base_url without host", agent_body(base_url="https://"), [("body", "base_url")]),
    ("base_url 2001", agent_body(base_url=LONG_URL + "p"), [("body", "base_url")]),
    ("api_key empty", agent_body(api_key=""), [(("body", "api_key"), "string_too_short")]),
    ("api_key 501", agent_body(api_key="k" * 501), [(("body", "api_key"), "string_too_long")]),
    ("api_key int", agent_body(api_key=5), [("body", "api_key")]),
    ("channel_ids not a list", agent_body(channel_ids=1), [("body", "channel_ids")]),
    ("channel_ids of no channel", agent_body(channel_ids=[NOWHERE_ID]),
     [(("body", "channel_ids", 0), "value_error")]),
    ("channel_ids string item", agent_body(channel_ids=["x"]), [("body", "channel_ids", 0)]),
    ("auto_reply string", agent_body(auto_reply="perhaps"), [("body", "auto_reply")]),
    ("handoff_keywords string", agent_body(handoff_keywords="refund"),
     [("body", "handoff_keywords")]),
    ("handoff keyword empty", agent_body(handoff_keywords=[""]),
     [(("body", "handoff_keywords", 0), "string_too_short")]),
    ("handoff keyword 101", agent_body(handoff_keywords=["ok", "k" * 101]),
     [(("body", "handoff_keywords", 1), "string_too_long")]),
    ("handoff keyword int", agent_body(handoff_keywords=[5]), [("body", "handoff_keywords", 0)]),
    ("51 handoff keywords", agent_body(handoff_keywords=[f"kw{i}" for i in range(51)]),
     [("body", "handoff_keywords")]),
    ("reply_language fr", agent_body(reply_language="fr"),
     [(("body", "reply_language"), "enum")]),
    ("emergency empty", agent_body(emergency_message=""),
     [(("body", "emergency_message"), "string_too_short")]),
    ("emergency 1001", agent_body(emergency_message="e" * 1001),
     [(("body", "emergency_message"), "string_too_long")]),
    ("assignee of no user", agent_body(handoff_assignee_id=NOWHERE_ID),
     [("body", "handoff_assignee_id")]),
    ("assignee string", agent_body(handoff_assignee_id="me"), [("body", "handoff_assignee_id")]),
    ("stream string", agent_body(stream="perhaps"), [("body", "stream")]),
    ("is_active string", agent_body(is_active="perhaps"), [("body", "is_active")]),
    ("unknown key", agent_body(colour="red"), [(("body", "colour"), "extra_forbidden")]),
    ("id", agent_body(id=5), [(("body", "id"), "extra_forbidden")]),
    ("created_at", agent_body(created_at="2026-01-01T00:00:00.000000Z"),
     [(("body", "created_at"), "extra_forbidden")]),
    ("has_api_key", agent_body(has_api_key=True), [(("body", "has_api_key"), "extra_forbidden")]),
    ("passage_count", agent_body(passage_count=3),
     [(("body", "passage_count"), "extra_forbidden")]),
    ("every failure at once", agent_body(name="", provider="gpt", reply_language="fr",
                                         emergency_message="", colour=1),
     [(("body", "name"), "string_too_short"), (("body", "provider"), "enum"),
      (("body", "reply_language"), "enum"), (("body", "emergency_message"), "string_too_short"),
      (("body", "colour"), "extra_forbidden")]),
]


@pytest.mark.parametrize("body,expected", [c[1:] for c in INVALID_AGENTS],
                         ids=[c[0] for c in INVALID_AGENTS])
def test_invalid_agent_is_422_and_creates_nothing(client, admin, body, expected):
    before = total(client, admin)
    check_422(client.post(AGENTS, body, token=admin), expected)
    assert total(client, admin) == before


@pytest.mark.parametrize("raw", [b"{", b"not json", b"[1]", b"null", b""])
def test_body_that_is_not_a_json_object_is_422(client, admin, raw):
    before = total(client, admin)
    resp = client.request("POST", AGENTS, raw=raw, token=admin)
    if raw in (b"{", b"not json"):
        crm.assert_validation(resp, (("body",), "json_invalid"))
    else:  # JSON but not an object (or nothing): rejected at the body, however it is put
        rejected_at(resp, ("body",))
    assert total(client, admin) == before


def test_invalid_api_key_is_not_echoed_in_the_422(client, admin):
    long_key = KEY + "x" * 500
    resp = client.post(AGENTS, {"name": "Echo", "api_key": long_key}, token=admin)
    crm.assert_validation(resp, (("body", "api_key"), "string_too_long"))
    no_key_in(resp, KEY)


def test_channel_ids_must_be_channels_of_the_tenant(client, admin, sess_b):
    mine = crm.create_channel(client, admin)
    theirs = crm.create_channel(client, sess_b.admin)
    before = total(client, admin)
    crm.assert_validation(client.post(AGENTS, agent_body(channel_ids=[mine["id"], theirs["id"]]),
                                      token=admin), (("body", "channel_ids", 1), "value_error"))
    crm.assert_validation(client.post(AGENTS, agent_body(channel_ids=[theirs["id"]]),
                                      token=admin), (("body", "channel_ids", 0), "value_error"))
    rejected_at(client.post(AGENTS, agent_body(channel_ids=[mine["id"], mine["id"]]),
                            token=admin), ("body", "channel_ids"))
    many = [crm.create_channel(client, admin)["id"] for _ in range(3)]
    rejected_at(client.post(AGENTS, agent_body(channel_ids=many + [NOWHERE_ID - i
                                                                   for i in range(98)]),
                            token=admin), ("body", "channel_ids"))
    assert total(client, admin) == before
    # The same rules on update; nothing changes.
    agent = crm.create_agent(client, admin, channel_ids=[mine["id"]])
    for method in UPDATE_METHODS:
        crm.assert_validation(client.request(method, url(agent["id"]),
                                             {"channel_ids": [theirs["id"]]}, token=admin),
                              (("body", "channel_ids", 0), "value_error"))
    assert crm.get_agent(client, admin, agent["id"]) == agent
    # A channel list of 100 of the tenant's channels is accepted.
    hundred = [crm.create_channel(client, admin)["id"] for _ in range(97)] + many
    ok = crm.create_agent(client, admin, channel_ids=hundred)
    assert sorted(ok["channel_ids"]) == sorted(hundred), ok


def test_handoff_assignee_must_be_an_active_user_of_the_tenant(client, sess, sess_b,
                                                               inactive_user):
    admin = sess.admin
    for bad in (sess_b.tenant.admin_id, inactive_user["id"], NOWHERE_ID):
        crm.assert_validation_locs(client.post(AGENTS, agent_body(handoff_assignee_id=bad),
                                               token=admin), ("body", "handoff_assignee_id"))
    for role in ("viewer", "agent", "manager"):
        uid = sess.users[role]["id"]
        assert crm.create_agent(client, admin, handoff_assignee_id=uid)["handoff_assignee_id"] \
            == uid
    assert crm.create_agent(client, admin, handoff_assignee_id=sess.tenant.admin_id)[
        "handoff_assignee_id"] == sess.tenant.admin_id


# ---- the api_key is write-only --------------------------------------------------------------


def test_api_key_is_write_only_and_null_removes_it(client, admin):
    agent = crm.create_agent(client, admin, provider="openai_compatible", model="m",
                             base_url=BASE_URL, api_key=KEY)
    assert agent["has_api_key"] is True
    aid = agent["id"]
    for resp in (client.get(url(aid), token=admin),
                 client.get(crm.with_query(AGENTS, {"per_page": 100}), token=admin)):
        crm.assert_json_response(resp, 200)
        no_key_in(resp)
    # Updates without the key keep it.
    for method in UPDATE_METHODS:
        resp = client.request(method, url(aid), {"name": f"Renamed by {method}"}, token=admin)
        body = crm.assert_json_response(resp, 200)
        assert body["has_api_key"] is True, body
        no_key_in(resp)
    # A new key replaces it, unseen.
    other = "sk-other-" + secrets.token_hex(16)
    resp = client.patch(url(aid), {"api_key": other}, token=admin)
    assert crm.assert_json_response(resp, 200)["has_api_key"] is True
    no_key_in(resp, KEY, other)
    no_key_in(client.get(url(aid), token=admin), KEY, other)
    # null removes it.
    resp = client.patch(url(aid), {"api_key": None}, token=admin)
    assert crm.assert_json_response(resp, 200)["has_api_key"] is False
    assert crm.get_agent(client, admin, aid)["has_api_key"] is False


# ---- update ---------------------------------------------------------------------------------


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_update_changes_only_the_fields_sent(client, sess, method):
    admin = sess.admin
    chan = crm.create_channel(client, admin)
    agent = crm.create_agent(client, admin, name="Before", instructions="Be kind.",
                             channel_ids=[chan["id"]], handoff_keywords=["refund"],
                             emergency_message="Call 112.", reply_language="en")
    resp = client.request(method, url(agent["id"]), {"name": "After"}, token=admin)
    body = crm.assert_json_response(resp, 200)
    crm.assert_agent(body)
    assert body == dict(agent, name="After", updated_at=body["updated_at"]), body
    assert crm.get_agent(client, admin, agent["id"]) == body
    change = {"handoff_keywords": ["lawyer"], "reply_language": "es", "emergency_message": None,
              "channel_ids": [], "auto_reply": True, "stream": True, "is_active": False,
              "handoff_assignee_id": sess.users["agent"]["id"], "instructions": ""}
    resp = client.request(method, url(agent["id"]), change, token=admin)
    body2 = crm.assert_json_response(resp, 200)
    assert body2 == dict(body, **change, updated_at=body2["updated_at"]), body2
    assert body2["updated_at"] >= body["updated_at"]
    assert crm.get_agent(client, admin, agent["id"]) == body2


@pytest.mark.parametrize("method", UPDATE_METHODS)
def test_switching_to_openai_compatible_needs_model_and_base_url(client, admin, method):
    agent = crm.create_agent(client, admin)
    aid = agent["id"]
    rejected_at(client.request(method, url(aid), {"provider": "openai_compatible"}, token=admin),
                ("body", "model"), ("body", "base_url"))
    assert crm.get_agent(client, admin, aid) == agent
    body = crm.assert_json_response(client.request(method, url(aid), {
        "provider": "openai_compatible", "model": "m-2", "base_url": BASE_URL}, token=admin), 200)
    crm.assert_agent(body, provider="openai_compatible", model="m-2", base_url=BASE_URL)
    # Still required while the provider is openai_compatible.
    rejected_at(client.request(method, url(aid), {"model": None}, token=admin), ("body", "model"))
    assert crm.get_agent(client, admin, aid) == body


@pytest.mark.parametrize("method", UPDATE_METHODS)
@pytest.mark.parametrize("body,expected", [
    ({"name": ""}, [(("body", "name"), "string_too_short")]),
    ({"name": None}, [("body", "name")]),
    ({"provider": "gpt"}, [(("body", "provider"), "enum")]),
    ({"reply_language": "de"}, [(("body", "reply_language"), "enum")]),
    ({"channel_ids": [NOWHERE_ID]}, [(("body", "channel_ids", 0), "value_error")]),
    ({"handoff_keywords": [""]}, [(("body", "handoff_keywords", 0), "string_too_short")]),
    ({"api_key": ""}, [(("body", "api_key"), "string_too_short")]),
    ({"id": 1}, [(("body", "id"), "extra_forbidden")]),
    ({"name": "ok", "colour": "red"}, [(("body", "colour"), "extra_forbidden")]),
], ids=["name empty", "name null", "provider", "language", "channel", "keyword", "api_key",
        "id", "unknown key"])
def test_invalid_update_is_422_and_changes_nothing(client, admin, method, body, expected):
    agent = crm.create_agent(client, admin, api_key=KEY)
    check_422(client.request(method, url(agent["id"]), body, token=admin), expected)
    assert crm.get_agent(client, admin, agent["id"]) == agent


# ---- delete and list ------------------------------------------------------------------------


def test_delete_is_204_and_takes_documents_and_replies_along(client, admin):
    agent = crm.create_agent(client, admin)
    aid = agent["id"]
    doc = crm.add_document(client, admin, aid, "Parking", text=crm.CLINIC_DOCS[1][1])
    crm.assert_no_content(client.delete(url(aid), token=admin))
    for path in (url(aid), crm.knowledge_url(aid), crm.document_url(aid, doc["id"]),
                 crm.replies_url(aid)):
        crm.assert_error(client.get(path, token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.post(crm.chat_url(aid), {"message": PARKING_Q}, token=admin), 404,
                     "NOT_FOUND")
    crm.assert_error(client.delete(url(aid), token=admin), 404, "NOT_FOUND")
    assert aid not in [a["id"] for a in crm.list_all(client, admin, AGENTS)]


def test_list_is_paged_oldest_first_and_filters_is_active(client, fresh):
    t = fresh.admin
    agents = [crm.create_agent(client, t, name=f"a{i}", is_active=(i != 1)) for i in range(3)]
    ids = [a["id"] for a in agents]
    body = crm.list_page(client, t, AGENTS, {"per_page": 2})
    crm.assert_page(body, total=3, page=1, per_page=2)
    assert [a["id"] for a in body["items"]] == ids[:2], body
    for item in body["items"]:
        crm.assert_agent(item)
    body = crm.list_page(client, t, AGENTS, {"per_page": 2, "page": 2})
    crm.assert_page(body, total=3, page=2, per_page=2)
    assert [a["id"] for a in body["items"]] == ids[2:], body
    body = crm.list_page(client, t, AGENTS, {"per_page": 2, "page": 3})
    assert body["items"] == [] and body["total"] == 3, body
    assert [a["id"] for a in crm.list_all(client, t, AGENTS, {"is_active": "true"})] == \
        [ids[0], ids[2]]
    assert [a["id"] for a in crm.list_all(client, t, AGENTS, {"is_active": "false"})] == [ids[1]]
    # Items are the same shape as GET by id.
    assert crm.list_all(client, t, AGENTS)[0] == crm.get_agent(client, t, ids[0])


@pytest.mark.parametrize("params,loc", [
    ({"is_active": "perhaps"}, ("query", "is_active")),
    ({"page": 0}, ("query", "page")),
    ({"per_page": 101}, ("query", "per_page")),
    ({"per_page": "x"}, ("query", "per_page")),
])
def test_list_with_bad_query_is_422(client, admin, params, loc):
    crm.assert_validation_locs(client.get(crm.with_query(AGENTS, params), token=admin), loc)


# ---- one auto-reply agent per channel -------------------------------------------------------


def test_two_active_auto_reply_agents_may_not_serve_one_channel(client, fresh):
    t = fresh.admin
    ch, other = crm.create_channel(client, t), crm.create_channel(client, t)
    first = crm.create_agent(client, t, name="First", channel_ids=[ch["id"]], auto_reply=True)
    n = total(client, t)
    for channels in ([ch["id"]], [other["id"], ch["id"]]):
        crm.assert_error(client.post(AGENTS, agent_body(channel_ids=channels, auto_reply=True),
                                     token=t), 409, "CONFLICT")
    assert total(client, t) == n
    # Not auto-replying, or inactive: allowed beside it.
    quiet = crm.create_agent(client, t, name="Quiet", channel_ids=[ch["id"]])
    sleeping = crm.create_agent(client, t, name="Sleeping", channel_ids=[ch["id"]],
                                auto_reply=True, is_active=False)
    elsewhere = crm.create_agent(client, t, name="Elsewhere", channel_ids=[other["id"]],
                                 auto_reply=True)
    # ... but not switched on while the first one serves the channel.
    for agent, change in ((quiet, {"auto_reply": True}), (sleeping, {"is_active": True}),
                          (elsewhere, {"channel_ids": [other["id"], ch["id"]]})):
        for method in UPDATE_METHODS:
            crm.assert_error(client.request(method, url(agent["id"]), change, token=t), 409,
                             "CONFLICT")
        assert crm.get_agent(client, t, agent["id"]) == agent
    # Once the first stops serving it, another may.
    crm.assert_json_response(client.patch(url(first["id"]), {"is_active": False}, token=t), 200)
    crm.assert_json_response(client.patch(url(quiet["id"]), {"auto_reply": True}, token=t), 200)
    crm.assert_error(client.patch(url(first["id"]), {"is_active": True}, token=t), 409,
                     "CONFLICT")
    crm.assert_no_content(client.delete(url(quiet["id"]), token=t))
    crm.assert_json_response(client.patch(url(sleeping["id"]), {"is_active": True}, token=t), 200)


# ---- roles, tenants, unknown ids ------------------------------------------------------------

DOC_BODY = {"title": "Role test", "text": "The role test document has one sentence."}


def routes(agent_id, doc_id) -> dict:
    return {
        "list agents": ("GET", AGENTS, None),
        "get agent": ("GET", url(agent_id), None),
        "list knowledge": ("GET", crm.knowledge_url(agent_id), None),
        "get document": ("GET", crm.document_url(agent_id, doc_id), None),
        "replies": ("GET", crm.replies_url(agent_id), None),
        "create agent": ("POST", AGENTS, {"name": "Role test"}),
        "put agent": ("PUT", url(agent_id), {"name": "Role test"}),
        "patch agent": ("PATCH", url(agent_id), {"name": "Role test"}),
        "delete agent": ("DELETE", url(agent_id), None),
        "add document": ("POST", crm.knowledge_url(agent_id), DOC_BODY),
        "replace document": ("PUT", crm.document_url(agent_id, doc_id), DOC_BODY),
        "delete document": ("DELETE", crm.document_url(agent_id, doc_id), None),
        "chat": ("POST", crm.chat_url(agent_id), {"message": PARKING_Q}),
    }


READS = ["list agents", "get agent", "list knowledge", "get document", "replies"]
AGENT_WRITES = ["create agent", "put agent", "patch agent", "delete agent"]
KNOWLEDGE_WRITES = ["add document", "replace document", "delete document"]
ALL_ROUTES = READS + AGENT_WRITES + KNOWLEDGE_WRITES + ["chat"]
SUCCESS = {"create agent": 201, "add document": 201, "delete agent": 204,
           "delete document": 204}


def allowed(role: str, route: str) -> bool:
    if route in AGENT_WRITES:
        return role == "admin"
    return role in ("manager", "admin")


@pytest.fixture
def target(client, admin) -> dict:
    """An agent of tenant A with one document (parking) made for this test alone."""
    agent = crm.create_agent(client, admin, name=crm.unique("target"))
    doc = crm.add_document(client, admin, agent["id"], "Parking", text=crm.CLINIC_DOCS[1][1])
    return {"agent": crm.get_agent(client, admin, agent["id"]), "doc": doc}


def snapshot(client, token, target) -> tuple:
    aid, did = target["agent"]["id"], target["doc"]["id"]
    return (crm.assert_json_response(client.get(url(aid), token=token), 200),
            crm.assert_json_response(client.get(crm.document_url(aid, did), token=token), 200),
            total(client, token))


@pytest.mark.parametrize("route", ALL_ROUTES)
@pytest.mark.parametrize("role", ["viewer", "agent", "manager", "admin"])
def test_role_matrix(client, sess, target, role, route):
    method, path, body = routes(target["agent"]["id"], target["doc"]["id"])[route]
    before = snapshot(client, sess.admin, target)
    resp = client.request(method, path, body, token=sess.tokens[role])
    if not allowed(role, route):
        crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
        assert snapshot(client, sess.admin, target) == before, f"a refused {route} changed state"
        return
    want = SUCCESS.get(route, 200)
    if want == 204:
        crm.assert_no_content(resp)
    else:
        got = crm.assert_json_response(resp, want)
        if route in ("get agent", "put agent", "patch agent", "create agent"):
            crm.assert_agent(got)
        elif route in ("get document",):
            crm.assert_document(got, "text", id=target["doc"]["id"])
        elif route in ("add document", "replace document"):
            crm.assert_document(got, title="Role test")
        elif route == "chat":
            crm.assert_chat(got)
        else:
            crm.assert_page(got)


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_routes_without_token_are_401(client, target, route):
    method, path, body = routes(target["agent"]["id"], target["doc"]["id"])[route]
    crm.assert_error(client.request(method, path, body), 401, "INVALID_CREDENTIALS")


@pytest.mark.parametrize("route", [r for r in ALL_ROUTES if r not in ("list agents",
                                                                       "create agent")])
def test_another_tenants_agent_and_document_are_403_and_unchanged(client, admin, sess_b,
                                                                  target, route):
    method, path, body = routes(target["agent"]["id"], target["doc"]["id"])[route]
    before = snapshot(client, admin, target)
    crm.assert_error(client.request(method, path, body, token=sess_b.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert snapshot(client, admin, target) == before


def test_lists_show_only_the_tenants_agents(client, admin, sess_b, target):
    theirs = crm.create_agent(client, sess_b.admin, name="Tenant B agent")
    assert target["agent"]["id"] not in [a["id"] for a in crm.list_all(client, sess_b.admin,
                                                                        AGENTS)]
    assert theirs["id"] not in [a["id"] for a in crm.list_all(client, admin, AGENTS)]


def test_another_tenants_document_under_an_own_agent_is_403(client, admin, sess_b, target):
    theirs = crm.create_agent(client, sess_b.admin, name="Tenant B agent")
    doc_path = crm.document_url(theirs["id"], target["doc"]["id"])
    before = snapshot(client, admin, target)
    for method, body in (("GET", None), ("PUT", DOC_BODY), ("DELETE", None)):
        crm.assert_error(client.request(method, doc_path, body, token=sess_b.admin), 403,
                         "INSUFFICIENT_PERMISSIONS")
    assert snapshot(client, admin, target) == before


def test_a_document_under_another_agent_of_the_tenant_is_404(client, admin, target):
    other = crm.create_agent(client, admin)
    doc_path = crm.document_url(other["id"], target["doc"]["id"])
    before = snapshot(client, admin, target)
    for method, body in (("GET", None), ("PUT", DOC_BODY), ("DELETE", None)):
        crm.assert_error(client.request(method, doc_path, body, token=admin), 404, "NOT_FOUND")
    assert snapshot(client, admin, target) == before


@pytest.mark.parametrize("route", [r for r in ALL_ROUTES if r not in ("list agents",
                                                                       "create agent")])
def test_agent_of_no_tenant_is_404(client, admin, route):
    method, path, body = routes(NOWHERE_ID, NOWHERE_ID)[route]
    crm.assert_error(client.request(method, path, body, token=admin), 404, "NOT_FOUND")


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_document_of_no_tenant_is_404(client, admin, target, method):
    path = crm.document_url(target["agent"]["id"], NOWHERE_ID)
    crm.assert_error(client.request(method, path, DOC_BODY if method == "PUT" else None,
                                    token=admin), 404, "NOT_FOUND")


@pytest.mark.parametrize("path", [f"{AGENTS}/abc", f"{AGENTS}/abc/knowledge"])
def test_non_integer_agent_id_is_422_in_the_path(client, admin, path):
    items = crm.validation_items(client.get(path, token=admin))
    assert all(i["loc"][0] == "path" and i["type"] == "int_parsing" for i in items), items


# ---- knowledge: text and CSV ----------------------------------------------------------------


def test_text_document_is_201_and_cut_into_passages(client, admin):
    agent = crm.create_agent(client, admin)
    aid = agent["id"]
    text = ("Sentence one is here. Sentence two follows! Is this the third? Four. "
            "Five is the next one. Six comes now. Seven ends it.")
    resp = client.post(crm.knowledge_url(aid), {"title": "Seven sentences", "text": text},
                       token=admin)
    doc = crm.assert_json_response(resp, 201)
    crm.assert_document(doc, agent_id=aid, title="Seven sentences", kind="text",
                        bytes=len(text.encode()))
    assert resp.header("Location") == crm.document_url(aid, doc["id"]), resp.describe()
    # Passages of one to three sentences.
    assert 3 <= doc["passage_count"] <= 7, doc
    got = crm.assert_json_response(client.get(crm.document_url(aid, doc["id"]), token=admin), 200)
    crm.assert_document(got, "text")
    assert got["text"] == text, got
    assert {k: v for k, v in got.items() if k != "text"} == doc
    # UTF-8 is counted in bytes.
    pt = "A consulta custa 250 reais. Atendemos às sextas-feiras até as 18h."
    doc2 = crm.add_document(client, admin, aid, "Português", text=pt)
    assert doc2["bytes"] == len(pt.encode("utf-8")) and doc2["bytes"] > len(pt), doc2
    assert crm.assert_json_response(client.get(crm.document_url(aid, doc2["id"]), token=admin),
                                    200)["text"] == pt
    # The list: oldest first, without the text.
    assert documents(client, admin, aid) == [doc, doc2]
    agent = assert_counts_match_documents(client, admin, aid)
    assert agent["document_count"] == 2


def test_csv_document_gives_one_passage_per_question_and_answer(client, admin):
    agent = crm.create_agent(client, admin)
    aid = agent["id"]
    crm.add_clinic_docs(client, admin, aid)
    csv = ('question,answer\r\n'
           '"Is there wifi?","Yes, the wifi password is sunflower2024."\r\n'
           'Do you open on public holidays?,"No, we close on public holidays."\r\n'
           '"Can I pay by card, or only cash?","Cards and cash, both ""welcome""."\r\n')
    resp = client.post(crm.knowledge_url(aid), {"title": "FAQ", "csv": csv}, token=admin)
    doc = crm.assert_json_response(resp, 201)
    crm.assert_document(doc, agent_id=aid, title="FAQ", kind="qa", bytes=len(csv.encode()),
                        passage_count=3)
    got = crm.assert_json_response(client.get(crm.document_url(aid, doc["id"]), token=admin), 200)
    crm.assert_document(got, "csv", kind="qa")
    assert got["csv"] == csv, got
    # Without a header row every row is a pair.
    plain = "Do you sell gift vouchers?,No.\nIs the lift working?,\"Yes, since May.\"\n"
    doc2 = crm.add_document(client, admin, aid, "More", csv=plain)
    assert doc2["passage_count"] == 2 and doc2["kind"] == "qa", doc2
    assert_counts_match_documents(client, admin, aid)
    # A pair is found by its question, and answered with its text.
    answer = crm.chat(client, admin, aid, "Is there wifi?")
    assert "sunflower2024" in answer["answer"], answer
    assert answer["passages"][0]["document_id"] == doc["id"], answer
    assert answer["passages"][0]["title"] == "FAQ", answer
    crm.assert_grounded(answer["answer"], answer["passages"])


INVALID_DOCUMENTS = [
    ("title missing", {"text": "Some words here."}, [(("body", "title"), "missing")]),
    ("title empty", {"title": "", "text": "Some words here."},
     [(("body", "title"), "string_too_short")]),
    ("title 201", {"title": "t" * 201, "text": "Some words here."},
     [(("body", "title"), "string_too_long")]),
    ("text empty", {"title": "t", "text": ""}, [("body", "text")]),
    ("text blank", {"title": "t", "text": "   \n\t  \n"}, [("body", "text")]),
    ("text without a word", {"title": "t", "text": "... !!! ??? -- ,,"}, [("body", "text")]),
    ("text not a string", {"title": "t", "text": 5}, [("body", "text")]),
    ("csv empty", {"title": "t", "csv": ""}, [("body", "csv")]),
    ("csv blank", {"title": "t", "csv": "  \n  \n"}, ("under", ("body", "csv"))),
    ("csv with one column", {"title": "t", "csv": "question,answer\nOnly a question\n"},
     ("under", ("body", "csv"))),
    ("csv with three columns", {"title": "t", "csv": "a,b,c\n"}, ("under", ("body", "csv"))),
    ("csv with an empty answer", {"title": "t", "csv": "Is it open?,\n"},
     ("under", ("body", "csv"))),
    ("csv with a good and a bad row", {"title": "t", "csv": "Q1,A1\nQ2\n"},
     ("under", ("body", "csv"))),
    ("both text and csv", {"title": "t", "text": "Words here.", "csv": "Q,A\n"},
     ("under", ("body",))),
    ("neither text nor csv", {"title": "t"}, ("under", ("body",))),
    ("kind", {"title": "t", "text": "Words here.", "kind": "qa"},
     [(("body", "kind"), "extra_forbidden")]),
    ("unknown key", {"title": "t", "text": "Words here.", "colour": "red"},
     [(("body", "colour"), "extra_forbidden")]),
]


@pytest.mark.parametrize("body,expected", [c[1:] for c in INVALID_DOCUMENTS],
                         ids=[c[0] for c in INVALID_DOCUMENTS])
def test_invalid_document_is_422_and_stores_nothing(client, admin, target, body, expected):
    aid = target["agent"]["id"]
    before = documents(client, admin, aid)
    check_422(client.post(crm.knowledge_url(aid), body, token=admin), expected)
    assert documents(client, admin, aid) == before
    # PUT takes the same body: the document stays as it was.
    doc_before = crm.assert_json_response(
        client.get(crm.document_url(aid, target["doc"]["id"]), token=admin), 200)
    check_422(client.put(crm.document_url(aid, target["doc"]["id"]), body, token=admin),
              expected)
    assert crm.assert_json_response(client.get(crm.document_url(aid, target["doc"]["id"]),
                                               token=admin), 200) == doc_before


def test_document_body_that_is_not_json_is_422(client, admin, target):
    aid = target["agent"]["id"]
    crm.assert_validation(client.request("POST", crm.knowledge_url(aid), raw=b"{", token=admin),
                          (("body",), "json_invalid"))


WIFI_FACT = "The wifi password for patients is sunflower2024."


def one_mib_text() -> str:
    """Exactly 1,048,576 bytes of ASCII sentences with WIFI_FACT in the middle."""
    parts, size, i = [], 0, 0
    while size < MIB + 200:
        s = f"The hallway lamp number {i} was checked today and works well. "
        parts.append(s)
        size += len(s)
        i += 1
    text = "".join(parts)
    cut = text.index(". ", len(text) // 2) + 2
    text = (text[:cut] + WIFI_FACT + " " + text[cut:])[:MIB]
    assert len(text.encode()) == MIB
    return text


def test_one_mib_text_is_accepted_and_one_byte_more_is_422(client, admin):
    agent = crm.create_agent(client, admin)
    aid = agent["id"]
    crm.add_clinic_docs(client, admin, aid)
    text = one_mib_text()
    doc = crm.add_document(client, admin, aid, "Handbook", text=text)
    assert doc["bytes"] == MIB and doc["passage_count"] > 100, doc
    before = documents(client, admin, aid)
    # One byte more: over the document limit, yet under the knowledge routes' 12 MiB body.
    resp = client.post(crm.knowledge_url(aid), {"title": "Too big", "text": text + "."},
                       token=admin)
    crm.assert_validation_locs(resp, ("body", "text"))
    resp = client.put(crm.document_url(aid, doc["id"]), {"title": "Too big", "text": text + "."},
                      token=admin)
    crm.assert_validation_locs(resp, ("body", "text"))
    assert documents(client, admin, aid) == before
    # The fact in the middle of the big document is found.
    answer = crm.chat(client, admin, aid, "What is the wifi password?")
    assert "sunflower2024" in answer["answer"], answer
    assert cites(answer, doc["id"]) and answer["handoff"] is False, answer
    crm.assert_grounded(answer["answer"], answer["passages"])
    assert_counts_match_documents(client, admin, aid)


def test_csv_of_one_mib_and_one_byte_is_422(client, admin, target):
    aid = target["agent"]["id"]
    row_len = len("Is row 0000000 a question?,Yes it is.\n")
    csv = "".join(f"Is row {i:07d} a question?,Yes it is.\n"
                  for i in range((MIB - 200) // row_len))
    head = "Is this the last question?,"
    csv += head + "y" * (MIB + 1 - len(csv) - len(head) - 1) + "\n"
    assert len(csv.encode()) == MIB + 1
    before = documents(client, admin, aid)
    rejected_at(client.post(crm.knowledge_url(aid), {"title": "Big", "csv": csv}, token=admin),
                ("body", "csv"))
    assert documents(client, admin, aid) == before


def post_big(client, path, body: dict, token: str) -> crm.Response:
    """POST a body over a limit: the server may answer 413 and stop reading before the body
    is all sent; the answer is read all the same."""
    import http.client
    data = json.dumps(body).encode()
    conn = http.client.HTTPConnection(client.host, client.port, timeout=client.timeout)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(len(data)))
        conn.putheader("Authorization", f"Bearer {token}")
        conn.endheaders()
        try:
            conn.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return crm.read_response(conn.getresponse())
    finally:
        conn.close()


def test_bodies_over_the_route_limits_are_413(client, admin, target):
    aid = target["agent"]["id"]
    before = total(client, admin)
    crm.assert_error(post_big(client, AGENTS, {"name": "Huge", "instructions": "i" * (MIB + 10)},
                              admin), 413, "PAYLOAD_TOO_LARGE")
    crm.assert_error(post_big(client, crm.chat_url(aid), {"message": "m" * (MIB + 10)}, admin),
                     413, "PAYLOAD_TOO_LARGE")
    docs = documents(client, admin, aid)
    crm.assert_error(post_big(client, crm.knowledge_url(aid),
                              {"title": "Huge", "text": "word " * (12 * MIB // 5 + 10)}, admin),
                     413, "PAYLOAD_TOO_LARGE")
    assert total(client, admin) == before and documents(client, admin, aid) == docs


# ---- knowledge: replace, delete, list -------------------------------------------------------


def test_put_replaces_the_title_and_the_content(client, admin):
    agent = crm.create_agent(client, admin)
    aid = agent["id"]
    crm.add_clinic_docs(client, admin, aid)
    doc = crm.add_document(client, admin, aid, "Garden",
                           text="The rose garden behind the clinic is open to visitors on "
                                "Sundays.")
    q_old = "When is the rose garden open to visitors?"
    first = crm.chat(client, admin, aid, q_old)
    assert "Sundays" in first["answer"] and cites(first, doc["id"]), first
    new_text = "The reading library on the first floor lends novels to patients every Monday."
    resp = client.put(crm.document_url(aid, doc["id"]), {"title": "Library", "text": new_text},
                      token=admin)
    body = crm.assert_json_response(resp, 200)
    crm.assert_document(body, id=doc["id"], agent_id=aid, title="Library", kind="text",
                        bytes=len(new_text.encode()))
    got = crm.assert_json_response(client.get(crm.document_url(aid, doc["id"]), token=admin), 200)
    assert got["text"] == new_text and got["title"] == "Library", got
    old = crm.chat(client, admin, aid, q_old)
    assert not cites(old, doc["id"]) and "Sundays" not in old["answer"], old
    new = crm.chat(client, admin, aid, "Does the reading library lend novels?")
    assert "every Monday" in new["answer"] and cites(new, doc["id"]), new
    assert [p["title"] for p in new["passages"] if p["document_id"] == doc["id"]][0] == "Library"
    # A text document may become a question/answer one.
    csv = "Does the library lend comics?,\"Only on Fridays.\"\n"
    body = crm.assert_json_response(client.put(crm.document_url(aid, doc["id"]),
                                               {"title": "Library FAQ", "csv": csv},
                                               token=admin), 200)
    crm.assert_document(body, id=doc["id"], kind="qa", passage_count=1)
    got = crm.assert_json_response(client.get(crm.document_url(aid, doc["id"]), token=admin), 200)
    crm.assert_document(got, "csv")
    assert got["csv"] == csv and "text" not in got, got
    gone = crm.chat(client, admin, aid, "Does the reading library lend novels?")
    assert "every Monday" not in gone["answer"], gone
    assert_counts_match_documents(client, admin, aid)


def test_delete_removes_the_document_from_retrieval(client, admin):
    agent = crm.create_agent(client, admin)
    aid = agent["id"]
    crm.add_clinic_docs(client, admin, aid)
    doc = crm.add_document(client, admin, aid, "Cat",
                           text="The clinic cat is called Pimenta and sleeps at the reception.")
    question = "What is the clinic cat called?"
    before = crm.chat(client, admin, aid, question)
    assert "Pimenta" in before["answer"] and cites(before, doc["id"]), before
    counts = crm.get_agent(client, admin, aid)
    crm.assert_no_content(client.delete(crm.document_url(aid, doc["id"]), token=admin))
    crm.assert_error(client.get(crm.document_url(aid, doc["id"]), token=admin), 404, "NOT_FOUND")
    crm.assert_error(client.delete(crm.document_url(aid, doc["id"]), token=admin), 404,
                     "NOT_FOUND")
    assert doc["id"] not in [d["id"] for d in documents(client, admin, aid)]
    after = crm.chat(client, admin, aid, question)
    assert not cites(after, doc["id"]) and "Pimenta" not in after["answer"], after
    agent = assert_counts_match_documents(client, admin, aid)
    assert agent["document_count"] == counts["document_count"] - 1, (counts, agent)
    assert agent["passage_count"] == counts["passage_count"] - doc["passage_count"]


def test_knowledge_list_is_paged_oldest_first_without_content(client, admin):
    agent = crm.create_agent(client, admin)
    aid = agent["id"]
    docs = [crm.add_document(client, admin, aid, f"d{i}", text=f"Document number {i} is here.")
            for i in range(3)]
    body = crm.list_page(client, admin, crm.knowledge_url(aid), {"per_page": 2})
    crm.assert_page(body, total=3, page=1, per_page=2)
    assert body["items"] == docs[:2], body
    body = crm.list_page(client, admin, crm.knowledge_url(aid), {"per_page": 2, "page": 2})
    assert body["items"] == docs[2:], body
    crm.assert_validation_locs(client.get(crm.knowledge_url(aid, {"per_page": 101}),
                                          token=admin), ("query", "per_page"))


# ---- the chat console -----------------------------------------------------------------------


@pytest.mark.parametrize("body,expected", [
    ({}, [(("body", "message"), "missing")]),
    ({"message": ""}, [(("body", "message"), "string_too_short")]),
    ({"message": "m" * 4097}, [(("body", "message"), "string_too_long")]),
    ({"message": 5}, [("body", "message")]),
    ({"message": "hi", "stream": True}, [(("body", "stream"), "extra_forbidden")]),
], ids=["missing", "empty", "4097", "int", "unknown key"])
def test_invalid_chat_is_422(client, admin, target, body, expected):
    check_422(client.post(crm.chat_url(target["agent"]["id"]), body, token=admin), expected)


def test_chat_of_4096_characters_is_answered(client, admin, target):
    crm.chat(client, admin, target["agent"]["id"], ("Where can patients park? " * 200)[:4096])


def test_loopback_base_url_is_refused_by_the_ssrf_guard(client, admin):
    """This server does not allow private destinations: the provider is never contacted and
    the console answers 200 with a provider_error hand-off, never a 5xx."""
    with fake_llm.FakeLLM([fake_llm.reply("I should never have been asked.")]) as llm:
        agent = crm.create_agent(client, admin, provider="openai_compatible", model="m",
                                 base_url=llm.base_url, api_key=KEY)
        crm.add_clinic_docs(client, admin, agent["id"])
        resp = client.post(crm.chat_url(agent["id"]), {"message": PARKING_Q}, token=admin)
        body = crm.assert_json_response(resp, 200)
        crm.assert_chat(body)
        assert body["handoff"] is True and body["handoff_reason"] == "provider_error", body
        assert body["provider"] == "openai_compatible", body
        assert "never have been asked" not in body["answer"], body
        no_key_in(resp)
        assert llm.requests == [], [r.describe() for r in llm.requests]


# ---- durability -----------------------------------------------------------------------------


def test_agents_and_their_index_survive_a_restart(pg_dsn, redis_url):
    """A server on a database of its own: stop it, start another, and the agents, documents
    and retrieval (rebuilt from Postgres) are as they were; a deleted document stays gone."""
    db = crm.Database(pg_dsn)
    first = second = None
    try:
        env = crm.server_env(db.url, redis_url)
        crm.migrate(env)
        first = crm.start_server(db.url, redis_url, label="carecrm[ai-restart-1]")
        c = first.client()
        s = crm.tenant_session(c, env)
        agent = crm.create_agent(c, s.admin, name="Durable", api_key=KEY,
                                 handoff_keywords=["refund"])
        aid = agent["id"]
        crm.add_clinic_docs(c, s.admin, aid)
        qa = crm.add_document(c, s.admin, aid, "FAQ",
                              csv='"Is there wifi?","Yes, the password is sunflower2024."\n')
        cat = crm.add_document(c, s.admin, aid, "Cat",
                               text="The clinic cat is called Pimenta and sleeps at the "
                                    "reception.")
        crm.assert_no_content(c.delete(crm.document_url(aid, cat["id"]), token=s.admin))
        questions = {PARKING_Q: PARKING_FACT,
                     "How much does a first consultation cost?": "250 reais",
                     "Is there wifi?": "sunflower2024"}

        def decisions(cl, token):
            out = {}
            for q in list(questions) + ["What is the clinic cat called?", "I want a refund"]:
                a = crm.chat(cl, token, aid, q)
                out[q] = (a["answer"], a["intent"], a["handoff"], a["handoff_reason"],
                          [(p["id"], p["document_id"], p["text"]) for p in a["passages"]])
            return out

        before = decisions(c, s.admin)
        for q, fact in questions.items():
            assert fact in before[q][0], before[q]
        assert before["Is there wifi?"][4][0][1] == qa["id"], before
        assert "Pimenta" not in before["What is the clinic cat called?"][0]
        assert before["I want a refund"][3] == "keyword", before
        agent_before = crm.get_agent(c, s.admin, aid)
        docs_before = documents(c, s.admin, aid)
        first.stop(check=True)

        second = crm.start_server(db.url, redis_url, label="carecrm[ai-restart-2]")
        c2 = second.client()
        token = crm.login(c2, s.tenant.admin_email, s.tenant.admin_password)["access_token"]
        assert crm.get_agent(c2, token, aid) == agent_before
        assert documents(c2, token, aid) == docs_before
        assert decisions(c2, token) == before
        crm.assert_error(c2.get(crm.document_url(aid, cat["id"]), token=token), 404, "NOT_FOUND")
        # And it keeps learning after the restart.
        later = crm.add_document(c2, token, aid, "Dog",
                                 text="The clinic dog is called Feijao and greets patients.")
        answer = crm.chat(c2, token, aid, "What is the clinic dog called?")
        assert "Feijao" in answer["answer"] and cites(answer, later["id"]), answer
        assert KEY not in second.stderr_text() and KEY not in first.stderr_text()
        second.stop(check=True)
    finally:
        for srv in (first, second):
            if srv is not None:
                srv.kill()
                srv.cleanup()
        db.drop()
