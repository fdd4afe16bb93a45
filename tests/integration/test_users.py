"""User management (contract §3 "Users and tenants", "Roles"): CRUD, validation, the admin-only
role matrix, the last-admin rule, token revocation on deactivation / role / password change, and
tenant isolation."""
import math
import secrets

import pytest

import crm

USERS = "/api/v1/users"
ME = "/api/v1/auth/me"
NOWHERE_ID = 8_000_000_000_000_000_000  # a valid 64-bit id that no user has


def user_url(user_id) -> str:
    return f"{USERS}/{user_id}"


def new_user_body(role="viewer", **override):
    body = {"email": crm.unique_email(role), "full_name": f"{role.title()} {secrets.token_hex(3)}",
            "password": crm.new_password(), "role": role}
    body.update(override)
    return body


def get_user(client, token, user_id) -> dict:
    return crm.assert_json_response(client.get(user_url(user_id), token=token), 200)


def assert_revoked(client, pair):
    """The pair's access token (on /auth/me) and refresh token are both refused."""
    assert crm.eventually(lambda: crm.me_status(client, pair["access_token"]) == 401, 1.5), \
        "access token still accepted"
    crm.assert_error(client.get(ME, token=pair["access_token"]), 401, "INVALID_CREDENTIALS")
    crm.assert_error(client.post("/api/v1/auth/refresh", {"refresh_token": pair["refresh_token"]}),
                     401, "INVALID_CREDENTIALS")


@pytest.fixture(scope="module")
def tenant_b(cli_env, migrated) -> crm.Tenant:
    return crm.create_tenant(cli_env)


@pytest.fixture(scope="module")
def admin_b_token(client, tenant_b) -> str:
    return crm.login(client, tenant_b.admin_email, tenant_b.admin_password)["access_token"]


@pytest.fixture(scope="module")
def user_b(client, admin_b_token) -> dict:
    user, _, _ = crm.create_user(client, admin_b_token, "agent")
    return user


# ---- create ---------------------------------------------------------------------------------


def test_admin_creates_user_201_with_location_and_user_shape(client, tenant, admin_token):
    body = new_user_body("agent")
    resp = client.post(USERS, body, token=admin_token)
    user = crm.assert_json_response(resp, 201)
    crm.assert_user(user, email=body["email"], full_name=body["full_name"], role="agent",
                    tenant_id=tenant.tenant_id, is_active=True)
    assert resp.header("Location") == user_url(user["id"]), resp.describe()
    assert body["password"] not in resp.body.decode(), "the password is echoed back"
    assert get_user(client, admin_token, user["id"]) == user


def test_created_user_logs_in_with_its_password_and_role(client, tenant, admin_token):
    user, email, password = crm.create_user(client, admin_token, "manager")
    pair = crm.login(client, email, password)
    me = crm.assert_json_response(client.get(ME, token=pair["access_token"]), 200)
    assert me == user


def test_password_of_exactly_10_characters_is_accepted(client, admin_token):
    body = new_user_body(password="0123456789")
    crm.assert_json_response(client.post(USERS, body, token=admin_token), 201)
    crm.login(client, body["email"], "0123456789")


def test_password_of_9_characters_is_422_string_too_short(client, admin_token):
    body = new_user_body(password="012345678")
    crm.assert_validation(client.post(USERS, body, token=admin_token),
                          (("body", "password"), "string_too_short"))
    crm.assert_error(client.post("/api/v1/auth/login", {"email": body["email"],
                                                        "password": "012345678"}),
                     401, "INVALID_CREDENTIALS")


def test_unknown_role_is_422_enum(client, admin_token):
    crm.assert_validation(client.post(USERS, new_user_body(role="superuser"), token=admin_token),
                          (("body", "role"), "enum"))


def test_invalid_email_is_422_value_error_email(client, admin_token):
    crm.assert_validation(client.post(USERS, new_user_body(email="not-an-email"), token=admin_token),
                          (("body", "email"), "value_error.email"))


def test_create_without_fields_reports_every_missing_field(client, admin_token):
    crm.assert_validation(client.post(USERS, {}, token=admin_token),
                          *[(("body", f), "missing") for f in ("email", "full_name", "password",
                                                               "role")])


def test_unknown_field_is_422_extra_forbidden(client, admin_token):
    crm.assert_validation(client.post(USERS, new_user_body(nickname="x"), token=admin_token),
                          (("body", "nickname"), "extra_forbidden"))


def test_server_set_fields_are_422_extra_forbidden_and_nothing_is_created(client, admin_token,
                                                                          tenant_b):
    body = new_user_body(id=1, tenant_id=tenant_b.tenant_id, created_at="2020-01-01T00:00:00.000000Z",
                         updated_at="2020-01-01T00:00:00.000000Z")
    crm.assert_validation(client.post(USERS, body, token=admin_token),
                          *[(("body", f), "extra_forbidden") for f in ("id", "tenant_id",
                                                                       "created_at", "updated_at")])
    crm.assert_error(client.post("/api/v1/auth/login", {"email": body["email"],
                                                        "password": body["password"]}),
                     401, "INVALID_CREDENTIALS")


def test_every_failing_field_is_reported_in_one_422(client, admin_token):
    body = {"email": "nope", "full_name": 5, "password": "short", "role": "root", "tenant_id": 7}
    crm.assert_validation(client.post(USERS, body, token=admin_token),
                          (("body", "email"), "value_error.email"),
                          (("body", "full_name"), "string_type"),
                          (("body", "password"), "string_too_short"),
                          (("body", "role"), "enum"),
                          (("body", "tenant_id"), "extra_forbidden"))


def test_duplicate_email_is_409_case_insensitively_and_across_tenants(client, admin_token,
                                                                      admin_b_token, tenant_b):
    _, email, _ = crm.create_user(client, admin_token, "viewer")
    for token, candidate in ((admin_token, email), (admin_token, email.upper()),
                             (admin_b_token, email), (admin_token, tenant_b.admin_email)):
        resp = client.post(USERS, new_user_body(email=candidate), token=token)
        crm.assert_error(resp, 409, "DUPLICATE_EMAIL")


# ---- list -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def list_tenant(client, cli_env):
    """A tenant with exactly five users: its admin and four created here."""
    tenant = crm.create_tenant(cli_env)
    token = crm.login(client, tenant.admin_email, tenant.admin_password)["access_token"]
    created = [crm.create_user(client, token, role)[0]
               for role in ("viewer", "agent", "manager", "admin")]
    return tenant, token, created


def test_user_list_is_paginated_with_defaults(client, list_tenant):
    tenant, token, created = list_tenant
    body = crm.assert_json_response(client.get(USERS, token=token), 200)
    assert set(body) == {"items", "total", "page", "per_page", "pages"}, body
    assert (body["total"], body["page"], body["per_page"], body["pages"]) == (5, 1, 20, 1), body
    for item in body["items"]:
        crm.assert_user(item, tenant_id=tenant.tenant_id)
    ids = [u["id"] for u in body["items"]]
    assert ids == sorted(ids), "users are listed by id ascending"
    assert set(ids) == {tenant.admin_id} | {u["id"] for u in created}
    for user in created:
        assert user in body["items"]


def test_user_list_pages_through_every_user_once(client, list_tenant):
    tenant, token, created = list_tenant
    seen = []
    for page in (1, 2, 3):
        body = crm.assert_json_response(client.get(f"{USERS}?page={page}&per_page=2", token=token),
                                        200)
        assert (body["total"], body["page"], body["per_page"], body["pages"]) == \
            (5, page, 2, math.ceil(5 / 2)), body
        assert len(body["items"]) == (2 if page < 3 else 1), body
        seen += [u["id"] for u in body["items"]]
    assert seen == sorted(seen) and len(set(seen)) == 5
    past = crm.assert_json_response(client.get(f"{USERS}?page=4&per_page=2", token=token), 200)
    assert past["items"] == [] and past["total"] == 5 and past["pages"] == 3, past


@pytest.mark.parametrize("query,expected", [
    ("page=0", [(("query", "page"), "greater_than_equal")]),
    ("per_page=0", [(("query", "per_page"), "greater_than_equal")]),
    ("per_page=101", [(("query", "per_page"), "less_than_equal")]),
    ("page=abc", [(("query", "page"), "int_parsing")]),
    ("per_page=x", [(("query", "per_page"), "int_parsing")]),
    ("page=0&per_page=101", [(("query", "page"), "greater_than_equal"),
                             (("query", "per_page"), "less_than_equal")]),
])
def test_invalid_paging_is_422_with_query_loc(client, admin_token, query, expected):
    crm.assert_validation(client.get(f"{USERS}?{query}", token=admin_token), *expected)


def test_per_page_100_is_accepted(client, admin_token):
    body = crm.assert_json_response(client.get(f"{USERS}?per_page=100", token=admin_token), 200)
    assert body["per_page"] == 100


# ---- get / update ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("bad_id", ["abc", "1.5"])
def test_non_integer_user_id_is_422_int_parsing(client, admin_token, method, bad_id):
    body = {"full_name": "X"} if method in ("PUT", "PATCH") else None
    resp = client.request(method, user_url(bad_id), body, token=admin_token)
    crm.assert_validation(resp, (("path", "id"), "int_parsing"))


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
def test_user_that_exists_nowhere_is_404(client, admin_token, method):
    body = {"full_name": "X"} if method in ("PUT", "PATCH") else None
    resp = client.request(method, user_url(NOWHERE_ID), body, token=admin_token)
    crm.assert_error(resp, 404, "NOT_FOUND")


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_update_changes_only_the_fields_sent(client, admin_token, method):
    user, email, password = crm.create_user(client, admin_token, "agent")
    resp = client.request(method, user_url(user["id"]), {"full_name": "Renamed Person"},
                          token=admin_token)
    updated = crm.assert_json_response(resp, 200)
    crm.assert_user(updated, **{**user, "full_name": "Renamed Person"})
    assert get_user(client, admin_token, user["id"]) == updated
    resp = client.request(method, user_url(user["id"]), {"role": "manager"}, token=admin_token)
    crm.assert_user(crm.assert_json_response(resp, 200),
                    **{**user, "full_name": "Renamed Person", "role": "manager"})


def test_update_with_forbidden_or_invalid_fields_is_422_and_changes_nothing(client, admin_token,
                                                                            tenant_b):
    user, _, _ = crm.create_user(client, admin_token, "agent")
    body = {"email": crm.unique_email("moved"), "tenant_id": tenant_b.tenant_id, "id": 1,
            "created_at": "2020-01-01T00:00:00.000000Z", "updated_at": "2020-01-01T00:00:00.000000Z",
            "role": "owner", "password": "short", "full_name": "Never Applied"}
    resp = client.patch(user_url(user["id"]), body, token=admin_token)
    crm.assert_validation(resp, *[(("body", f), "extra_forbidden")
                                  for f in ("email", "tenant_id", "id", "created_at", "updated_at")],
                          (("body", "role"), "enum"), (("body", "password"), "string_too_short"))
    assert get_user(client, admin_token, user["id"]) == user


def test_password_change_revokes_tokens_and_only_the_new_password_logs_in(client, admin_token):
    user, email, password = crm.create_user(client, admin_token, "agent")
    pair = crm.login(client, email, password)
    resp = client.put(user_url(user["id"]), {"password": "brand-new-password"}, token=admin_token)
    crm.assert_user(crm.assert_json_response(resp, 200), **user)
    assert b"brand-new-password" not in resp.body
    assert_revoked(client, pair)
    crm.assert_error(client.post("/api/v1/auth/login", {"email": email, "password": password}),
                     401, "INVALID_CREDENTIALS")
    crm.login(client, email, "brand-new-password")
    assert crm.me_status(client, admin_token) == 200, "the acting admin keeps their session"


def test_role_change_revokes_the_users_tokens_but_not_the_acting_admins(client, tenant,
                                                                        admin_token):
    user, email, password = crm.create_user(client, admin_token, "agent")
    pair = crm.login(client, email, password)
    resp = client.patch(user_url(user["id"]), {"role": "manager"}, token=admin_token)
    crm.assert_user(crm.assert_json_response(resp, 200), **{**user, "role": "manager"})
    assert_revoked(client, pair)
    assert crm.me_status(client, admin_token) == 200
    new = crm.login(client, email, password)
    assert crm.jwt_parts(new["access_token"])[1]["role"] == "manager"
    me = crm.assert_json_response(client.get(ME, token=new["access_token"]), 200)
    assert me["role"] == "manager"


# ---- delete / deactivate --------------------------------------------------------------------


def test_delete_deactivates_user_and_revokes_every_session(client, admin_token):
    user, email, password = crm.create_user(client, admin_token, "agent")
    pairs = [crm.login(client, email, password), crm.login(client, email, password)]
    resp = client.delete(user_url(user["id"]), token=admin_token)
    assert resp.status == 204, resp.describe()
    assert resp.body == b""
    crm.assert_common(resp)
    assert get_user(client, admin_token, user["id"]) == {**user, "is_active": False}
    listed = [u for u in crm.list_all_users(client, admin_token) if u["id"] == user["id"]]
    assert listed == [{**user, "is_active": False}]
    for pair in pairs:
        assert_revoked(client, pair)
    crm.assert_error(client.post("/api/v1/auth/login", {"email": email, "password": password}),
                     401, "INVALID_CREDENTIALS")
    assert crm.me_status(client, admin_token) == 200


def test_reactivated_user_logs_in_again_but_old_tokens_stay_revoked(client, admin_token):
    user, email, password = crm.create_user(client, admin_token, "viewer")
    pair = crm.login(client, email, password)
    assert client.delete(user_url(user["id"]), token=admin_token).status == 204
    resp = client.patch(user_url(user["id"]), {"is_active": True}, token=admin_token)
    crm.assert_user(crm.assert_json_response(resp, 200), **user)
    crm.login(client, email, password)
    assert_revoked(client, pair)


def test_patch_is_active_false_deactivates_and_revokes(client, admin_token):
    user, email, password = crm.create_user(client, admin_token, "manager")
    pair = crm.login(client, email, password)
    resp = client.patch(user_url(user["id"]), {"is_active": False}, token=admin_token)
    crm.assert_user(crm.assert_json_response(resp, 200), **{**user, "is_active": False})
    assert_revoked(client, pair)
    crm.assert_error(client.post("/api/v1/auth/login", {"email": email, "password": password}),
                     401, "INVALID_CREDENTIALS")


# ---- last active admin ----------------------------------------------------------------------


def test_last_active_admin_cannot_be_demoted_or_deactivated(client, cli_env):
    tenant = crm.create_tenant(cli_env)
    admin1 = crm.login(client, tenant.admin_email, tenant.admin_password)["access_token"]
    me1 = get_user(client, admin1, tenant.admin_id)

    def refused(method, body=None, target=tenant.admin_id, token=admin1):
        resp = client.request(method, user_url(target), body, token=token)
        crm.assert_error(resp, 409, "CONFLICT")

    # Alone: no demotion, no deactivation in any form.
    refused("PATCH", {"role": "manager"})
    refused("PUT", {"role": "viewer"})
    refused("PATCH", {"is_active": False})
    refused("DELETE")
    assert get_user(client, admin1, tenant.admin_id) == me1
    assert crm.me_status(client, admin1) == 200

    # A second admin may be demoted while the first remains; then the first is the last again.
    admin2, email2, password2 = crm.create_user(client, admin1, "admin")
    resp = client.patch(user_url(admin2["id"]), {"role": "agent"}, token=admin1)
    assert crm.assert_json_response(resp, 200)["role"] == "agent"
    refused("PATCH", {"role": "manager"})

    # An inactive admin does not count.
    resp = client.patch(user_url(admin2["id"]), {"role": "admin"}, token=admin1)
    assert crm.assert_json_response(resp, 200)["role"] == "admin"
    assert client.delete(user_url(admin2["id"]), token=admin1).status == 204
    refused("PATCH", {"role": "manager"})
    refused("DELETE")

    # Two active admins: either may demote the other.
    resp = client.patch(user_url(admin2["id"]), {"is_active": True}, token=admin1)
    assert crm.assert_json_response(resp, 200)["is_active"] is True
    admin2_token = crm.login(client, email2, password2)["access_token"]
    resp = client.patch(user_url(tenant.admin_id), {"role": "manager"}, token=admin2_token)
    assert crm.assert_json_response(resp, 200)["role"] == "manager"
    assert crm.eventually(lambda: crm.me_status(client, admin1) == 401, 1.5), \
        "a demoted admin keeps their old token"
    refused("DELETE", target=admin2["id"], token=admin2_token)
    refused("PATCH", {"role": "viewer"}, target=admin2["id"], token=admin2_token)


# ---- roles ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def role_tokens(client, admin_token) -> dict:
    tokens = {}
    for role in ("viewer", "agent", "manager"):
        user, email, password = crm.create_user(client, admin_token, role)
        tokens[role] = (user, crm.login(client, email, password)["access_token"])
    return tokens


@pytest.fixture(scope="module")
def bystander(client, admin_token) -> dict:
    user, _, _ = crm.create_user(client, admin_token, "agent")
    return user


ROUTES = ["list", "create", "get_self", "get_other", "put", "patch", "delete"]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("role", ["viewer", "agent", "manager"])
def test_non_admin_roles_get_403_on_every_users_route(client, admin_token, role_tokens, bystander,
                                                      role, route):
    me, token = role_tokens[role]
    target = bystander["id"]
    created = new_user_body("admin")
    request = {
        "list": ("GET", USERS, None),
        "create": ("POST", USERS, created),
        "get_self": ("GET", user_url(me["id"]), None),
        "get_other": ("GET", user_url(target), None),
        "put": ("PUT", user_url(target), {"full_name": "Hijacked", "role": "admin"}),
        "patch": ("PATCH", user_url(target), {"role": "admin"}),
        "delete": ("DELETE", user_url(target), None),
    }[route]
    resp = client.request(request[0], request[1], request[2], token=token)
    crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
    assert get_user(client, admin_token, target) == bystander, "a refused request changed a user"
    if route == "create":
        crm.assert_error(client.post("/api/v1/auth/login", {"email": created["email"],
                                                            "password": created["password"]}),
                         401, "INVALID_CREDENTIALS")


@pytest.mark.parametrize("method,path", [("GET", USERS), ("POST", USERS), ("GET", user_url(1)),
                                         ("PUT", user_url(1)), ("PATCH", user_url(1)),
                                         ("DELETE", user_url(1))])
def test_users_routes_without_token_are_401(client, method, path):
    resp = client.request(method, path, {"full_name": "X"} if method in ("PUT", "PATCH") else None)
    crm.assert_error(resp, 401, "INVALID_CREDENTIALS")


# ---- tenant isolation -----------------------------------------------------------------------


@pytest.mark.parametrize("method,body", [("GET", None), ("PUT", {"full_name": "Hijacked"}),
                                         ("PATCH", {"role": "viewer"}), ("DELETE", None)])
def test_user_of_another_tenant_is_403(client, admin_token, admin_b_token, user_b, method, body):
    resp = client.request(method, user_url(user_b["id"]), body, token=admin_token)
    crm.assert_error(resp, 403, "INSUFFICIENT_PERMISSIONS")
    assert get_user(client, admin_b_token, user_b["id"]) == user_b


def test_admin_of_another_tenant_cannot_be_deactivated(client, admin_token, admin_b_token,
                                                       tenant_b):
    crm.assert_error(client.delete(user_url(tenant_b.admin_id), token=admin_token), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.me_status(client, admin_b_token) == 200


def test_user_list_never_contains_another_tenants_users(client, tenant, admin_token, tenant_b,
                                                        user_b):
    users = crm.list_all_users(client, admin_token)
    assert users, "the tenant has users"
    assert {u["tenant_id"] for u in users} == {tenant.tenant_id}
    ids = {u["id"] for u in users}
    assert user_b["id"] not in ids and tenant_b.admin_id not in ids
    assert tenant.admin_id in ids
    first = crm.assert_json_response(client.get(USERS, token=admin_token), 200)
    assert first["total"] == len(users)
