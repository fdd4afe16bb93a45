"""HTTP-level behaviour of `carecrm serve` (contract §1, §2, §9): routing errors, limits, timeouts,
keep-alive, request ids, content types, health and the OpenAPI document."""
import http.client
import json
import secrets
import socket
import time

import pytest

import crm

BODY_LIMIT = 65536
HEADER_TIMEOUT = 1.0
IDLE_TIMEOUT = 3.0
# CARECRM_HEADER_LIMIT is left at its default (8 KiB) on purpose.
SERVER_ENV = {
    "CARECRM_BODY_LIMIT": BODY_LIMIT,
    "CARECRM_HEADER_TIMEOUT": HEADER_TIMEOUT,
    "CARECRM_IDLE_TIMEOUT": IDLE_TIMEOUT,
}


def raw_connection(server) -> socket.socket:
    return socket.create_connection((server.host, server.port), timeout=10)


def read_raw_response(sock: socket.socket, method: str = "GET") -> crm.Response:
    resp = http.client.HTTPResponse(sock, method=method)
    resp.begin()
    return crm.read_response(resp)


# ---- health and discovery -------------------------------------------------------------------


def test_healthz_is_ok_without_authentication(client):
    resp = client.get("/healthz")
    assert crm.assert_json_response(resp, 200) == {"status": "ok"}


def test_readyz_is_ready_when_postgres_and_redis_answer(client):
    resp = client.get("/readyz")
    assert crm.assert_json_response(resp, 200) == {"status": "ready"}


def test_openapi_document_is_3_1_and_lists_auth_and_users_routes(client):
    doc = crm.assert_json_response(client.get("/api/v1/openapi.json"), 200)
    assert isinstance(doc.get("openapi"), str) and doc["openapi"].startswith("3.1"), doc.get("openapi")
    assert isinstance(doc.get("info"), dict), "an OpenAPI document has an info object"
    paths = doc.get("paths")
    assert isinstance(paths, dict)
    want = {
        "/api/v1/auth/login": {"post"},
        "/api/v1/auth/refresh": {"post"},
        "/api/v1/auth/me": {"get"},
        "/api/v1/auth/logout": {"post"},
        "/api/v1/users": {"get", "post"},
        "/api/v1/users/{id}": {"get", "put", "patch", "delete"},
    }
    for path, methods in want.items():
        assert path in paths, f"{path} missing from openapi paths: {sorted(paths)}"
        assert methods <= set(paths[path]), f"{path}: want {methods}, got {sorted(paths[path])}"


# ---- routing errors -------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/v1/no-such-route", "/api/v1/users/1/no-such-child",
                                  "/no-such-route"])
def test_unknown_route_is_404_not_found(client, admin_token, path):
    crm.assert_error(client.get(path, token=admin_token), 404, "NOT_FOUND")


@pytest.mark.parametrize("method,path,allowed", [
    ("GET", "/api/v1/auth/login", {"POST"}),
    ("DELETE", "/api/v1/auth/me", {"GET"}),
    ("PATCH", "/api/v1/users", {"GET", "POST"}),
    ("POST", "/api/v1/users/1", {"GET", "PUT", "PATCH", "DELETE"}),
])
def test_known_path_with_wrong_method_is_405_with_allow_header(client, admin_token, method, path,
                                                               allowed):
    resp = client.request(method, path, token=admin_token)
    crm.assert_error(resp, 405, "METHOD_NOT_ALLOWED")
    allow = {m.strip().upper() for m in (resp.header("Allow") or "").split(",") if m.strip()}
    assert allowed <= allow, f"Allow {resp.header('Allow')!r} should list {allowed}"
    assert method not in allow


# ---- request ids and content types ----------------------------------------------------------


@pytest.mark.parametrize("method,path,body", [
    ("GET", "/healthz", None),
    ("GET", "/api/v1/no-such-route", None),
    ("GET", "/api/v1/auth/me", None),
    ("POST", "/api/v1/auth/login", {"email": "nobody@example.com"}),
])
def test_request_id_is_echoed_on_success_and_error(client, method, path, body):
    rid = "it-" + secrets.token_hex(8)
    resp = client.request(method, path, body, headers={"X-Request-Id": rid})
    assert resp.header("X-Request-Id") == rid, resp.describe()
    assert (resp.header("Content-Type") or "").startswith("application/json"), resp.describe()


def test_request_id_is_generated_and_distinct_when_not_sent(client):
    first, second = client.get("/healthz"), client.get("/healthz")
    crm.assert_common(first)
    crm.assert_common(second)
    assert first.header("X-Request-Id") != second.header("X-Request-Id")


# ---- bodies ---------------------------------------------------------------------------------


def test_malformed_json_body_is_422_json_invalid(client):
    resp = client.post("/api/v1/auth/login", raw=b'{"email": "a@example.com", "password": ')
    crm.assert_validation(resp, (("body",), "json_invalid"))


def test_malformed_json_body_on_authenticated_route_is_422_json_invalid(client, admin_token):
    resp = client.post("/api/v1/users", raw=b"{not json", token=admin_token)
    crm.assert_validation(resp, (("body",), "json_invalid"))


@pytest.mark.parametrize("method,path", [("POST", "/api/v1/users"),
                                         ("PUT", "/api/v1/users/abc"),
                                         ("POST", "/api/v1/auth/logout")])
def test_unauthenticated_request_with_garbage_is_401_before_validation(client, method, path):
    resp = client.request(method, path, raw=b"\x00garbage{")
    crm.assert_error(resp, 401, "INVALID_CREDENTIALS")


def padded_login_body(size: int) -> bytes:
    body = json.dumps({"email": crm.unique_email("nobody"), "password": "wrong-password"})
    assert len(body) < size
    return (body[:-1] + " " * (size - len(body)) + "}").encode()


def test_body_over_limit_is_413_payload_too_large(client):
    resp = client.post("/api/v1/auth/login", raw=padded_login_body(BODY_LIMIT + 1))
    crm.assert_error(resp, 413, "PAYLOAD_TOO_LARGE")


def test_body_exactly_at_limit_is_processed(client):
    # Unknown e-mail: the body was read and parsed, so the answer is the login failure.
    resp = client.post("/api/v1/auth/login", raw=padded_login_body(BODY_LIMIT))
    crm.assert_error(resp, 401, "INVALID_CREDENTIALS")


def test_chunked_body_over_limit_is_413_payload_too_large(server):
    chunk = b" " * 16384
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(5)) + b"0\r\n\r\n"
    head = (f"POST /api/v1/auth/login HTTP/1.1\r\nHost: {server.host}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    with raw_connection(server) as sock:
        try:
            sock.sendall(head + body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may stop reading once the limit is passed; the answer is still due
        resp = read_raw_response(sock, "POST")
    crm.assert_error(resp, 413, "PAYLOAD_TOO_LARGE")


# ---- header limit ---------------------------------------------------------------------------


def test_headers_over_8_kib_are_431(server):
    request = (f"GET /healthz HTTP/1.1\r\nHost: {server.host}\r\n"
               f"X-Padding: {'a' * 9000}\r\n\r\n").encode()
    with raw_connection(server) as sock:
        sock.sendall(request)
        resp = read_raw_response(sock)
        assert resp.status == 431, resp.describe()
        is_json = ((resp.header("Content-Type") or "").startswith("application/json")
                   and resp.json is not None)
        if not is_json:
            closed, _, _ = crm.wait_closed(sock, 3.0)
            assert closed, "431 without a JSON body must close the connection"


def test_headers_under_8_kib_are_served(client):
    resp = client.get("/healthz", headers={"X-Padding": "a" * 6000})
    assert crm.assert_json_response(resp, 200) == {"status": "ok"}


# ---- timeouts and keep-alive ----------------------------------------------------------------


def test_half_sent_request_line_is_disconnected_after_header_timeout(server):
    with raw_connection(server) as sock:
        sock.sendall(b"GET /healthz HT")
        closed, waited, _ = crm.wait_closed(sock, 8.0)
    assert closed, "the server kept a half-sent request open for 8 s"
    assert 0.5 <= waited <= 3.5, f"closed after {waited:.2f} s with a 1 s header timeout"


def test_trickled_headers_are_disconnected_after_header_timeout(server):
    # A byte every 0.25 s: the header timeout bounds the whole header, not the gap between bytes.
    start = time.monotonic()
    closed = False
    with raw_connection(server) as sock:
        payload = b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 100
        for i in range(len(payload)):
            try:
                sock.sendall(payload[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            closed, _, _ = crm.wait_closed(sock, 0.25)
            if closed or time.monotonic() - start > 8.0:
                break
    waited = time.monotonic() - start
    assert closed, "a client trickling header bytes was never disconnected"
    assert waited <= 3.5, f"trickling client disconnected only after {waited:.2f} s"


def test_server_keeps_serving_while_slow_clients_hang(server, client):
    slow = [raw_connection(server) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(b"GET /heal")
        started = time.monotonic()
        resp = client.get("/healthz")
        assert crm.assert_json_response(resp, 200) == {"status": "ok"}
        assert time.monotonic() - started < HEADER_TIMEOUT, "a healthz request waited for slow clients"
    finally:
        for sock in slow:
            sock.close()


def test_idle_keep_alive_connection_is_closed_after_idle_timeout(server):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200 and not resp.will_close, "keep-alive expected after /healthz"
        closed, waited, _ = crm.wait_closed(conn.sock, IDLE_TIMEOUT + 6)
    finally:
        conn.close()
    assert closed, f"idle keep-alive connection still open after {IDLE_TIMEOUT + 6:.0f} s"
    # Between requests the idle timeout (3 s) applies, not the header timeout (1 s).
    assert IDLE_TIMEOUT - 1.0 <= waited <= IDLE_TIMEOUT + 2.5, \
        f"idle connection closed after {waited:.2f} s with a {IDLE_TIMEOUT:.0f} s idle timeout"


def test_keep_alive_serves_several_requests_on_one_connection(server, admin_token):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.connect()
        sock, local = conn.sock, conn.sock.getsockname()
        login = json.dumps({"email": crm.unique_email("nobody"), "password": "wrong-password"})
        steps = [
            ("GET", "/healthz", None, {}, 200),
            ("GET", "/api/v1/auth/me", None, {"Authorization": f"Bearer {admin_token}"}, 200),
            ("GET", "/api/v1/no-such-route", None, {"Authorization": f"Bearer {admin_token}"}, 404),
            ("POST", "/api/v1/auth/login", login, {"Content-Type": "application/json"}, 401),
            ("GET", "/api/v1/auth/me", None, {}, 401),
            ("GET", "/readyz", None, {}, 200),
        ]
        for method, path, body, headers, status in steps:
            conn.request(method, path, body=body, headers=headers)
            resp = crm.read_response(conn.getresponse())
            assert resp.status == status, f"{method} {path}: {resp.describe()}"
            assert conn.sock is sock and sock.getsockname() == local, \
                f"connection was closed after {method} {path} ({resp.header('Connection')})"
    finally:
        conn.close()


def test_busy_keep_alive_connection_outlives_idle_timeout(server):
    # Gaps longer than the header timeout but shorter than the idle timeout, for longer in total
    # than the idle timeout: the connection stays open throughout.
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.connect()
        sock = conn.sock
        for i in range(4):
            if i:
                time.sleep(1.5)
            conn.request("GET", "/healthz")
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200
            assert conn.sock is sock, f"connection closed before request {i + 1} (1.5 s gaps)"
    finally:
        conn.close()


def test_openapi_documents_rate_limits_and_unavailability_on_every_operation(client):
    """Integrators learn from the document that any call may be limited (429 with Retry-After)
    or refused while a part is down (503), and which headers carry the limits."""
    doc = crm.assert_json_response(client.get("/api/v1/openapi.json"), 200)
    headers = doc["components"]["headers"]
    assert set(headers) >= {"RateLimit-Policy", "RateLimit", "Retry-After"}, headers
    count = 0

    def resolved(r):  # a response, or a reference to one of components/responses
        return doc["components"]["responses"][r["$ref"].rsplit("/", 1)[1]] if "$ref" in r else r
    for path, item in doc["paths"].items():
        for method, op in item.items():
            count += 1
            responses = {code: resolved(r) for code, r in op["responses"].items()}
            where = f"{method.upper()} {path}"
            assert set(responses["429"]["headers"]) >= {"RateLimit-Policy", "RateLimit",
                                                        "Retry-After"}, where
            assert "503" in responses, where
            success = [code for code in responses if code.startswith("2")]
            assert success and all(
                set(responses[c]["headers"]) >= {"RateLimit-Policy", "RateLimit"}
                for c in success), where
            for c in success + ["429"]:
                for h in responses[c]["headers"].values():
                    name = h["$ref"].rsplit("/", 1)[1]
                    assert name in headers, (where, h)
    assert count > 50, count
