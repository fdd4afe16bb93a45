"""Secrets at rest (issue "Hardening" item 6, docs/operations.md "Secrets at rest"). A copy of
the database (a backup, a replica, a support dump) gives away no provider token, signing secret
or API key: they are sealed with a key from configuration, and a channel's inbound secret is
kept as a keyed hash. Keys rotate with `carecrm secrets rotate`; a server never starts unable to
open what is stored. Whoever may edit a channel or an agent cannot send its stored secret to an
address of their own, and http_request header values are write-only."""
import base64
import os
import secrets
import subprocess

import pytest

import crm

SECRET = "chan-secret-" + secrets.token_hex(10)
SIGNING = "sign-secret-" + secrets.token_hex(10)
WF_SECRET = "wf-secret-" + secrets.token_hex(10)
SUB_SECRET = "sub-secret-" + secrets.token_hex(10)
HEADER = "Bearer header-secret-" + secrets.token_hex(10)
API_KEY = "sk-provider-" + secrets.token_hex(12)
SMS_TOKEN = "sms-secret-" + secrets.token_hex(10)
TWILIO_TOKEN = "twilio-secret-" + secrets.token_hex(10)

# Receivers listen on 127.0.0.1.
SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}
TABLES = ("channels", "workflows", "workflow_runs", "webhook_subscriptions", "ai_agents")


def new_key(key_id: str) -> str:
    return f"{key_id}:{base64.b64encode(os.urandom(32)).decode()}"


def dump(db: crm.Database) -> str:
    """Every row of every table that holds secrets, as text."""
    return "\n".join(db.query(f"SELECT row_to_json(t)::text FROM {t} t") for t in TABLES)


def store_everything(client: crm.Client, token: str) -> dict:
    """One of each secret the API takes; returns what was made."""
    bot = crm.bot_token()
    made = {"bot": bot}
    made["telegram"] = crm.create_channel(client, token, type="telegram", webhook_secret=SECRET,
                                          config={"bot_token": bot})
    made["api"] = crm.create_channel(client, token, type="api", webhook_secret=SECRET,
                                     config={"outbound_url": "https://out.example.test/m",
                                             "signing_secret": SIGNING})
    made["mail"] = crm.create_channel(client, token, type="email",
                                      config=crm.email_config(smtp_password=SMS_TOKEN))
    made["sms"] = crm.create_channel(client, token, type="sms",
                                     config={"account_sid": "AC" + "0" * 32,
                                             "from_number": "+15005550006",
                                             "auth_token": TWILIO_TOKEN})
    made["workflow"] = crm.create_workflow(
        client, token, trigger_type="manual", webhook_secret=WF_SECRET,
        actions=[{"type": "http_request",
                  "params": {"url": crm.closed_port_url(), "headers": {"Authorization": HEADER}}}])
    made["run"] = crm.wait_run(client, token, crm.start_run(client, token, made["workflow"]["id"]))
    made["subscription"] = crm.create_subscription(client, token, url="https://hooks.example.test/x",
                                                   secret=SUB_SECRET)
    made["agent"] = crm.create_agent(client, token, provider="openai_compatible", model="m-1",
                                     base_url="https://llm.example.test/v1", api_key=API_KEY)
    return made


def assert_nothing_in_plaintext(db: crm.Database, *plain: str) -> None:
    text = dump(db)
    for value in plain:
        assert value not in text, f"{value!r} is stored in plaintext"


def inbound_status(client: crm.Client, channel_id, secret: str) -> int:
    """The answer to an inbound message with `secret`: 401 wrong secret; 422 (an empty body)
    means the secret was right."""
    return crm.post_channel_webhook(client, channel_id, secret, {}).status


def secrets_cli(env: dict, verb: str) -> dict:
    return crm.run_json_cli(["secrets", verb], env)


def test_no_secret_is_stored_in_plaintext_and_each_still_works(client, admin_token, database):
    made = store_everything(client, admin_token)
    assert_nothing_in_plaintext(database, made["bot"], SECRET, SIGNING, SMS_TOKEN, TWILIO_TOKEN,
                               WF_SECRET,
                                HEADER, SUB_SECRET, API_KEY)
    rows = crm.sql_rows(database, "SELECT webhook_secret, config FROM channels WHERE id = "
                                  f"{made['telegram']['id']}")
    assert rows[0]["webhook_secret"].startswith("kh1:test1:"), rows
    assert rows[0]["config"]["bot_token"].startswith("sb1:test1:"), rows
    # The inbound secret is compared against its hash; the API shows no secret anywhere.
    assert inbound_status(client, made["api"]["id"], SECRET) == 422
    assert inbound_status(client, made["api"]["id"], SECRET + "x") == 401
    assert made["telegram"]["config"] == {"has_bot_token": True}
    assert made["mail"]["config"] == {**crm.email_config(), "has_smtp_password": True,
                                      "has_inbound_signing_key": False}
    assert made["sms"]["config"] == {"account_sid": "AC" + "0" * 32, "from_number": "+15005550006",
                                     "has_auth_token": True}
    # The http_request header was sent (the step failed on the closed port, not before it),
    # and neither the workflow nor the run shows its value.
    step = made["run"]["steps"][0]
    assert step["params"]["headers"] == {"Authorization": None}, made["run"]
    assert made["workflow"]["actions"][0]["params"]["headers"] == {"Authorization": None}


def test_a_sealed_value_opens_after_a_restart(database, redis_url, cli_env):
    """Stored sealed, served opened: a new server reads the workflow's header and secret back
    and sends them."""
    tenant = crm.create_tenant(cli_env)
    server = crm.start_server(database.url, redis_url, SERVER_ENV, label="carecrm[sealed-restart]")
    try:
        c = server.client()
        t = crm.login(c, tenant.admin_email, tenant.admin_password)["access_token"]
        with crm.Receiver([200, 200]) as rcv:
            wf = crm.create_workflow(c, t, trigger_type="manual", webhook_secret=WF_SECRET,
                                     actions=[{"type": "http_request", "params": {
                                         "url": rcv.url("/h"), "headers": {"X-Key": HEADER}}}])
            server.stop(check=True)
            server = crm.start_server(database.url, redis_url, SERVER_ENV,
                                      label="carecrm[sealed-restart-2]")
            c = server.client()
            t = crm.login(c, tenant.admin_email, tenant.admin_password)["access_token"]
            run = crm.wait_run(c, t, crm.start_run(c, t, wf["id"]))
            req = rcv.wait_for(1, 20)[0]
        assert run["status"] == "succeeded", run
        assert req.header("X-Key") == HEADER, req.describe()
        assert crm.verify_standard_webhook(WF_SECRET, req.headers, req.body), req.describe()
    finally:
        server.kill()
        server.cleanup()


def test_a_null_header_value_is_refused_not_stored(client, admin_token):
    """Header values come back as null: a client sending the workflow back as it read it must
    be told to send the value again, never store null or lose the header."""
    wf = crm.create_workflow(client, admin_token, trigger_type="manual", actions=[
        {"type": "http_request", "params": {"url": "https://example.test/h",
                                            "headers": {"X-Key": HEADER}}}])
    resp = client.patch(crm.workflow_url(wf["id"]), {"actions": wf["actions"]},
                        token=admin_token)
    crm.assert_validation(resp, (("body", "actions", 0, "params", "headers", "X-Key"),
                                 "string_type"))
    assert crm.get_workflow(client, admin_token, wf["id"]) == wf


def test_an_agent_at_a_new_address_needs_its_api_key_again(client, admin_token):
    """The API key travels to base_url with every request."""
    agent = crm.create_agent(client, admin_token, provider="openai_compatible", model="m-1",
                             base_url="https://llm.example.test/v1", api_key=API_KEY)
    url = crm.agent_url(agent["id"])
    resp = client.patch(url, {"base_url": "https://evil.example.test/v1"}, token=admin_token)
    crm.assert_validation(resp, (("body", "api_key"), "value_error"))
    assert crm.get_agent(client, admin_token, agent["id"]) == agent
    # The same address, or a new one with the key, is fine.
    crm.assert_json_response(client.patch(url, {"base_url": "https://llm.example.test/v1",
                                                "name": "Renamed"}, token=admin_token), 200)
    body = crm.assert_json_response(client.patch(
        url, {"base_url": "https://llm2.example.test/v1", "api_key": API_KEY + "2"},
        token=admin_token), 200)
    assert body["base_url"] == "https://llm2.example.test/v1" and body["has_api_key"], body


# ---- plaintext from before, rotation, missing keys --------------------------------------------


@pytest.fixture()
def own_db(pg_dsn, redis_url):
    """A database of its own: these tests start servers with other keys."""
    db = crm.Database(pg_dsn)
    env = crm.server_env(db.url, redis_url)
    crm.migrate(env)
    yield db, env
    db.drop()


def serve_exit(env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    """`carecrm serve` expected to refuse to start: its exit."""
    return subprocess.run([crm.carecrm_bin(), "serve", "--listen", f"127.0.0.1:{crm.free_port()}",
                           "--metrics-listen", f"127.0.0.1:{crm.free_port()}"],
                          env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_plaintext_written_before_sealing_is_sealed_at_start(own_db, redis_url):
    db, env = own_db
    tenant = crm.create_tenant(env)
    server = crm.start_server(db.url, redis_url, label="carecrm[legacy]")
    try:
        c = server.client()
        t = crm.login(c, tenant.admin_email, tenant.admin_password)["access_token"]
        made = store_everything(c, t)
        server.stop(check=True)
        # What a database from before sealing holds: the same secrets in plaintext.
        legacy = "legacy-secret-" + secrets.token_hex(8)
        db.query(f"UPDATE channels SET webhook_secret = '{legacy}' WHERE id = {made['api']['id']};"
                 f"UPDATE channels SET config = jsonb_set(config, '{{bot_token}}',"
                 f" '\"{made['bot']}\"') WHERE id = {made['telegram']['id']};"
                 f"UPDATE ai_agents SET api_key = '{API_KEY}';"
                 f"UPDATE webhook_subscriptions SET secret = '{SUB_SECRET}';"
                 "UPDATE secrets_at_rest SET plaintext_sealed_at = NULL")
        assert legacy in dump(db)
        server = crm.start_server(db.url, redis_url, label="carecrm[legacy-2]")
        assert_nothing_in_plaintext(db, legacy, made["bot"], API_KEY, SUB_SECRET)
        status = secrets_cli(env, "status")
        assert status["plaintext"] == 0 and set(status["sealed"]) == {"test1"}, status
        c = server.client()
        assert inbound_status(c, made["api"]["id"], legacy) == 422
        assert inbound_status(c, made["api"]["id"], SECRET) == 401
    finally:
        server.kill()
        server.cleanup()


def test_rotation_moves_every_secret_to_the_new_key(own_db, redis_url):
    db, env = own_db
    k1, k2, k3 = new_key("k1"), new_key("k2"), new_key("k3")
    only = lambda *keys: {"CARECRM_SECRET_KEYS": ",".join(keys)}  # noqa: E731
    tenant = crm.create_tenant(env)
    server = crm.start_server(db.url, redis_url, only(k1), label="carecrm[k1]")
    try:
        c = server.client()
        t = crm.login(c, tenant.admin_email, tenant.admin_password)["access_token"]
        made = store_everything(c, t)
        server.stop(check=True)
        before = secrets_cli(crm.with_override(env, only(k1)), "status")
        assert set(before["sealed"]) == {"k1"} and before["hashed"] == {"k1": 2}, before

        # The new key first, the old one still listed: rotate.
        both = crm.with_override(env, only(k2, k1))
        rotated = secrets_cli(both, "rotate")
        assert rotated["resealed"] == sum(before["sealed"].values()), rotated
        assert rotated["hashes_left"] == 2 and rotated["sealed"] == {"k2": rotated["resealed"]}
        assert rotated["hashed"] == {"k1": 2} and rotated["unknown_keys"] == [], rotated

        # An inbound secret moves to k2 the next time it is presented.
        server = crm.start_server(db.url, redis_url, only(k2, k1), label="carecrm[k2,k1]")
        c = server.client()
        for ch in (made["telegram"], made["api"]):
            assert inbound_status(c, ch["id"], SECRET) != 401
        status = crm.eventually(lambda: (s := secrets_cli(both, "status"))["hashed"] == {"k2": 2}
                                and s, timeout=20, interval=0.5)
        assert status, "the inbound secrets were not hashed again under k2"
        server.stop(check=True)

        # k1 retired: everything still opens and matches.
        server = crm.start_server(db.url, redis_url, only(k2), label="carecrm[k2]")
        c = server.client()
        t = crm.login(c, tenant.admin_email, tenant.admin_password)["access_token"]
        assert inbound_status(c, made["api"]["id"], SECRET) == 422
        assert inbound_status(c, made["api"]["id"], SIGNING) == 401
        run = crm.wait_run(c, t, crm.start_run(c, t, made["workflow"]["id"]))
        assert run["steps"] and run["steps"][0]["type"] == "http_request", run
        assert crm.get_agent(c, t, made["agent"]["id"])["has_api_key"] is True
        server.stop(check=True)

        # A server without the key its data is sealed with does not start.
        r = serve_exit(crm.with_override(env, only(k3)))
        assert r.returncode == 2 and "k2" in r.stderr, (r.returncode, r.stderr[-2000:])
        assert k2.split(":")[1] not in r.stderr
    finally:
        server.kill()
        server.cleanup()


def test_serve_refuses_to_start_without_keys(own_db):
    _, env = own_db
    env = {k: v for k, v in env.items() if k != "CARECRM_SECRET_KEYS"}
    r = serve_exit(env)
    assert r.returncode == 2 and "CARECRM_SECRET_KEYS" in r.stderr, (r.returncode, r.stderr)
    r = serve_exit(dict(env, CARECRM_SECRET_KEYS="k1:c2hvcnQ="))
    assert r.returncode == 2 and "32 bytes" in r.stderr, (r.returncode, r.stderr)
