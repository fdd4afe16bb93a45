"""Two-factor sign-in for staff (issue 31, docs/operations.md "Two-factor sign-in"): TOTP
(RFC 6238) set up by each user with recovery codes, required per tenant by an admin. The codes
here are computed as an authenticator app computes them, from the secret the server showed."""
import base64
import hashlib
import hmac
import struct
import time
import urllib.parse

import crm

TOTP = "/api/v1/auth/totp"
LOGIN = "/api/v1/auth/login"


def code_at(secret_b32: str, t: float, step_offset: int = 0) -> str:
    key = base64.b32decode(secret_b32 + "=" * (-len(secret_b32) % 8))
    counter = int(t) // 30 + step_offset
    mac = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    value = struct.unpack(">I", mac[offset:offset + 4])[0] & 0x7FFFFFFF
    return f"{value % 1_000_000:06d}"


def fresh_code(secret_b32: str, used: set) -> str:
    """A code the server takes now and once: of a step within one of the current one (the
    previous step only while the next boundary is more than 5 s away) and later than every step
    in `used` (the server refuses a step not after the last one used). Three codes a moment, one
    more each 30 s."""
    for _ in range(70):
        now = time.time()
        now_step = int(now) // 30
        lowest = now_step - 1 if 30 - now % 30 > 5 else now_step
        step = max(max(used, default=-1) + 1, lowest)
        if step <= now_step + 1:
            used.add(step)
            return code_at(secret_b32, step * 30)
        time.sleep(1)
    raise AssertionError("no fresh code within 70 s")


def login(client, email, password, **extra):
    return client.post(LOGIN, {"email": email, "password": password} | extra)


def enroll(client, token) -> tuple[str, list[str], set]:
    setup = crm.assert_json_response(client.post(f"{TOTP}/setup", {}, token=token), 200)
    secret = setup["secret"]
    uri = urllib.parse.urlparse(setup["otpauth_uri"])
    assert uri.scheme == "otpauth" and uri.netloc == "totp", setup
    assert urllib.parse.parse_qs(uri.query)["secret"] == [secret], setup
    used: set = set()
    crm.assert_validation(client.post(f"{TOTP}/enable", {"code": "000000" if code_at(
        secret, time.time()) != "000000" else "111111"}, token=token),
        (("body", "code"), "value_error"))
    done = crm.assert_json_response(client.post(f"{TOTP}/enable", {
        "code": fresh_code(secret, used)}, token=token), 200)
    assert len(done["recovery_codes"]) == 10 and len(set(done["recovery_codes"])) == 10, done
    return secret, done["recovery_codes"], used


def test_a_user_with_totp_signs_in_with_a_code_once_or_a_recovery_code_once(
        client, sess, database):
    user, email, password = crm.create_user(client, sess.admin, "agent")
    token = crm.login(client, email, password)["access_token"]
    secret, recovery, used = enroll(client, token)
    status = crm.assert_json_response(client.get(TOTP, token=token), 200)
    assert (status["enabled"], status["recovery_codes_left"]) == (True, 10), status
    stored = database.query(f"SELECT secret FROM user_totp WHERE user_id = {user['id']}").strip()
    dump = crm.dump_database(database)
    assert stored.startswith("sb1:") and secret not in dump, stored
    assert not any(c.replace("-", "") in dump for c in recovery)

    # The password alone no longer signs in; it says what is missing.
    crm.assert_error(login(client, email, password), 401, "TOTP_REQUIRED")
    # A right code with a wrong password is refused, and the code is not spent by it.
    code = fresh_code(secret, used)
    crm.assert_error(login(client, email, "wrong-password-1", totp_code=code), 401,
                     "INVALID_CREDENTIALS")
    resp = login(client, email, password, totp_code=code)
    pair = crm.assert_json_response(resp, 200)
    crm.assert_json_response(client.get(crm.CONTACTS, token=pair["access_token"]), 200)
    # The same code again is a replay.
    crm.assert_error(login(client, email, password, totp_code=code), 401, "INVALID_CREDENTIALS")
    # A recovery code works once, written any way.
    rc = recovery[0]
    crm.assert_json_response(login(client, email, password, recovery_code=rc.upper()), 200)
    crm.assert_error(login(client, email, password, recovery_code=rc), 401,
                     "INVALID_CREDENTIALS")
    status = crm.assert_json_response(client.get(TOTP, token=token), 200)
    assert status["recovery_codes_left"] == 9, status
    rows = crm.audit_rows(client, sess.admin, resource="session", user_id=user["id"])
    actions = [r["action"] for r in rows]
    assert {"totp_setup", "totp_enable", "login_recovery_code"} <= set(actions), actions

    # Turned off with a code: the password alone signs in again.
    crm.assert_error(client.post(f"{TOTP}/setup", {}, token=token), 409, "CONFLICT")
    crm.assert_json_response(client.post(f"{TOTP}/disable", {}, token=token), 422)
    assert client.post(f"{TOTP}/disable", {"code": fresh_code(secret, used)},
                       token=token).status == 204
    crm.assert_json_response(login(client, email, password), 200)


def test_wrong_codes_count_as_failed_sign_ins(client, sess):
    _, email, password = crm.create_user(client, sess.admin, "viewer")
    token = crm.login(client, email, password)["access_token"]
    secret, _, used = enroll(client, token)
    right = {code_at(secret, time.time() + d) for d in (-30, 0, 30)}
    wrong = next(f"{n:06d}" for n in range(1000) if f"{n:06d}" not in right)
    statuses = [login(client, email, password, totp_code=wrong).status for _ in range(7)]
    assert statuses[:5] == [401] * 5 and 429 in statuses[5:], statuses


def test_a_tenant_that_requires_totp_lets_a_user_without_it_only_enroll(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    _, email, password = crm.create_user(client, s.admin, "manager")
    _, early_email, early_password = crm.create_user(client, s.admin, "viewer")
    early = crm.login(client, early_email, early_password)  # open before the requirement
    crm.assert_error(client.put(f"{TOTP}/policy", {"required": True},
                                token=crm.login(client, email, password)["access_token"]),
                     403, "INSUFFICIENT_PERMISSIONS")
    got = crm.assert_json_response(client.put(f"{TOTP}/policy", {"required": True},
                                              token=s.admin), 200)
    assert got == {"required": True}
    # A session open before: from its next refresh on, it may only enroll.
    again = crm.assert_json_response(client.post("/api/v1/auth/refresh", {
        "refresh_token": early["refresh_token"]}), 200)
    crm.assert_error(client.get(crm.CONTACTS, token=again["access_token"]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    limited = crm.login(client, email, password)["access_token"]
    crm.assert_error(client.get(crm.CONTACTS, token=limited), 403, "INSUFFICIENT_PERMISSIONS")
    crm.assert_json_response(client.get("/api/v1/auth/me", token=limited), 200)
    # Nor may it lift the requirement (an admin's stolen password must not either).
    admin_limited = crm.login(client, s.tenant.admin_email, s.tenant.admin_password)
    crm.assert_error(client.put(f"{TOTP}/policy", {"required": False},
                                token=admin_limited["access_token"]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    # Refreshing keeps it limited.
    refreshed = crm.assert_json_response(client.post("/api/v1/auth/refresh", {
        "refresh_token": admin_limited["refresh_token"]}), 200)
    crm.assert_error(client.get(crm.CONTACTS, token=refreshed["access_token"]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    secret, _, used = enroll(client, limited)
    full = crm.assert_json_response(login(client, email, password,
                                          totp_code=fresh_code(secret, used)), 200)
    crm.assert_json_response(client.get(crm.CONTACTS, token=full["access_token"]), 200)
    # An API key is no person: the requirement does not apply, and it cannot enroll.
    admin_full = crm.assert_json_response(client.get(f"{TOTP}/policy", token=s.admin), 200)
    assert admin_full == {"required": True}
    key = crm.assert_json_response(client.post("/api/v1/api-keys", {
        "name": "sync", "role": "viewer"}, token=s.admin), 201)["key"]
    crm.assert_json_response(client.get(crm.CONTACTS, token=key), 200)
    crm.assert_error(client.post(f"{TOTP}/setup", {}, token=key), 403,
                     "INSUFFICIENT_PERMISSIONS")


def test_an_admin_resets_a_lost_second_factor(client, sess, sess_b):
    user, email, password = crm.create_user(client, sess.admin, "agent")
    enroll(client, crm.login(client, email, password)["access_token"])
    crm.assert_error(login(client, email, password), 401, "TOTP_REQUIRED")
    crm.assert_error(client.delete(f"/api/v1/users/{user['id']}/totp", token=sess_b.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.delete(f"/api/v1/users/{user['id']}/totp",
                                   token=sess.tokens["manager"]), 403, "INSUFFICIENT_PERMISSIONS")
    # Not an admin's own: that is /disable, with a code.
    crm.assert_error(client.delete(f"/api/v1/users/{sess.tenant.admin_id}/totp", token=sess.admin),
                     403, "INSUFFICIENT_PERMISSIONS")
    assert client.delete(f"/api/v1/users/{user['id']}/totp", token=sess.admin).status == 204
    crm.assert_json_response(login(client, email, password), 200)
    rows = crm.audit_rows(client, sess.admin, resource="user", resource_id=user["id"],
                          action="totp_reset")
    assert [(r["user_id"], r["outcome"]) for r in rows] == [
        (sess.tenant.admin_id, "success"), (sess.users["manager"]["id"], "denied")], rows


def test_a_stolen_session_cannot_guess_its_way_to_turning_totp_off(client, sess):
    """Turning the second factor off takes a code: wrong codes there count as failed sign-ins
    of the account, so a stolen access token cannot try the million codes."""
    _, email, password = crm.create_user(client, sess.admin, "agent")
    token = crm.login(client, email, password)["access_token"]
    secret, _, _ = enroll(client, token)
    right = {code_at(secret, time.time() + d) for d in (-30, 0, 30, 60)}
    wrong = next(f"{n:06d}" for n in range(1000) if f"{n:06d}" not in right)
    statuses = [client.post(f"{TOTP}/disable", {"code": wrong}, token=token).status
                for _ in range(7)]
    assert statuses[:5] == [422] * 5 and 429 in statuses[5:], statuses
    status = crm.assert_json_response(client.get(TOTP, token=token), 200)
    assert status["enabled"] is True, status
