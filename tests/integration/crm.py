"""Helpers for the carecrm integration tests: a throw-away database per test file, the carecrm
binary (migrate, tenant create, serve), a small HTTP client, JWT forging, a private redis-server,
and assertions on the contract's response shapes (docs/API-CONTRACT.md §1-§3, §9).

Only the standard library and pytest. Nothing here reads the environment at import time, so
collection works without a built server; the fixtures fail loudly when it is missing.
"""
from __future__ import annotations

import atexit
import base64
import hashlib
import hmac
import http.client
import json as _json
import math
import os
import queue
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from typing import Any, NamedTuple

import pytest

# One secret per test process (one test file per process under CTest); >= 32 bytes.
JWT_SECRET = "carecrm-integration-" + secrets.token_hex(24)
METRICS_TOKEN = "carecrm-metrics-" + secrets.token_hex(16)
# Keys sealing secrets at rest: the same in every test process, since a database may outlive
# the process that made it.
SECRET_KEY = base64.b64encode(hashlib.sha256(b"carecrm integration tests").digest()).decode()
SECRET_KEYS = "test1:" + SECRET_KEY

READY_TIMEOUT = 60.0  # ASan+UBSan build: start-up can be slow
STOP_TIMEOUT = 20.0
SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer",
                     "runtime error:")

USER_KEYS = {"id", "email", "full_name", "tenant_id", "role", "is_active", "created_at"}
ROLES = ("viewer", "agent", "manager", "admin")
TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")


# --------------------------------------------------------------------------------------------
# Environment


def require_env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        pytest.fail(f"environment variable {name} is not set: run the integration tests through "
                    f"scripts/test / ctest (CARECRM_BIN is set by CTest, CARECRM_TEST_PG_DSN and "
                    f"CARECRM_TEST_REDIS_URL by scripts/test)", pytrace=False)
    return value


_pki_lock = threading.Lock()
_pki: dict[str, dict] = {}


def cluster_pki(name: str = "cluster") -> dict:
    """A CA and a certificate signed by it (scripts/lib.sh cluster_pki), made once per process
    for each `name` (another name: another CA), for the TLS the shipped HAProxy terminates.
    Paths: ca, cert, key, and pem (cert and key in one file, as HAProxy takes them)."""
    with _pki_lock:
        if name not in _pki:
            d = tempfile.mkdtemp(prefix=f"carecrm-pki-{name}-")
            atexit.register(shutil.rmtree, d, True)
            lib = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "lib.sh")
            r = subprocess.run(["bash", "-c", f'source "{lib}" && cluster_pki "{d}"'],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            pem = os.path.join(d, "front.pem")
            with open(pem, "w") as out:
                for part in ("node.pem", "node.key"):
                    with open(os.path.join(d, part)) as f:
                        out.write(f.read())
            _pki[name] = {"ca": os.path.join(d, "ca.pem"), "cert": os.path.join(d, "node.pem"),
                          "key": os.path.join(d, "node.key"), "pem": pem}
        return _pki[name]


def audit_rows(client: "Client", token: str, **params) -> list[dict]:
    """GET /api/v1/audit-log with `params` (200 required): its items, newest first."""
    body = assert_json_response(client.get(with_query("/api/v1/audit-log", params), token=token),
                                200)
    return body["items"]


def audit_verify(env: dict, tenant_id) -> tuple[int, dict]:
    """`carecrm audit verify --tenant N`: its exit code and its JSON."""
    r = subprocess.run([carecrm_bin(), "audit", "verify", "--tenant", str(tenant_id)], env=env,
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert not sanitizer_findings(r.stderr), r.stderr
    return r.returncode, _json.loads(r.stdout.strip())


def carecrm_bin() -> str:
    path = require_env("CARECRM_BIN")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"CARECRM_BIN={path!r} is not an executable file", pytrace=False)
    return path


def unique(prefix: str = "u") -> str:
    return f"{prefix}-{secrets.token_hex(6)}"


def unique_email(prefix: str = "user") -> str:
    return f"{prefix}-{secrets.token_hex(6)}@example.com"


def new_password() -> str:
    return "pw-" + secrets.token_hex(8)  # 19 characters, over the minimum of 10


def tail(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def sanitizer_findings(text: str) -> list[str]:
    return [m for m in SANITIZER_MARKERS if m in text]


# --------------------------------------------------------------------------------------------
# PostgreSQL: one database per test file


def psql(dsn: str, sql: str) -> str:
    r = subprocess.run(["psql", dsn, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"psql failed ({r.returncode}) on {sql!r}: {r.stderr.strip()}")
    return r.stdout


def dsn_with_database(dsn: str, dbname: str) -> str:
    if "://" in dsn:
        parts = urllib.parse.urlsplit(dsn)
        return urllib.parse.urlunsplit(
            (parts.scheme, parts.netloc, "/" + dbname, parts.query, parts.fragment))
    return f"{dsn} dbname={dbname}"  # keyword form: the last dbname wins


class Database:
    """CREATE DATABASE crm_t_<random> on CARECRM_TEST_PG_DSN; dropped WITH (FORCE)."""

    def __init__(self, admin_dsn: str):
        self.admin_dsn = admin_dsn
        self.name = "crm_t_" + secrets.token_hex(6)
        for attempt in range(10):  # parallel CREATE DATABASE can collide on template1
            try:
                psql(admin_dsn, f'CREATE DATABASE "{self.name}"')
                break
            except RuntimeError as e:
                if attempt == 9 or "being accessed by other users" not in str(e):
                    raise
                time.sleep(0.5)
        self.url = dsn_with_database(admin_dsn, self.name)

    @classmethod
    def existing(cls, admin_dsn: str, name: str) -> "Database":
        """A database that already exists (e.g. made by PgCluster.create_database)."""
        db = cls.__new__(cls)
        db.admin_dsn, db.name, db.url = admin_dsn, name, dsn_with_database(admin_dsn, name)
        return db

    def query(self, sql: str) -> str:
        return psql(self.url, sql)

    def drop(self) -> None:
        psql(self.admin_dsn, f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


# --------------------------------------------------------------------------------------------
# The carecrm binary


def server_env(db_url: str, redis_url: str, overrides: dict[str, Any] | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARECRM_")}
    env.update(CARECRM_DATABASE_URL=db_url, CARECRM_REDIS_URL=redis_url,
               CARECRM_JWT_SECRET=JWT_SECRET, CARECRM_METRICS_TOKEN=METRICS_TOKEN,
               CARECRM_SECRET_KEYS=SECRET_KEYS)
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


def run_cli(args: list[str], env: dict, timeout: float = 180) -> subprocess.CompletedProcess:
    """Runs `carecrm <args>` in a scratch directory; fails on a non-zero exit or sanitizer output."""
    workdir = tempfile.mkdtemp(prefix="carecrm-cli-")
    try:
        r = subprocess.run([carecrm_bin(), *args], env=env, cwd=workdir, capture_output=True,
                           text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    found = sanitizer_findings(r.stderr)
    if r.returncode != 0 or found:
        pytest.fail(f"`carecrm {' '.join(args)}` exited {r.returncode}"
                    f"{' with sanitizer findings ' + str(found) if found else ''}\n"
                    f"stdout: {tail(r.stdout)}\nstderr: {tail(r.stderr)}", pytrace=False)
    return r


def migrate(env: dict) -> None:
    run_cli(["migrate"], env)


def run_json_cli(args: list[str], env: dict) -> Any:
    """Runs `carecrm <args>`, which must print one JSON line; returns it."""
    r = run_cli(args, env)
    try:
        return _json.loads(r.stdout.strip())
    except ValueError:
        pytest.fail(f"`carecrm {' '.join(args)}` must print one JSON line, got {r.stdout!r}",
                    pytrace=False)



class Tenant(NamedTuple):
    tenant_id: int
    admin_id: int
    admin_email: str
    admin_password: str
    admin_name: str


def create_tenant(env: dict, name: str | None = None) -> Tenant:
    name = name or unique("tenant")
    email, password, full = unique_email("admin"), new_password(), "Admin " + secrets.token_hex(3)
    r = run_cli(["tenant", "create", "--name", name, "--admin-email", email,
                 "--admin-password", password, "--admin-name", full], env)
    try:
        out = _json.loads(r.stdout.strip())
    except ValueError:
        pytest.fail(f"`carecrm tenant create` must print one JSON line on stdout, got {r.stdout!r}",
                    pytrace=False)
    assert isinstance(out, dict) and set(out) == {"tenant_id", "user_id"}, out
    assert isinstance(out["tenant_id"], int) and isinstance(out["user_id"], int), out
    return Tenant(out["tenant_id"], out["user_id"], email, password, full)


_ALL_SERVERS: list["Server"] = []


def all_servers() -> list["Server"]:
    return list(_ALL_SERVERS)


@atexit.register
def _kill_leftover_servers() -> None:
    for server in _ALL_SERVERS:
        server.kill()


class Server:
    """`carecrm serve` on ephemeral ports. stdout carries the one ready line; stderr goes to a
    temporary file whose tail is shown when a test fails."""

    def __init__(self, env: dict, label: str = "carecrm", args: list[str] | None = None):
        self.env = env
        self.label = label
        self.args = list(args or [])  # extra `carecrm serve` flags, e.g. ["--ai-timeout", "2"]
        self.proc: subprocess.Popen | None = None
        self.host = self.metrics_host = "127.0.0.1"
        self.port = self.metrics_port = 0
        self.extra_stdout: list[str] = []
        self._threads: list[threading.Thread] = []
        self.workdir = tempfile.mkdtemp(prefix="carecrm-serve-")
        self.stderr_path = os.path.join(self.workdir, "stderr.log")
        self._stderr_offset = 0

    # -- lifecycle

    def start(self) -> "Server":
        assert self.proc is None or self.proc.poll() is not None, "already running"
        with open(self.stderr_path, "ab") as f:
            self._stderr_offset = f.tell()
            self.proc = subprocess.Popen(
                [carecrm_bin(), "serve", "--listen", "127.0.0.1:0",
                 "--metrics-listen", "127.0.0.1:0", *self.args],
                env=self.env, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=f)
        if self not in _ALL_SERVERS:
            _ALL_SERVERS.append(self)
        lines: queue.Queue = queue.Queue()
        proc = self.proc

        def pump():
            for raw in proc.stdout:
                lines.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
            lines.put(None)

        self._threads = [threading.Thread(target=pump, daemon=True)]
        self._threads[0].start()
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._abort(f"no ready line within {READY_TIMEOUT:.0f} s")
            try:
                line = lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if line is None:
                proc.wait(timeout=10)
                self._abort(f"exited with {proc.returncode} before printing the ready line")
            break
        try:
            ready = _json.loads(line)
        except ValueError:
            ready = None
        if not (isinstance(ready, dict) and ready.get("event") == "listening"):
            self._abort(f"first stdout line is not the ready line: {line!r}")
        self.host, self.port = parse_hostport(ready["http"])
        self.metrics_host, self.metrics_port = parse_hostport(ready["metrics"])

        def drain():
            while (extra := lines.get()) is not None:
                self.extra_stdout.append(extra)

        self._threads.append(threading.Thread(target=drain, daemon=True))
        self._threads[-1].start()
        return self

    def _abort(self, why: str):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        pytest.fail(f"{self.label}: `carecrm serve` {why}\nstderr tail:\n{self.stderr_tail()}",
                    pytrace=False)

    def stop(self, check: bool = True) -> int | None:
        """SIGTERM, wait <= 20 s; with check, exit code 0 and no sanitizer report are required."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                if check:
                    pytest.fail(f"{self.label}: did not stop within {STOP_TIMEOUT:.0f} s of "
                                f"SIGTERM\nstderr tail:\n{self.stderr_tail()}", pytrace=False)
        rc = proc.returncode
        for thread in self._threads:
            thread.join(timeout=5)
        if check:
            found = sanitizer_findings(self.stderr_since_start())
            if self.extra_stdout:
                pytest.fail(f"{self.label}: stdout must carry only the ready line, also got "
                            f"{self.extra_stdout[:5]!r}", pytrace=False)
            if rc != 0 or found:
                pytest.fail(f"{self.label}: exit code {rc} after SIGTERM (want 0)"
                            f"{'; sanitizer findings ' + str(found) if found else ''}\n"
                            f"stderr tail:\n{self.stderr_tail()}", pytrace=False)
        return rc

    def cleanup(self) -> None:
        """Removes the scratch directory (and the stderr log) once the server is stopped."""
        self.kill()
        if self in _ALL_SERVERS:
            _ALL_SERVERS.remove(self)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- output

    def stderr_text(self) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stderr_since_start(self) -> str:
        with open(self.stderr_path, "rb") as f:
            f.seek(self._stderr_offset)
            return f.read().decode("utf-8", "replace")

    def stderr_tail(self, limit: int = 4000) -> str:
        return tail(self.stderr_text(), limit)

    # -- clients

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.metrics_host}:{self.metrics_port}"

    def client(self) -> "Client":
        return Client(self.host, self.port)

    def metrics_client(self, token: str | None = None) -> "Client":
        """The operations listener, with the operator token the tests configure."""
        token = METRICS_TOKEN if token is None else token
        return Client(self.metrics_host, self.metrics_port,
                      headers={"Authorization": f"Bearer {token}"} if token else None)


def parse_hostport(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    assert host and port.isdigit() and int(port) > 0, f"bad address in ready line: {value!r}"
    return host.strip("[]"), int(port)


def start_server(db_url: str, redis_url: str, overrides: dict | None = None,
                 label: str = "carecrm", args: list[str] | None = None) -> Server:
    return Server(server_env(db_url, redis_url, overrides), label, args).start()


# --------------------------------------------------------------------------------------------
# HTTP


class Response(NamedTuple):
    status: int
    headers: http.client.HTTPMessage
    json: Any
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    def describe(self) -> str:
        return f"HTTP {self.status} {dict(self.headers)} {self.body[:2000]!r}"


class Client:
    """One connection per request (keep-alive is tested separately with raw connections)."""

    def __init__(self, host: str, port: int, timeout: float = 30.0, headers: dict | None = None,
                 tls_ca: str | None = None):
        self.host, self.port, self.timeout = host, port, timeout
        self.headers = dict(headers or {})
        # HTTPS to a proxy whose certificate chains to `tls_ca` (its name is not checked: the
        # test certificates are made for no host name).
        self.tls = None
        if tls_ca:
            import ssl
            self.tls = ssl.create_default_context(cafile=tls_ca)
            self.tls.check_hostname = False

    def request(self, method: str, path: str, body: Any = None, *, token: str | None = None,
                headers: dict | None = None, raw: bytes | str | None = None) -> Response:
        hdrs = dict(self.headers)
        data = None
        if raw is not None:
            data = raw.encode() if isinstance(raw, str) else raw
            hdrs["Content-Type"] = "application/json"
        elif body is not None:
            data = _json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        if token is not None:
            hdrs["Authorization"] = f"Bearer {token}"
        hdrs.update(headers or {})
        conn = (http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                            context=self.tls) if self.tls else
                http.client.HTTPConnection(self.host, self.port, timeout=self.timeout))
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = read_response(conn.getresponse())
        finally:
            conn.close()
        check_against_openapi(self.host, self.port, method, path, resp)
        return resp

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body, **kw)

    def patch(self, path, body=None, **kw):
        return self.request("PATCH", path, body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)


# ---- every JSON answer against the OpenAPI document ------------------------------------------
# Each answer a Client receives from a carecrm API listener is checked against the schema that
# GET /api/v1/openapi.json declares for its operation and status, wherever it declares one, so the
# document cannot drift from the behaviour (issue "The API described exactly").

_openapi_documents: dict = {}
_openapi_lock = threading.Lock()


def _openapi_of(host: str, port: int):
    key = (host, port)
    with _openapi_lock:
        if key in _openapi_documents:
            return _openapi_documents[key]
    doc, templates = None, []
    try:
        conn = http.client.HTTPConnection(host, port, timeout=10)
        conn.request("GET", "/api/v1/openapi.json")
        r = conn.getresponse()
        body = r.read()
        conn.close()
        if r.status == 200:
            doc = _json.loads(body)
    except (OSError, ValueError):
        doc = None
    if doc:
        for path, item in doc["paths"].items():
            pattern = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)) + "$"
            literal = sum(1 for seg in path.split("/") if seg and not seg.startswith("{"))
            templates.append((re.compile(pattern), literal, path, item))
    with _openapi_lock:
        _openapi_documents[key] = (doc, templates)
    return doc, templates


def check_against_openapi(host: str, port: int, method: str, target: str, resp: "Response"):
    doc, templates = _openapi_of(host, port)
    if not doc:
        return
    path = urllib.parse.unquote(target.split("?", 1)[0])
    found = [(literal, template, item) for regex, literal, template, item in templates
             if regex.match(path)]
    if not found:
        return
    _, template, item = max(found, key=lambda f: f[0])
    op = item.get(method.lower())
    if not op:
        return  # a method the path does not serve: 405, with the documented ones in Allow
    answer = op["responses"].get(str(resp.status))
    if not answer:
        raise AssertionError(
            f"{method} {template} answered {resp.status}, a status the OpenAPI document does not "
            f"list for it (it lists {', '.join(op['responses'])}): {resp.body[:300]!r}")
    content_type = resp.headers.get("Content-Type", "") if resp.headers else ""
    if not content_type.startswith("application/json") or resp.json is None:
        return
    if "$ref" in answer:
        answer = doc["components"]["responses"][answer["$ref"].rsplit("/", 1)[1]]
    schema = answer.get("content", {}).get("application/json", {}).get("schema")
    if not schema:
        return
    import jsonschema  # Debian's python3-jsonschema
    validator = jsonschema.Draft202012Validator(
        schema, resolver=jsonschema.RefResolver.from_schema(doc))
    errors = sorted(validator.iter_errors(resp.json), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "(the body)"
        raise AssertionError(
            f"{method} {template} answered {resp.status} with a body the OpenAPI document does "
            f"not allow: {errors[0].message} at {where}: {resp.body[:500]!r}")


def read_response(resp: http.client.HTTPResponse) -> Response:
    body = resp.read()
    parsed = None
    if body:
        try:
            parsed = _json.loads(body)
        except ValueError:
            parsed = None
    return Response(resp.status, resp.headers, parsed, body)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_closed(sock: socket.socket, limit: float) -> tuple[bool, float, bytes]:
    """Reads until the peer closes (EOF or reset) or `limit` seconds pass.
    Returns (closed, seconds waited, bytes received)."""
    start = time.monotonic()
    got = b""
    while True:
        remaining = limit - (time.monotonic() - start)
        if remaining <= 0:
            return False, time.monotonic() - start, got
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return False, time.monotonic() - start, got
        except (ConnectionResetError, BrokenPipeError):
            return True, time.monotonic() - start, got
        if not chunk:
            return True, time.monotonic() - start, got
        got += chunk


# --------------------------------------------------------------------------------------------
# Assertions on the contract's shapes


def assert_common(resp: Response) -> None:
    assert resp.header("X-Request-Id"), f"response without X-Request-Id: {resp.describe()}"


def assert_json_response(resp: Response, status: int) -> Any:
    assert resp.status == status, f"want {status}, got {resp.describe()}"
    ctype = resp.header("Content-Type") or ""
    assert ctype.startswith("application/json"), f"Content-Type {ctype!r}: {resp.describe()}"
    assert resp.json is not None, f"body is not JSON: {resp.describe()}"
    assert_common(resp)
    return resp.json


def assert_error(resp: Response, status: int, code: str) -> None:
    body = assert_json_response(resp, status)
    assert isinstance(body, dict) and set(body) == {"detail", "code"}, \
        f"error body must be exactly {{detail, code}}: {resp.describe()}"
    assert body["code"] == code, f"want code {code}: {resp.describe()}"
    assert isinstance(body["detail"], str) and body["detail"], resp.describe()
    if status == 401:
        www = resp.header("WWW-Authenticate") or ""
        assert www.lower().startswith("bearer"), f"401 without WWW-Authenticate: Bearer: " \
                                                 f"{resp.describe()}"


def validation_items(resp: Response) -> list[dict]:
    body = assert_json_response(resp, 422)
    assert isinstance(body, dict) and set(body) == {"detail"}, resp.describe()
    items = body["detail"]
    assert isinstance(items, list) and items, resp.describe()
    for item in items:
        assert isinstance(item, dict), resp.describe()
        assert isinstance(item.get("loc"), list) and item["loc"], resp.describe()
        assert item["loc"][0] in ("path", "query", "header", "body"), resp.describe()
        assert isinstance(item.get("msg"), str) and item["msg"], resp.describe()
        assert isinstance(item.get("type"), str) and item["type"], resp.describe()
    return items


def assert_validation(resp: Response, *expected: tuple[tuple, str], exact: bool = True) -> None:
    """422 in the HTTPValidationError shape reporting (loc, type) pairs; with `exact`, nothing
    else is reported."""
    got = {(tuple(i["loc"]), i["type"]) for i in validation_items(resp)}
    want = {(tuple(loc), typ) for loc, typ in expected}
    if exact:
        assert got == want, f"want {sorted(want)}, got {sorted(got)}: {resp.describe()}"
    else:
        assert want <= got, f"want at least {sorted(want)}, got {sorted(got)}: {resp.describe()}"


def assert_user(user: Any, **expected) -> None:
    assert isinstance(user, dict) and set(user) == USER_KEYS, \
        f"user must have exactly {sorted(USER_KEYS)}: {user}"
    assert isinstance(user["id"], int) and not isinstance(user["id"], bool), user
    assert isinstance(user["tenant_id"], int) and not isinstance(user["tenant_id"], bool), user
    assert isinstance(user["email"], str) and isinstance(user["full_name"], str), user
    assert user["role"] in ROLES, user
    assert isinstance(user["is_active"], bool), user
    assert isinstance(user["created_at"], str) and TIMESTAMP_RE.match(user["created_at"]), user
    for key, value in expected.items():
        assert user[key] == value, f"{key}: want {value!r}, got {user[key]!r} in {user}"


def assert_token_pair(body: Any) -> None:
    assert isinstance(body, dict), body
    for key in ("access_token", "refresh_token", "token_type", "expires_in"):
        assert key in body, f"token pair without {key}: {body}"
    assert isinstance(body["access_token"], str) and body["access_token"].count(".") == 2, body
    assert isinstance(body["refresh_token"], str) and body["refresh_token"].count(".") == 2, body
    assert body["token_type"] == "bearer", body
    assert body["expires_in"] == 1800 and isinstance(body["expires_in"], int), body


def metric(server, name: str) -> float:
    """The value of an unlabelled sample on `server`'s /metrics; fails the test when absent."""
    text = server.metrics_client(METRICS_TOKEN).get("/metrics").body.decode()
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} not in {text[:2000]}"
    return float(m.group(1))


def wait_until(what: str, check, limit: float = 15.0, step: float = 0.1):
    """check()'s first true value within `limit` seconds; else the test fails naming `what`."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(step)
    pytest.fail(f"timed out waiting until {what}")


def eventually(check, timeout: float = 2.0, interval: float = 0.05):
    """Calls check() until it returns a truthy value or `timeout` passes; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# --------------------------------------------------------------------------------------------
# API shortcuts


def login(client: Client, email: str, password: str) -> dict:
    resp = client.post("/api/v1/auth/login", {"email": email, "password": password})
    assert resp.status == 200, f"login of {email} failed: {resp.describe()}"
    assert_token_pair(resp.json)
    return resp.json


def create_user(client: Client, admin_token: str, role: str = "viewer", *,
                email: str | None = None, password: str | None = None,
                full_name: str | None = None) -> tuple[dict, str, str]:
    """POST /users as an admin; returns (user JSON, email, password)."""
    email = email or unique_email(role)
    password = password or new_password()
    full_name = full_name or f"{role.title()} {secrets.token_hex(3)}"
    resp = client.post("/api/v1/users", {"email": email, "full_name": full_name,
                                         "password": password, "role": role}, token=admin_token)
    assert resp.status == 201, f"creating a {role} failed: {resp.describe()}"
    return resp.json, email, password


def me_status(client: Client, token: str) -> int:
    return client.get("/api/v1/auth/me", token=token).status


def refresh_status(client: Client, refresh_token: str) -> int:
    return client.post("/api/v1/auth/refresh", {"refresh_token": refresh_token}).status


def list_all_users(client: Client, token: str) -> list[dict]:
    users, page = [], 1
    while True:
        resp = client.get(f"/api/v1/users?page={page}&per_page=100", token=token)
        body = assert_json_response(resp, 200)
        users.extend(body["items"])
        if page >= body["pages"]:
            return users
        page += 1


# --------------------------------------------------------------------------------------------
# JWT


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwt_parts(token: str) -> tuple[dict, dict, bytes]:
    h, p, s = token.split(".")
    return _json.loads(b64url_decode(h)), _json.loads(b64url_decode(p)), b64url_decode(s)


def jwt_sign(header: dict, payload: dict, secret: str | bytes = JWT_SECRET,
             alg: str | None = None) -> str:
    """Encodes header and payload and signs with `alg` (default: header's alg). HS256/384/512
    use HMAC with `secret`; 'none' (any case) gives an empty signature."""
    alg = alg or header.get("alg", "HS256")
    key = secret.encode() if isinstance(secret, str) else secret
    signing_input = (b64url(_json.dumps(header, separators=(",", ":")).encode()) + "." +
                     b64url(_json.dumps(payload, separators=(",", ":")).encode()))
    digests = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}
    if alg.lower() == "none":
        return signing_input + "."
    sig = hmac.new(key, signing_input.encode(), digests[alg]).digest()
    return signing_input + "." + b64url(sig)


def jwt_verify_hs256(token: str, secret: str = JWT_SECRET) -> bool:
    h, p, s = token.split(".")
    want = hmac.new(secret.encode(), f"{h}.{p}".encode(), hashlib.sha256).digest()
    return hmac.compare_digest(want, b64url_decode(s))


# --------------------------------------------------------------------------------------------
# Metrics


def parse_prometheus(text: str) -> list[tuple[str, dict, float]]:
    """[(metric name, labels, value)] for every sample line."""
    samples = []
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = line_re.match(line.strip())
        assert m, f"not a Prometheus sample line: {line!r}"
        labels = dict(label_re.findall(m.group(3) or ""))
        value = m.group(4)
        samples.append((m.group(1), labels, math.inf if value == "+Inf" else float(value)))
    return samples


# --------------------------------------------------------------------------------------------
# A private redis-server (resilience tests)


class RedisServer:
    """redis-server on a free port in its own directory, AOF with fsync on every write."""

    def __init__(self, directory: str):
        self.dir = directory
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(directory, "redis.log")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> "RedisServer":
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", self.dir, "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             "--daemonize", "no", "--logfile", self.log_path],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if self.ping():
                return self
            time.sleep(0.05)
        log = ""
        if os.path.exists(self.log_path):
            with open(self.log_path, errors="replace") as f:
                log = f.read()
        self.kill9()
        pytest.fail(f"redis-server on port {self.port} did not come up\n{tail(log)}",
                    pytrace=False)

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill9()

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------------------------
# A private PostgreSQL cluster (fault tests that stop or restart Postgres)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
LIB_SH = os.path.join(REPO_ROOT, "scripts", "lib.sh")
_ALL_CLUSTERS: list["PgCluster"] = []


@atexit.register
def _stop_leftover_clusters() -> None:
    for cluster in list(_ALL_CLUSTERS):
        cluster.destroy(check=False)


class PgCluster:
    """A PostgreSQL cluster of its own (scripts/lib.sh pg_start: fsync on, 127.0.0.1 only) in a
    fresh temporary directory on a free port. The shared test cluster is never touched, so a
    test may stop and restart this one at will. `destroy()` stops it and removes the
    directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="carecrm-pg-")
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "postgres.log")
        self.port = free_port()
        _ALL_CLUSTERS.append(self)

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def lib(self, command: str, check: bool = True, timeout: float = 180) -> bool:
        """Runs `command` in bash with scripts/lib.sh sourced; with check, fails the test with
        its output (and the server log's tail) when it exits non-zero."""
        r = subprocess.run(["bash", "-c", f"source {shlex.quote(LIB_SH)} && {command}"],
                           capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        if r.returncode != 0 and check:
            pytest.fail(f"`{command}` exited {r.returncode}\nstdout: {tail(r.stdout)}\n"
                        f"stderr: {tail(r.stderr)}\npostgres.log: {tail(self.log(), 3000)}",
                        pytrace=False)
        return r.returncode == 0

    def start(self) -> "PgCluster":
        """initdb on the first call; returns once the server accepts connections."""
        self.lib(f"pg_start {shlex.quote(self.data)} {self.port}")
        return self

    def stop(self) -> None:
        """Fast shutdown: open transactions are rolled back, sessions are cut."""
        self.lib(f"pg_stop {shlex.quote(self.data)}")

    def create_database(self, name: str | None = None) -> Database:
        name = name or "crm_t_" + secrets.token_hex(6)
        self.lib(f"pg_ensure_db {self.port} {shlex.quote(name)}")
        return Database.existing(self.admin_dsn, name)

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def destroy(self, check: bool = True) -> None:
        if os.path.isdir(self.dir):
            self.lib(f"pg_stop {shlex.quote(self.data)}", check=check)
            shutil.rmtree(self.dir, ignore_errors=True)
        if self in _ALL_CLUSTERS:
            _ALL_CLUSTERS.remove(self)


# --------------------------------------------------------------------------------------------
# Contacts, companies and tags (contract §4, §5)

CONTACTS = "/api/v1/contacts"
COMPANIES = "/api/v1/companies"
TAGS = "/api/v1/tags"
NOWHERE_ID = 8_000_000_000_000_000_000  # a valid 64-bit id that no record has

CONTACT_STATUSES = ("active", "inactive", "qualified", "unqualified")
CONTACT_SOURCES = ("website", "referral", "social", "ads", "api", "import", "manual")
CONTACT_CREATE_KEYS = {"id", "first_name", "last_name", "email", "phone", "status", "created_at"}
CONTACT_ITEM_KEYS = {"id", "first_name", "last_name", "email", "phone", "company_id", "owner_id",
                     "status", "source", "created_at", "updated_at"}
CONTACT_KEYS = CONTACT_ITEM_KEYS | {"company", "tags", "custom_fields"}
COMPANY_KEYS = {"id", "name", "domain", "phone", "industry", "address", "custom_fields",
                "created_at", "updated_at"}
PAGE_KEYS = {"items", "total", "page", "per_page", "pages"}
EXPORT_HEADER = ["id", "first_name", "last_name", "email", "phone", "company_id", "status",
                 "source", "tags", "custom_fields", "created_at", "updated_at", "owner_id"]


def contact_url(contact_id) -> str:
    return f"{CONTACTS}/{contact_id}"


def company_url(company_id) -> str:
    return f"{COMPANIES}/{company_id}"


def with_query(path: str, params: Any = None) -> str:
    """path?urlencoded params (a dict or a list of pairs; list values repeat the parameter)."""
    if not params:
        return path
    return path + "?" + urllib.parse.urlencode(params, doseq=True)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def assert_timestamp(value: Any) -> None:
    assert isinstance(value, str) and TIMESTAMP_RE.match(value), \
        f"not an RFC 3339 UTC timestamp with microseconds: {value!r}"


def parse_timestamp(value: str):
    import datetime
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc)


def _assert_expected(record: dict, expected: dict) -> None:
    for key, value in expected.items():
        assert key in record, f"{key} missing in {record}"
        assert record[key] == value, f"{key}: want {value!r}, got {record[key]!r} in {record}"


def _assert_optional_str(record: dict, *keys: str) -> None:
    for key in keys:
        assert record[key] is None or isinstance(record[key], str), f"{key}: {record}"


def assert_contact_created(body: Any, **expected) -> None:
    """The create response: exactly id, first_name, last_name, email, phone, status, created_at."""
    assert isinstance(body, dict) and set(body) == CONTACT_CREATE_KEYS, \
        f"create response must have exactly {sorted(CONTACT_CREATE_KEYS)}: {body}"
    assert is_int(body["id"]), body
    assert isinstance(body["first_name"], str), body
    _assert_optional_str(body, "last_name", "email", "phone")
    assert body["status"] in CONTACT_STATUSES, body
    assert_timestamp(body["created_at"])
    _assert_expected(body, expected)


def assert_contact_item(item: Any, **expected) -> None:
    """A list item: exactly id, first_name, last_name, email, phone, company_id, status, source,
    created_at, updated_at."""
    assert isinstance(item, dict) and set(item) == CONTACT_ITEM_KEYS, \
        f"list item must have exactly {sorted(CONTACT_ITEM_KEYS)}: {item}"
    assert is_int(item["id"]), item
    assert isinstance(item["first_name"], str), item
    _assert_optional_str(item, "last_name", "email", "phone")
    assert item["company_id"] is None or is_int(item["company_id"]), item
    assert item["status"] in CONTACT_STATUSES, item
    assert item["source"] is None or item["source"] in CONTACT_SOURCES, item
    assert_timestamp(item["created_at"])
    assert_timestamp(item["updated_at"])
    _assert_expected(item, expected)


def assert_contact(body: Any, **expected) -> None:
    """The single-contact shape (GET by id): the list item plus company, tags, custom_fields."""
    assert isinstance(body, dict) and set(body) == CONTACT_KEYS, \
        f"contact must have exactly {sorted(CONTACT_KEYS)}: {body}"
    assert_contact_item({k: body[k] for k in CONTACT_ITEM_KEYS})
    company = body["company"]
    if body["company_id"] is None:
        assert company is None, f"company without company_id: {body}"
    else:
        assert isinstance(company, dict) and set(company) == {"id", "name"}, body
        assert company["id"] == body["company_id"] and isinstance(company["name"], str), body
    assert isinstance(body["tags"], list) and all(isinstance(t, str) for t in body["tags"]), body
    assert isinstance(body["custom_fields"], dict), body
    _assert_expected(body, expected)


def assert_company(body: Any, **expected) -> None:
    assert isinstance(body, dict) and set(body) == COMPANY_KEYS, \
        f"company must have exactly {sorted(COMPANY_KEYS)}: {body}"
    assert is_int(body["id"]), body
    assert isinstance(body["name"], str), body
    _assert_optional_str(body, "domain", "phone", "industry", "address")
    assert isinstance(body["custom_fields"], dict), body
    assert_timestamp(body["created_at"])
    assert_timestamp(body["updated_at"])
    _assert_expected(body, expected)


def assert_page(body: Any, total: int | None = None, page: int | None = None,
                per_page: int | None = None) -> None:
    assert isinstance(body, dict) and set(body) == PAGE_KEYS, \
        f"page must have exactly {sorted(PAGE_KEYS)}: {body}"
    assert isinstance(body["items"], list), body
    for key in ("total", "page", "per_page", "pages"):
        assert is_int(body[key]), body
    assert body["pages"] == math.ceil(body["total"] / body["per_page"]), body
    for key, value in (("total", total), ("page", page), ("per_page", per_page)):
        if value is not None:
            assert body[key] == value, f"{key}: want {value}: {body}"


def assert_no_content(resp: Response) -> None:
    assert resp.status == 204, f"want 204, got {resp.describe()}"
    assert resp.body == b"", f"204 with a body: {resp.describe()}"
    assert_common(resp)


def assert_validation_locs(resp: Response, *locs: tuple) -> None:
    """422 reporting exactly these locs (any type)."""
    got = {tuple(i["loc"]) for i in validation_items(resp)}
    want = {tuple(loc) for loc in locs}
    assert got == want, f"want locs {sorted(want)}, got {sorted(got)}: {resp.describe()}"


def create_contact(client: Client, token: str, **fields) -> dict:
    """POST /contacts; returns the create response (201 required)."""
    fields.setdefault("first_name", "Test")
    resp = client.post(CONTACTS, fields, token=token)
    assert resp.status == 201, f"creating contact {fields} failed: {resp.describe()}"
    return resp.json


def get_contact(client: Client, token: str, contact_id: int) -> dict:
    return assert_json_response(client.get(contact_url(contact_id), token=token), 200)


def create_company(client: Client, token: str, **fields) -> dict:
    fields.setdefault("name", "Company " + secrets.token_hex(3))
    resp = client.post(COMPANIES, fields, token=token)
    assert resp.status == 201, f"creating company {fields} failed: {resp.describe()}"
    return resp.json


def get_company(client: Client, token: str, company_id: int) -> dict:
    return assert_json_response(client.get(company_url(company_id), token=token), 200)


def list_page(client: Client, token: str, path: str, params: Any = None) -> dict:
    return assert_json_response(client.get(with_query(path, params), token=token), 200)


def list_all(client: Client, token: str, path: str, params: Any = None) -> list[dict]:
    """Every item of a paginated list (per_page=100), following `pages`."""
    base = list(params.items()) if isinstance(params, dict) else list(params or [])
    items, page = [], 1
    while True:
        body = list_page(client, token, path, base + [("page", page), ("per_page", 100)])
        items.extend(body["items"])
        if page >= body["pages"]:
            return items
        page += 1


def list_total(client: Client, token: str, path: str = CONTACTS, params: Any = None) -> int:
    base = list(params.items()) if isinstance(params, dict) else list(params or [])
    return list_page(client, token, path, base + [("per_page", 1)])["total"]


def tags_of(client: Client, token: str) -> list[dict]:
    return assert_json_response(client.get(TAGS, token=token), 200)


class TenantSession(NamedTuple):
    """A tenant with a logged-in admin and one logged-in user per extra role."""
    tenant: Tenant
    tokens: dict   # role -> access token ("admin" included)
    users: dict    # role -> user JSON (not for "admin")

    @property
    def admin(self) -> str:
        return self.tokens["admin"]


def tenant_session(client: Client, env: dict, roles: tuple = ()) -> TenantSession:
    tenant = create_tenant(env)
    tokens = {"admin": login(client, tenant.admin_email, tenant.admin_password)["access_token"]}
    users = {}
    for role in roles:
        user, email, password = create_user(client, tokens["admin"], role)
        users[role] = user
        tokens[role] = login(client, email, password)["access_token"]
    return TenantSession(tenant, tokens, users)


def run_parallel(fn, args: list, workers: int = 16) -> list:
    """fn(arg) for every arg on `workers` threads, all released at once; results in arg order."""
    from concurrent.futures import ThreadPoolExecutor
    released = threading.Event()
    barrier = threading.Barrier(min(workers, len(args)) or 1, action=released.set)

    def call(arg):
        if not released.is_set():  # only the first `workers` calls wait for each other
            try:
                barrier.wait(timeout=10)
            except threading.BrokenBarrierError:
                pass
        return fn(arg)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(call, args))


def dump_database(db: "Database") -> str:
    """Every row of every table of the database, as JSON text (traces of erased or sealed
    values are searched in it)."""
    tables = db.query("SELECT string_agg(relname, ' ') FROM pg_class c JOIN pg_namespace n "
                      "ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND "
                      "c.relkind = 'r'").split()
    # One psql for every table (a psql per table took seconds).
    script = "".join(f"SELECT coalesce(string_agg(row_to_json(t)::text, E'\\n'), '') FROM {t} t;\n"
                     for t in tables)
    r = subprocess.run(["psql", db.url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-f", "-"],
                       input=script, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"psql failed ({r.returncode}) dumping the database: {r.stderr.strip()}")
    return r.stdout


def sql_rows(db: "Database", select: str) -> list[dict]:
    """The rows of `select` as a list of dicts (through json_agg)."""
    out = db.query(f"SELECT coalesce(json_agg(t), '[]'::json) FROM ({select}) t").strip()
    return _json.loads(out)


# --------------------------------------------------------------------------------------------
# Custom fields (contract §6)

FIELD_ENTITIES = ("contact", "company", "deal")
FIELD_TYPES = ("text", "textarea", "number", "integer", "boolean", "date", "datetime", "email",
               "phone", "url", "select", "multiselect")
SELECT_TYPES = ("select", "multiselect")
FIELD_KEYS = {"field_id", "entity", "name", "label", "field_type", "options", "required",
              "sensitive", "is_active", "created_at", "updated_at"}


def fields_url(entity: str, params: Any = None) -> str:
    return with_query(f"/api/v1/fields/{entity}/custom", params)


def field_url(entity: str, field_id, params: Any = None) -> str:
    return with_query(f"/api/v1/fields/{entity}/custom/{field_id}", params)


def field_name(prefix: str = "f") -> str:
    """A unique name matching ^[a-z][a-z0-9_]{0,62}$ (prefix: lower-case letters/digits/_)."""
    return f"{prefix}_{secrets.token_hex(4)}"


def assert_field(body: Any, **expected) -> None:
    """Exactly field_id, entity, name, label, field_type, options, required, sensitive,
    is_active, created_at, updated_at; options a list of strings for select types, null otherwise."""
    assert isinstance(body, dict) and set(body) == FIELD_KEYS, \
        f"custom field must have exactly {sorted(FIELD_KEYS)}: {body}"
    assert is_int(body["field_id"]), body
    assert body["entity"] in FIELD_ENTITIES, body
    assert isinstance(body["name"], str) and isinstance(body["label"], str), body
    assert body["field_type"] in FIELD_TYPES, body
    if body["field_type"] in SELECT_TYPES:
        assert isinstance(body["options"], list) and body["options"], body
        assert all(isinstance(o, str) for o in body["options"]), body
    else:
        assert body["options"] is None, f"options must be null for {body['field_type']}: {body}"
    assert isinstance(body["required"], bool) and isinstance(body["is_active"], bool), body
    assert_timestamp(body["created_at"])
    assert_timestamp(body["updated_at"])
    assert body["updated_at"] >= body["created_at"], body
    _assert_expected(body, expected)


def create_field(client: Client, token: str, entity: str = "contact", **fields) -> dict:
    """POST /fields/{entity}/custom (201 and Location required); returns the field."""
    fields.setdefault("name", field_name())
    fields.setdefault("field_type", "text")
    resp = client.post(fields_url(entity), fields, token=token)
    assert resp.status == 201, f"creating custom field {fields} failed: {resp.describe()}"
    body = assert_json_response(resp, 201)
    assert_field(body, entity=entity, name=fields["name"], field_type=fields["field_type"])
    assert resp.header("Location") == field_url(entity, body["field_id"]), resp.describe()
    return body


def get_field(client: Client, token: str, entity: str, field_id: int) -> dict:
    body = assert_json_response(client.get(field_url(entity, field_id), token=token), 200)
    assert_field(body)
    return body


def list_fields(client: Client, token: str, entity: str, include_inactive: Any = None) -> list:
    params = None if include_inactive is None else {"include_inactive": include_inactive}
    body = assert_json_response(client.get(fields_url(entity, params), token=token), 200)
    assert isinstance(body, list), f"field list must be a JSON array: {body}"
    for item in body:
        assert_field(item, entity=entity)
    return body


MISSING = object()  # in a request-body override: leave this field out


def with_override(base: dict, override: dict) -> dict:
    """`base` with `override` applied: MISSING removes a key, any other value sets it."""
    body = dict(base)
    for key, value in override.items():
        if value is MISSING:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def assert_bulk_results(body, n) -> list[dict]:
    """{"results": [...]} of a bulk create or import: one entry per input, in input order, each
    an id or a non-empty list of validation items."""
    assert isinstance(body, dict) and set(body) == {"results"}, body
    results = body["results"]
    assert isinstance(results, list) and len(results) == n, body
    for i, item in enumerate(results):
        assert isinstance(item, dict) and item.get("index") == i, item
        assert set(item) in ({"index", "id"}, {"index", "errors"}), item
        if "id" in item:
            assert is_int(item["id"]), item
        else:
            assert isinstance(item["errors"], list) and item["errors"], item
            for err in item["errors"]:
                assert set(err) == {"loc", "msg", "type"}, err
                assert isinstance(err["msg"], str) and err["msg"], err
    return results


# --------------------------------------------------------------------------------------------
# Automation (contract §7, docs/automation.md): a local HTTP receiver for outbound webhook
# deliveries and workflow http_request actions, Standard Webhooks verification, and shortcuts
# for workflows, runs, inbound webhooks and webhook subscriptions.

import http.server as _http_server  # noqa: E402  (kept with the code that uses it)

HANG = "hang"  # a Receiver plan entry: read the request, record it, never answer


class ReceivedRequest:
    """One request a Receiver got: method, path (with query), headers (case-insensitive
    `header()`), the raw body bytes, `at` (time.time() when it was read) and `status` (what the
    receiver answered; None when it hung)."""

    def __init__(self, method: str, path: str, headers, body: bytes, at: float,
                 status: int | None):
        self.method, self.path, self.headers, self.body = method, path, headers, body
        self.at, self.status = at, status

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    @property
    def json(self) -> Any:
        try:
            return _json.loads(self.body)
        except ValueError:
            return None

    def describe(self) -> str:
        return (f"{self.method} {self.path} -> {self.status} {dict(self.headers.items())} "
                f"{self.body[:1000]!r}")

    def __repr__(self) -> str:
        return f"<ReceivedRequest {self.describe()}>"


class RecordingServer:
    """What the tests' stand-in servers share (Receiver, fake_llm.FakeLLM): each records its
    requests in `_requests` under `_cond` and runs `_server` in `_thread`. Waiting for
    requests, stopping, and use as a context manager."""

    _what = "server"

    def wait_for(self, n: int, timeout: float = 15.0, where=None) -> list:
        """Waits until at least n requests (matching `where(req)` if given) arrived; returns the
        matching requests. Fails the test (AssertionError) on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [r for r in self._requests if where is None or where(r)]
                if len(got) >= n:
                    return got
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(timeout=min(remaining, 0.2))
            everything = list(self._requests)
        raise AssertionError(f"{self._what} on port {self.port}: want {n} matching request(s) "
                             f"within {timeout:.0f} s, got {len(got)}; all requests: "
                             f"{[r.describe() for r in everything]}")

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class Receiver(RecordingServer):
    """An HTTP server on 127.0.0.1:<free port> in a thread that records every request and answers
    from a plan: `responses` are answered in order, then the last one forever. An entry is a
    status (int), HANG (accept, read, never answer until stop()), or (status, headers, body).
    `hang=True` hangs on every request. Usable as a context manager."""

    _what = "receiver"

    def __init__(self, responses=(200,), *, hang: bool = False, body: bytes = b"ok",
                 port: int = 0):
        self._cond = threading.Condition()
        self._requests: list[ReceivedRequest] = []
        self._plan = list(responses) or [200]
        self._served = 0
        self._hang = hang
        self._default_body = body
        self._stopping = threading.Event()
        self._stopped = False
        receiver = self

        class Handler(_http_server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _read_body(self) -> bytes:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    out = b""
                    while True:
                        size_line = self.rfile.readline()
                        if not size_line:
                            return out
                        size = int(size_line.split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()  # CRLF after the chunk
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length > 0 else b""

            def _handle(self):
                body = self._read_body()
                entry = receiver._take_entry()
                status = None if entry == HANG else (entry if isinstance(entry, int) else entry[0])
                receiver._record(ReceivedRequest(self.command, self.path, self.headers, body,
                                                 time.time(), status))
                self.close_connection = True
                if entry == HANG:
                    receiver._stopping.wait(timeout=600)
                    return
                if isinstance(entry, int):
                    headers, payload = {}, receiver._default_body
                else:
                    _, headers, payload = entry
                    payload = payload if payload is not None else b""
                if isinstance(payload, str):
                    payload = payload.encode()
                bodiless = status < 200 or status in (204, 304)
                if bodiless:
                    payload = b""
                try:
                    self.send_response(status)
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    if not bodiless:
                        if not any(k.lower() == "content-type" for k in (headers or {})):
                            self.send_header("Content-Type", "text/plain")
                        self.send_header("Content-Length", str(len(payload)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _handle

        class _Server(_http_server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = _Server(("127.0.0.1", port), Handler)
        self.host, self.port = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    # -- plan

    def _take_entry(self):
        with self._cond:
            if self._hang:
                return HANG
            entry = self._plan[min(self._served, len(self._plan) - 1)]
            self._served += 1
            return entry

    def set_responses(self, responses, *, hang: bool = False) -> None:
        """A new plan, starting from its first entry with the next request."""
        with self._cond:
            self._plan = list(responses) or [200]
            self._served = 0
            self._hang = hang

    def _record(self, req: ReceivedRequest) -> None:
        with self._cond:
            self._requests.append(req)
            self._cond.notify_all()

    # -- what arrived

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def requests(self) -> list[ReceivedRequest]:
        with self._cond:
            return list(self._requests)



def _header_value(headers, name: str) -> str | None:
    if hasattr(headers, "get_all") or hasattr(headers, "getheader"):
        return headers.get(name)
    for key, value in dict(headers).items():
        if key.lower() == name.lower():
            return value
    return None


def standard_webhook_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret: base64 after "whsec_", else the UTF-8 bytes."""
    if secret.startswith("whsec_"):
        return base64.b64decode(secret[len("whsec_"):])
    return secret.encode("utf-8")


def sign_standard_webhook(secret: str, msg_id: str, timestamp, body: bytes | str) -> str:
    """"v1,<base64 HMAC-SHA256(key, id.timestamp.body)>"."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    content = f"{msg_id}.{timestamp}.".encode("utf-8") + raw
    digest = hmac.new(standard_webhook_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify_standard_webhook(secret: str, headers, body: bytes | str,
                            tolerance: float | None = None) -> bool:
    """Standard Webhooks verification, written independently of the server: webhook-id,
    webhook-timestamp and webhook-signature (a space-separated list of "v1,<base64>") must be
    present and one v1 signature must match. With `tolerance`, the timestamp must also be within
    that many seconds of now."""
    msg_id = _header_value(headers, "webhook-id")
    timestamp = _header_value(headers, "webhook-timestamp")
    signatures = _header_value(headers, "webhook-signature")
    if not (msg_id and timestamp and signatures):
        return False
    if tolerance is not None:
        try:
            if abs(time.time() - int(timestamp)) > tolerance:
                return False
        except ValueError:
            return False
    want = sign_standard_webhook(secret, msg_id, timestamp, body).split(",", 1)[1]
    for candidate in signatures.split():
        version, _, sig = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(sig.encode(), want.encode()):
            return True
    return False


def inbound_webhook_signature(secret: str, body: bytes | str) -> str:
    """X-Webhook-Signature of an inbound workflow webhook: sha256=<hex HMAC-SHA256(secret, body)>."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    return "sha256=" + hmac.new(secret.encode("utf-8"), raw, hashlib.sha256).hexdigest()


def closed_port_url(path: str = "/hook") -> str:
    """An http URL on 127.0.0.1 where (very probably) nothing listens."""
    return f"http://127.0.0.1:{free_port()}{path}"


WORKFLOWS = "/api/v1/workflows"
WORKFLOW_RUNS = "/api/v1/workflow-runs"
WEBHOOKS = "/api/v1/webhooks"
SUBSCRIPTIONS = "/api/v1/webhook-subscriptions"

RECORD_EVENTS = ("contact.created", "contact.updated", "contact.deleted", "contact.status_changed",
                 "contact.tag_added", "deal.created", "deal.updated", "deal.stage_changed",
                 "deal.won", "deal.lost", "deal.deleted", "message.received",
                 "appointment.booked", "appointment.rescheduled", "appointment.cancelled",
                 "appointment.confirmed", "appointment.no_show", "appointment.completed",
                 "task.overdue")
TRIGGER_TYPES = RECORD_EVENTS + ("webhook", "schedule", "manual")
CONDITION_OPS = ("eq", "neq", "contains", "in", "gt", "lt", "exists", "changed_to")
RUN_STATUSES = ("queued", "running", "waiting", "succeeded", "failed")
FINISHED = ("succeeded", "failed")
DELIVERY_STATUSES = ("pending", "succeeded", "failed")

WORKFLOW_KEYS = {"id", "name", "description", "trigger_type", "trigger_config", "conditions",
                 "actions", "is_active", "has_secret", "is_webhook_trigger", "webhook_url",
                 "next_run_at", "created_at", "updated_at"}
RUN_KEYS = {"id", "workflow_id", "status", "trigger_type", "trigger_payload", "depth",
            "conditions_met", "steps", "error", "resume_at", "created_at", "started_at",
            "finished_at", "updated_at"}
STEP_KEYS = {"index", "type", "status", "params", "result", "error", "started_at", "finished_at"}
WEBHOOK_INFO_KEYS = {"has_secret", "workflow_id", "workflow_name", "trigger_type",
                     "is_webhook_trigger", "webhook_url"}
SUBSCRIPTION_KEYS = {"id", "url", "events", "description", "is_active", "has_secret",
                     "disabled_reason", "created_at", "updated_at"}
DELIVERY_KEYS = {"id", "subscription_id", "event", "webhook_id", "status", "attempts",
                 "next_attempt_at", "last_status_code", "last_error", "payload", "created_at",
                 "delivered_at", "attempt_log"}
ATTEMPT_KEYS = {"attempt", "at", "status_code", "error", "duration_ms"}


def workflow_url(workflow_id) -> str:
    return f"{WORKFLOWS}/{workflow_id}"


def workflow_runs_url(workflow_id, params: Any = None) -> str:
    return with_query(f"{WORKFLOWS}/{workflow_id}/runs", params)


def workflow_run_now_url(workflow_id) -> str:
    return f"{WORKFLOWS}/{workflow_id}/run"


def run_url(run_id) -> str:
    return f"{WORKFLOW_RUNS}/{run_id}"


def webhook_trigger_url(workflow_id) -> str:
    return f"{WEBHOOKS}/{workflow_id}"


def webhook_info_url(workflow_id) -> str:
    return f"{WEBHOOKS}/info/{workflow_id}"


def subscription_url(subscription_id) -> str:
    return f"{SUBSCRIPTIONS}/{subscription_id}"


def deliveries_url(subscription_id, params: Any = None) -> str:
    return with_query(f"{SUBSCRIPTIONS}/{subscription_id}/deliveries", params)


def redeliver_url(subscription_id, delivery_id) -> str:
    return f"{SUBSCRIPTIONS}/{subscription_id}/deliveries/{delivery_id}/redeliver"


def _assert_optional_timestamp(record: dict, *keys: str) -> None:
    for key in keys:
        if record[key] is not None:
            assert_timestamp(record[key])


def assert_workflow(body: Any, secret_shown: bool = False, **expected) -> None:
    """Exactly the workflow keys of docs/automation.md, with their types; never a secret, but
    for the one answer that drew a webhook workflow's secret (`secret_shown`): then also
    `webhook_secret`, "whsec_" + base64 of 24 random bytes."""
    want = WORKFLOW_KEYS | ({"webhook_secret"} if secret_shown else set())
    assert isinstance(body, dict) and set(body) == want, \
        f"workflow must have exactly {sorted(want)}: {body}"
    if secret_shown:
        drawn = body["webhook_secret"]
        assert isinstance(drawn, str) and drawn.startswith("whsec_"), body
        assert len(base64.b64decode(drawn[len("whsec_"):], validate=True)) == 24, body
        assert body["trigger_type"] == "webhook" and body["has_secret"] is True, body
    assert is_int(body["id"]), body
    assert isinstance(body["name"], str) and body["name"], body
    _assert_optional_str(body, "description")
    assert body["trigger_type"] in TRIGGER_TYPES, body
    assert isinstance(body["trigger_config"], dict), body
    assert isinstance(body["conditions"], list) and isinstance(body["actions"], list), body
    for key in ("is_active", "has_secret", "is_webhook_trigger"):
        assert isinstance(body[key], bool), f"{key}: {body}"
    assert body["is_webhook_trigger"] == (body["trigger_type"] == "webhook"), body
    if body["trigger_type"] == "webhook":
        assert isinstance(body["webhook_url"], str) and \
            body["webhook_url"].endswith(f"/api/v1/webhooks/{body['id']}"), body
        assert body["webhook_url"].startswith(("http://", "https://")), body
    else:
        assert body["webhook_url"] is None, f"webhook_url of a non-webhook workflow: {body}"
    if body["trigger_type"] == "schedule" and body["is_active"]:
        assert_timestamp(body["next_run_at"])
    else:
        assert body["next_run_at"] is None, f"next_run_at: {body}"
    assert_timestamp(body["created_at"])
    assert_timestamp(body["updated_at"])
    assert body["updated_at"] >= body["created_at"], body
    _assert_expected(body, expected)


def create_workflow(client: Client, token: str, **fields) -> dict:
    """POST /workflows (201 + Location required); defaults: a unique name, trigger manual.
    Returns the create answer: a webhook workflow created without a secret (or with null) has
    one drawn, shown once there as `webhook_secret` (GET and lists never show it)."""
    fields.setdefault("name", unique("wf"))
    fields.setdefault("trigger_type", "manual")
    resp = client.post(WORKFLOWS, fields, token=token)
    assert resp.status == 201, f"creating workflow {fields} failed: {resp.describe()}"
    body = assert_json_response(resp, 201)
    drawn = fields["trigger_type"] == "webhook" and fields.get("webhook_secret") is None
    assert_workflow(body, secret_shown=drawn, trigger_type=fields["trigger_type"])
    assert resp.header("Location") == workflow_url(body["id"]), resp.describe()
    return body


def get_workflow(client: Client, token: str, workflow_id) -> dict:
    body = assert_json_response(client.get(workflow_url(workflow_id), token=token), 200)
    assert_workflow(body)
    return body


def assert_step(step: Any, index: int | None = None) -> None:
    assert isinstance(step, dict) and set(step) == STEP_KEYS, \
        f"step must have exactly {sorted(STEP_KEYS)}: {step}"
    assert is_int(step["index"]) and isinstance(step["type"], str), step
    if index is not None:
        assert step["index"] == index, step
    assert step["status"] in RUN_STATUSES, step
    assert isinstance(step["params"], dict), step
    assert step["error"] is None or isinstance(step["error"], str), step
    _assert_optional_timestamp(step, "started_at", "finished_at")


def assert_run(body: Any, **expected) -> None:
    assert isinstance(body, dict) and set(body) == RUN_KEYS, \
        f"run must have exactly {sorted(RUN_KEYS)}: {body}"
    assert is_int(body["id"]) and is_int(body["workflow_id"]) and is_int(body["depth"]), body
    assert body["status"] in RUN_STATUSES, body
    assert body["trigger_type"] in TRIGGER_TYPES, body
    assert isinstance(body["conditions_met"], bool), body
    assert isinstance(body["steps"], list), body
    for step in body["steps"]:
        assert_step(step)
    assert body["error"] is None or isinstance(body["error"], str), body
    for key in ("created_at", "updated_at"):
        assert_timestamp(body[key])
    _assert_optional_timestamp(body, "started_at", "finished_at", "resume_at")
    if body["status"] in FINISHED:
        assert_timestamp(body["finished_at"])
    if body["status"] == "failed":
        assert isinstance(body["error"], str) and body["error"], f"failed without error: {body}"
    _assert_expected(body, expected)


def get_run(client: Client, token: str, run_id) -> dict:
    body = assert_json_response(client.get(run_url(run_id), token=token), 200)
    assert_run(body)
    return body


def wait_run(client: Client, token: str, run_id, statuses=FINISHED,
             timeout: float = 20.0) -> dict:
    """Polls GET /workflow-runs/{id} until its status is one of `statuses`; returns the run."""
    last = {}

    def check():
        last["run"] = get_run(client, token, run_id)
        return last["run"]["status"] in statuses

    if not eventually(check, timeout, 0.1):
        raise AssertionError(f"run {run_id} did not reach {statuses} within {timeout:.0f} s: "
                             f"{last.get('run')}")
    return last["run"]


def list_runs(client: Client, token: str, workflow_id, params: Any = None) -> list[dict]:
    """Every run of a workflow (all pages), newest first."""
    base = list(params.items()) if isinstance(params, dict) else list(params or [])
    items, page = [], 1
    while True:
        resp = client.get(workflow_runs_url(workflow_id, base + [("page", page),
                                                                  ("per_page", 100)]),
                          token=token)
        body = assert_json_response(resp, 200)
        assert_page(body)
        items.extend(body["items"])
        if page >= body["pages"]:
            return items
        page += 1


def wait_runs(client: Client, token: str, workflow_id, n: int, timeout: float = 20.0,
              finished: bool = True) -> list[dict]:
    """Waits until the workflow has at least n runs (all finished, with `finished`); returns
    them newest first."""
    last = {"runs": []}

    def check():
        runs = list_runs(client, token, workflow_id)
        last["runs"] = runs
        return len(runs) >= n and (not finished or all(r["status"] in FINISHED for r in runs))

    if not eventually(check, timeout, 0.2):
        raise AssertionError(f"workflow {workflow_id}: want {n} {'finished ' if finished else ''}"
                             f"run(s) within {timeout:.0f} s, got {last['runs']}")
    return last["runs"]


def start_run(client: Client, token: str, workflow_id) -> int:
    """POST /workflows/{id}/run on a manual workflow: 202 {"run_id", "status": "queued"}."""
    body = assert_json_response(client.post(workflow_run_now_url(workflow_id), token=token), 202)
    assert isinstance(body, dict) and set(body) == {"run_id", "status"}, body
    assert is_int(body["run_id"]) and body["status"] == "queued", body
    return body["run_id"]


def assert_subscription(body: Any, secret_returned: bool = False, **expected) -> None:
    want = SUBSCRIPTION_KEYS | ({"secret"} if secret_returned else set())
    assert isinstance(body, dict) and set(body) == want, \
        f"subscription must have exactly {sorted(want)}: {body}"
    assert is_int(body["id"]) and isinstance(body["url"], str), body
    assert isinstance(body["events"], list) and body["events"], body
    _assert_optional_str(body, "description", "disabled_reason")
    assert isinstance(body["is_active"], bool) and body["has_secret"] is True, body
    assert_timestamp(body["created_at"])
    assert_timestamp(body["updated_at"])
    _assert_expected(body, expected)


def create_subscription(client: Client, token: str, **fields) -> dict:
    """POST /webhook-subscriptions (201 + Location required)."""
    fields.setdefault("events", ["*"])
    resp = client.post(SUBSCRIPTIONS, fields, token=token)
    assert resp.status == 201, f"creating subscription {fields} failed: {resp.describe()}"
    body = assert_json_response(resp, 201)
    assert_subscription(body, secret_returned="secret" not in fields, url=fields["url"],
                        events=fields["events"])
    assert resp.header("Location") == subscription_url(body["id"]), resp.describe()
    return body


def get_subscription(client: Client, token: str, subscription_id) -> dict:
    body = assert_json_response(client.get(subscription_url(subscription_id), token=token), 200)
    assert_subscription(body)
    return body


def assert_delivery(body: Any, **expected) -> None:
    assert isinstance(body, dict) and set(body) == DELIVERY_KEYS, \
        f"delivery must have exactly {sorted(DELIVERY_KEYS)}: {body}"
    assert is_int(body["id"]) and is_int(body["subscription_id"]), body
    assert body["event"] in RECORD_EVENTS + ("ai.replied", "ai.handoff"), body
    assert body["webhook_id"] == f"msg_{body['id']}", body
    assert body["status"] in DELIVERY_STATUSES, body
    assert is_int(body["attempts"]) and body["attempts"] >= 0, body
    assert body["last_status_code"] is None or is_int(body["last_status_code"]), body
    assert body["last_error"] is None or isinstance(body["last_error"], str), body
    assert_timestamp(body["created_at"])
    _assert_optional_timestamp(body, "next_attempt_at", "delivered_at")
    assert isinstance(body["attempt_log"], list), body
    assert len(body["attempt_log"]) == body["attempts"], f"attempt_log vs attempts: {body}"
    for i, attempt in enumerate(body["attempt_log"]):
        assert isinstance(attempt, dict) and set(attempt) == ATTEMPT_KEYS, \
            f"attempt must have exactly {sorted(ATTEMPT_KEYS)}: {attempt}"
        assert attempt["attempt"] == i + 1, body
        assert_timestamp(attempt["at"])
        assert attempt["status_code"] is None or is_int(attempt["status_code"]), attempt
        assert attempt["error"] is None or isinstance(attempt["error"], str), attempt
        assert is_int(attempt["duration_ms"]) and attempt["duration_ms"] >= 0, attempt
    if body["status"] == "succeeded":
        assert_timestamp(body["delivered_at"])
    _assert_expected(body, expected)


def list_deliveries(client: Client, token: str, subscription_id,
                    params: Any = None) -> list[dict]:
    """Every delivery of a subscription (all pages), newest first."""
    base = list(params.items()) if isinstance(params, dict) else list(params or [])
    items, page = [], 1
    while True:
        resp = client.get(deliveries_url(subscription_id, base + [("page", page),
                                                                  ("per_page", 100)]),
                          token=token)
        body = assert_json_response(resp, 200)
        assert_page(body)
        for item in body["items"]:
            assert_delivery(item)
        items.extend(body["items"])
        if page >= body["pages"]:
            return items
        page += 1


def wait_deliveries(client: Client, token: str, subscription_id, check,
                    timeout: float = 20.0) -> list[dict]:
    """Polls the deliveries of a subscription until check(deliveries) is true; returns them."""
    last = {"items": []}

    def poll():
        last["items"] = list_deliveries(client, token, subscription_id)
        return check(last["items"])

    if not eventually(poll, timeout, 0.2):
        raise AssertionError(f"subscription {subscription_id}: deliveries did not reach the "
                             f"expected state within {timeout:.0f} s: {last['items']}")
    return last["items"]


# --------------------------------------------------------------------------------------------
# Channels, conversations and messages (contract §8, docs/channels.md): paths, shapes,
# shortcuts for the inbound channel webhooks (generic api and Telegram) and for Receiver
# answers that stand in for the Telegram Bot API.

CHANNELS = "/api/v1/channels"
CONVERSATIONS = "/api/v1/conversations"

CHANNEL_TYPES = ("api", "telegram", "whatsapp", "sms", "email")
CONVERSATION_STATUSES = ("open", "pending", "closed")
MESSAGE_DIRECTIONS = ("inbound", "outbound")
MESSAGE_STATUSES = ("received", "queued", "sent", "delivered", "read", "failed")

CHANNEL_KEYS = {"id", "name", "type", "config", "is_active", "has_secret", "webhook_url",
                "business_hours", "time_zone", "after_hours_reply", "team_id",
                "created_at", "updated_at"}
CONVERSATION_KEYS = {"id", "channel_id", "contact_id", "status", "assignee_id", "team_id",
                     "first_response_at", "resolved_at", "unread_count",
                     "last_message_at", "last_inbound_at", "ai_paused", "handoff_reason",
                     "labels", "priority", "created_at", "updated_at"}
MESSAGE_KEYS = {"id", "conversation_id", "direction", "text", "external_message_id", "status",
                "error", "attempts", "sender_user_id", "sender_agent_id", "segments", "subject",
                "attachments",
                "created_at", "sent_at"}
INBOUND_ACK_KEYS = {"status", "message_id", "conversation_id", "contact_id", "duplicate"}
TELEGRAM_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def channel_url(channel_id) -> str:
    return f"{CHANNELS}/{channel_id}"


def channel_webhook_url(channel_id) -> str:
    return f"{CHANNELS}/{channel_id}/api/webhook"


def telegram_webhook_url(channel_id) -> str:
    return f"{CHANNELS}/{channel_id}/telegram/webhook"


def conversation_url(conversation_id) -> str:
    return f"{CONVERSATIONS}/{conversation_id}"


def messages_url(conversation_id, params: Any = None) -> str:
    return with_query(f"{CONVERSATIONS}/{conversation_id}/messages", params)


def read_url(conversation_id) -> str:
    return f"{CONVERSATIONS}/{conversation_id}/read"


def unique_phone() -> str:
    """A random E.164 number (+1 and 10 digits, first digit 2-9)."""
    return "+1" + str(secrets.randbelow(8) + 2) + "".join(str(secrets.randbelow(10))
                                                         for _ in range(9))


def whatsapp_config(**overrides) -> dict:
    """A WhatsApp channel's config with its required keys (docs/channels.md "WhatsApp")."""
    config = {"phone_number_id": str(secrets.randbelow(9_000_000) + 1_000_000),
              "access_token": "EAAG" + secrets.token_hex(16),
              "app_secret": secrets.token_hex(16), "verify_token": "verify-" + secrets.token_hex(8)}
    config.update(overrides)
    return config


def sms_config(**overrides) -> dict:
    """An SMS (Twilio) channel's config with its required keys (docs/channels.md "SMS")."""
    config = {"account_sid": "AC" + secrets.token_hex(16), "from_number": "+15005550006",
              "auth_token": secrets.token_hex(16)}
    config.update(overrides)
    return config


def email_config(**overrides) -> dict:
    """An e-mail channel's config with its required keys (docs/channels.md "E-mail")."""
    config = {"smtp_host": "smtp.clinic.example", "from_address": "desk@clinic.example"}
    config.update(overrides)
    return config


def bot_token() -> str:
    """A Telegram bot token matching ^[0-9]+:[A-Za-z0-9_-]{20,}$."""
    return f"{secrets.randbelow(9_000_000_000) + 1_000_000_000}:AA{secrets.token_hex(16)}"


def assert_channel(body: Any, **expected) -> None:
    """Exactly the channel keys of docs/channels.md; never a secret value."""
    assert isinstance(body, dict) and set(body) == CHANNEL_KEYS, \
        f"channel must have exactly {sorted(CHANNEL_KEYS)}: {body}"
    assert is_int(body["id"]), body
    assert isinstance(body["name"], str) and body["name"], body
    assert body["type"] in CHANNEL_TYPES, body
    assert isinstance(body["config"], dict), body
    assert isinstance(body["is_active"], bool) and isinstance(body["has_secret"], bool), body
    for key in body["config"]:
        if key.startswith("has_"):
            assert isinstance(body["config"][key], bool), f"config.{key}: {body}"
    suffix = {"telegram": "telegram/webhook", "whatsapp": "whatsapp/webhook",
              "sms": "sms/webhook", "email": "email/webhook"}.get(
        body["type"], "api/webhook")
    assert isinstance(body["webhook_url"], str) and \
        body["webhook_url"].endswith(f"/api/v1/channels/{body['id']}/{suffix}"), body
    assert body["webhook_url"].startswith(("http://", "https://")), body
    assert body["business_hours"] is None or isinstance(body["business_hours"], dict), body
    assert isinstance(body["time_zone"], str) and body["time_zone"], body
    assert body["after_hours_reply"] is None or isinstance(body["after_hours_reply"], str), body
    assert body["team_id"] is None or is_int(body["team_id"]), body
    assert_timestamp(body["created_at"])
    assert_timestamp(body["updated_at"])
    assert body["updated_at"] >= body["created_at"], body
    _assert_expected(body, expected)


def create_channel(client: Client, token: str, **fields) -> dict:
    """POST /channels (201 + Location required); defaults: a unique name, type api."""
    fields.setdefault("name", unique("channel"))
    fields.setdefault("type", "api")
    resp = client.post(CHANNELS, fields, token=token)
    assert resp.status == 201, f"creating channel {fields} failed: {resp.describe()}"
    body = assert_json_response(resp, 201)
    assert_channel(body, type=fields["type"])
    assert resp.header("Location") == channel_url(body["id"]), resp.describe()
    return body


def get_channel(client: Client, token: str, channel_id) -> dict:
    body = assert_json_response(client.get(channel_url(channel_id), token=token), 200)
    assert_channel(body)
    return body


def assert_conversation(body: Any, **expected) -> None:
    assert isinstance(body, dict) and set(body) == CONVERSATION_KEYS, \
        f"conversation must have exactly {sorted(CONVERSATION_KEYS)}: {body}"
    for key in ("id", "channel_id", "contact_id", "unread_count"):
        assert is_int(body[key]), f"{key}: {body}"
    assert body["unread_count"] >= 0, body
    assert body["status"] in CONVERSATION_STATUSES, body
    assert body["assignee_id"] is None or is_int(body["assignee_id"]), body
    for key in ("last_message_at", "created_at", "updated_at"):
        assert_timestamp(body[key])
    if body["last_inbound_at"] is not None:
        assert_timestamp(body["last_inbound_at"])
    assert isinstance(body["labels"], list) and body["labels"] == sorted(set(body["labels"])), body
    assert body["priority"] in (None, "low", "medium", "high", "urgent"), body
    _assert_expected(body, expected)


def get_conversation(client: Client, token: str, conversation_id) -> dict:
    body = assert_json_response(client.get(conversation_url(conversation_id), token=token), 200)
    assert_conversation(body)
    return body


def assert_message(body: Any, **expected) -> None:
    assert isinstance(body, dict) and set(body) == MESSAGE_KEYS, \
        f"message must have exactly {sorted(MESSAGE_KEYS)}: {body}"
    assert is_int(body["id"]) and is_int(body["conversation_id"]), body
    assert body["direction"] in MESSAGE_DIRECTIONS, body
    assert isinstance(body["text"], str) and body["text"], body
    _assert_optional_str(body, "external_message_id", "error")
    assert body["status"] in MESSAGE_STATUSES, body
    assert is_int(body["attempts"]) and body["attempts"] >= 0, body
    assert body["sender_agent_id"] is None or is_int(body["sender_agent_id"]), body
    if body["sender_agent_id"] is not None:
        assert body["direction"] == "outbound" and body["sender_user_id"] is None, body
    assert body["sender_user_id"] is None or is_int(body["sender_user_id"]), body
    assert body["segments"] is None or (is_int(body["segments"]) and body["segments"] >= 1), body
    assert body["subject"] is None or isinstance(body["subject"], str), body
    assert_timestamp(body["created_at"])
    _assert_optional_timestamp(body, "sent_at")
    if body["direction"] == "inbound":
        assert body["status"] == "received", f"inbound message not 'received': {body}"
    else:
        assert body["status"] != "received", f"outbound message 'received': {body}"
    if body["status"] == "sent":
        assert_timestamp(body["sent_at"])
    if body["status"] == "failed":
        assert isinstance(body["error"], str) and body["error"], f"failed without error: {body}"
    _assert_expected(body, expected)


def list_messages(client: Client, token: str, conversation_id) -> list[dict]:
    """Every message of a conversation (all pages), oldest first."""
    items, page = [], 1
    while True:
        resp = client.get(messages_url(conversation_id, {"page": page, "per_page": 100}),
                          token=token)
        body = assert_json_response(resp, 200)
        assert_page(body)
        for item in body["items"]:
            assert_message(item, conversation_id=conversation_id)
        items.extend(body["items"])
        if page >= body["pages"]:
            return items
        page += 1


def send_message(client: Client, token: str, conversation_id, text: str) -> dict:
    """POST /conversations/{id}/messages: 201 with the outbound message, status queued."""
    resp = client.post(messages_url(conversation_id), {"text": text}, token=token)
    body = assert_json_response(resp, 201)
    assert_message(body, conversation_id=conversation_id, direction="outbound", text=text,
                   status="queued")
    return body


def wait_message(client: Client, token: str, conversation_id, message_id,
                 statuses=("sent", "failed"), timeout: float = 20.0) -> dict:
    """Polls the conversation's messages until message `message_id` has one of `statuses`."""
    last = {}

    def check():
        found = [m for m in list_messages(client, token, conversation_id)
                 if m["id"] == message_id]
        last["message"] = found[0] if found else None
        return bool(found) and found[0]["status"] in statuses

    if not eventually(check, timeout, 0.2):
        raise AssertionError(f"message {message_id} did not reach {statuses} within "
                             f"{timeout:.0f} s: {last.get('message')}")
    return last["message"]


def post_channel_webhook(client: Client, channel_id, secret: str | None, body: Any = None, *,
                         raw: bytes | None = None, header: str = "webhook_secret",
                         headers: dict | None = None) -> Response:
    """POST /channels/{id}/api/webhook without a JWT: the secret in `header` (unless None),
    a JSON `body` or `raw` bytes as they are."""
    hdrs = dict(headers or {})
    if secret is not None:
        hdrs[header] = secret
    if raw is None and body is not None:
        raw = _json.dumps(body).encode()
    return client.request("POST", channel_webhook_url(channel_id), raw=raw, headers=hdrs)


def inbound_body(contact: dict, text: str = "hello", external_message_id: str | None = None,
                 **extra) -> dict:
    body = {"contact": contact, "message": {
        "text": text, "external_message_id": external_message_id or unique("ext-msg")}}
    body.update(extra)
    return body


def assert_inbound_ack(resp: Response, duplicate: bool | None = None) -> dict:
    body = assert_json_response(resp, 200)
    assert isinstance(body, dict) and set(body) == INBOUND_ACK_KEYS, \
        f"acknowledgement must have exactly {sorted(INBOUND_ACK_KEYS)}: {resp.describe()}"
    assert body["status"] == "accepted", resp.describe()
    for key in ("message_id", "conversation_id", "contact_id"):
        assert is_int(body[key]), f"{key}: {resp.describe()}"
    assert isinstance(body["duplicate"], bool), resp.describe()
    if duplicate is not None:
        assert body["duplicate"] is duplicate, resp.describe()
    return body


def inbound(client: Client, channel_id, secret: str, contact: dict, text: str = "hello",
            external_message_id: str | None = None) -> dict:
    """One inbound message through the generic channel webhook; returns the (non-duplicate)
    acknowledgement."""
    resp = post_channel_webhook(client, channel_id, secret,
                                inbound_body(contact, text, external_message_id))
    return assert_inbound_ack(resp, duplicate=False)


def telegram_update(update_id: int = 1, message_id: int = 7, chat_id: int = 4242,
                    text: str | None = "hi", first_name: str = "Ada",
                    last_name: str | None = "L", kind: str = "message") -> dict:
    """A Telegram Update with a private-chat message (under `kind`: message, edited_message)."""
    sender = {"id": chat_id, "is_bot": False, "first_name": first_name}
    if last_name is not None:
        sender["last_name"] = last_name
    message = {"message_id": message_id, "chat": {"id": chat_id, "type": "private"},
               "from": sender, "date": 1700000000}
    if text is not None:
        message["text"] = text
    if kind == "edited_message":
        message["edit_date"] = 1700000100
    return {"update_id": update_id, kind: message}


def post_telegram_webhook(client: Client, channel_id, secret: str | None, update: Any = None,
                          *, raw: bytes | None = None) -> Response:
    hdrs = {} if secret is None else {TELEGRAM_SECRET_HEADER: secret}
    if raw is None and update is not None:
        raw = _json.dumps(update).encode()
    return client.request("POST", telegram_webhook_url(channel_id), raw=raw, headers=hdrs)


def telegram_ok(message_id: int):
    """A Receiver answer standing in for a successful Bot API sendMessage."""
    return (200, {"Content-Type": "application/json"},
            _json.dumps({"ok": True, "result": {"message_id": message_id, "date": 1700000000,
                                                "chat": {"id": 4242, "type": "private"},
                                                "text": "x"}}))


def telegram_error(description: str, status: int = 400):
    """A Receiver answer standing in for a refused Bot API call."""
    return (status, {"Content-Type": "application/json"},
            _json.dumps({"ok": False, "error_code": status, "description": description}))


# --------------------------------------------------------------------------------------------
# Sales pipeline (contract §8, docs/pipeline.md): pipelines with ordered stages, deals, their
# history, the board and the forecast summary.

PIPELINES = "/api/v1/pipelines"
DEALS = "/api/v1/deals"
DEALS_BULK = "/api/v1/deals/bulk"
DEALS_EXPORT = "/api/v1/deals/export"

STAGE_KINDS = ("open", "won", "lost")
DEAL_EVENTS = ("deal.created", "deal.updated", "deal.stage_changed", "deal.won", "deal.lost",
               "deal.deleted")
# The stages of a new tenant's default pipeline "Sales": (name, probability, kind).
DEFAULT_STAGES = [("Lead", 10, "open"), ("Qualified", 25, "open"), ("Proposal", 50, "open"),
                  ("Negotiation", 75, "open"), ("Won", 100, "won"), ("Lost", 0, "lost")]
STAGE_KEYS = {"id", "pipeline_id", "name", "position", "probability", "kind"}
PIPELINE_KEYS = {"id", "name", "is_default", "stages", "created_at", "updated_at"}
DEAL_KEYS = {"id", "title", "amount", "currency", "contact_id", "company_id", "pipeline_id",
             "stage_id", "owner_id", "expected_close_date", "status", "lost_reason",
             "custom_fields", "created_at", "updated_at", "closed_at"}
DEAL_CARD_KEYS = {"id", "title", "amount", "currency", "contact_id", "company_id", "owner_id",
                  "expected_close_date", "status"}
HISTORY_KEYS = {"id", "deal_id", "kind", "from_stage_id", "to_stage_id", "from_amount",
                "to_amount", "currency", "user_id", "workflow_run_id", "at"}
HISTORY_KINDS = ("created", "stage_changed", "amount_changed")
BOARD_COLUMN_KEYS = {"stage", "count", "sums", "deals", "has_more"}
SUMMARY_STAGE_KEYS = {"stage_id", "name", "kind", "probability", "count", "sums", "weighted"}
SUMMARY_TOTAL_KEYS = {"count", "sums", "weighted"}
DEAL_EXPORT_HEADER = ["id", "title", "amount", "currency", "status", "pipeline_id", "stage_id",
                      "contact_id", "company_id", "owner_id", "expected_close_date",
                      "lost_reason", "custom_fields", "created_at", "updated_at", "closed_at"]
MONEY_RE = re.compile(r"^[0-9]+\.[0-9]{2}$")
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def pipeline_url(pipeline_id) -> str:
    return f"{PIPELINES}/{pipeline_id}"


def stages_url(pipeline_id) -> str:
    return f"{PIPELINES}/{pipeline_id}/stages"


def stage_url(pipeline_id, stage_id, params: Any = None) -> str:
    return with_query(f"{PIPELINES}/{pipeline_id}/stages/{stage_id}", params)


def board_url(pipeline_id, params: Any = None) -> str:
    return with_query(f"{PIPELINES}/{pipeline_id}/board", params)


def summary_url(pipeline_id, params: Any = None) -> str:
    return with_query(f"{PIPELINES}/{pipeline_id}/summary", params)


def deal_url(deal_id) -> str:
    return f"{DEALS}/{deal_id}"


def move_url(deal_id) -> str:
    return f"{DEALS}/{deal_id}/move"


def history_url(deal_id, params: Any = None) -> str:
    return with_query(f"{DEALS}/{deal_id}/history", params)


def contact_deals_url(contact_id, params: Any = None) -> str:
    return with_query(f"{CONTACTS}/{contact_id}/deals", params)


def _assert_money_map(value: Any) -> None:
    assert isinstance(value, dict), f"sums must be an object keyed by currency: {value!r}"
    for cur, amount in value.items():
        assert re.match(r"^[A-Z]{3}$", cur), f"currency key {cur!r} in {value}"
        assert isinstance(amount, str) and MONEY_RE.match(amount), \
            f"amount {amount!r} is not a decimal string with two digits in {value}"


def assert_stage(body: Any, **expected) -> None:
    assert isinstance(body, dict) and set(body) == STAGE_KEYS, \
        f"stage must have exactly {sorted(STAGE_KEYS)}: {body}"
    assert is_int(body["id"]) and is_int(body["pipeline_id"]), body
    assert isinstance(body["name"], str) and body["name"], body
    assert is_int(body["position"]) and body["position"] >= 0, body
    assert is_int(body["probability"]) and 0 <= body["probability"] <= 100, body
    assert body["kind"] in STAGE_KINDS, body
    _assert_expected(body, expected)


def assert_pipeline(body: Any, **expected) -> None:
    """Exactly the pipeline keys; stages in position order 0..n-1, each of this pipeline, at
    least one open, exactly one won and one lost, names unique case-insensitively."""
    assert isinstance(body, dict) and set(body) == PIPELINE_KEYS, \
        f"pipeline must have exactly {sorted(PIPELINE_KEYS)}: {body}"
    assert is_int(body["id"]), body
    assert isinstance(body["name"], str) and body["name"], body
    assert isinstance(body["is_default"], bool), body
    stages = body["stages"]
    assert isinstance(stages, list) and stages, body
    for i, stage in enumerate(stages):
        assert_stage(stage, pipeline_id=body["id"], position=i)
    kinds = [s["kind"] for s in stages]
    assert kinds.count("won") == 1 and kinds.count("lost") == 1 and "open" in kinds, body
    names = [s["name"].lower() for s in stages]
    assert len(set(names)) == len(names), f"stage names repeat: {body}"
    assert_timestamp(body["created_at"])
    assert_timestamp(body["updated_at"])
    assert body["updated_at"] >= body["created_at"], body
    _assert_expected(body, expected)


def stage_shape(pipeline: dict) -> list[tuple]:
    """[(name, probability, kind)] of a pipeline's stages in position order."""
    return [(s["name"], s["probability"], s["kind"]) for s in pipeline["stages"]]


def stage_named(pipeline: dict, name: str) -> dict:
    found = [s for s in pipeline["stages"] if s["name"] == name]
    assert len(found) == 1, f"no single stage {name!r} in {pipeline}"
    return found[0]


def stage_of_kind(pipeline: dict, kind: str) -> dict:
    """The first stage of `kind` in position order (the won/lost stage; the first open one)."""
    found = [s for s in pipeline["stages"] if s["kind"] == kind]
    assert found, f"no {kind} stage in {pipeline}"
    return found[0]


def create_pipeline(client: Client, token: str, **fields) -> dict:
    """POST /pipelines (201 + Location required); default: a unique name, default stages."""
    fields.setdefault("name", unique("pipeline"))
    resp = client.post(PIPELINES, fields, token=token)
    assert resp.status == 201, f"creating pipeline {fields} failed: {resp.describe()}"
    body = assert_json_response(resp, 201)
    assert_pipeline(body, name=fields["name"])
    assert resp.header("Location") == pipeline_url(body["id"]), resp.describe()
    return body


def get_pipeline(client: Client, token: str, pipeline_id) -> dict:
    body = assert_json_response(client.get(pipeline_url(pipeline_id), token=token), 200)
    assert_pipeline(body)
    return body


def list_pipelines(client: Client, token: str) -> list[dict]:
    items = list_all(client, token, PIPELINES)
    for item in items:
        assert_pipeline(item)
    return items


def default_pipeline(client: Client, token: str) -> dict:
    defaults = [p for p in list_pipelines(client, token) if p["is_default"]]
    assert len(defaults) == 1, f"want exactly one default pipeline, got {defaults}"
    return defaults[0]


def assert_deal(body: Any, **expected) -> None:
    assert isinstance(body, dict) and set(body) == DEAL_KEYS, \
        f"deal must have exactly {sorted(DEAL_KEYS)}: {body}"
    for key in ("id", "pipeline_id", "stage_id"):
        assert is_int(body[key]), f"{key}: {body}"
    for key in ("contact_id", "company_id", "owner_id"):
        assert body[key] is None or is_int(body[key]), f"{key}: {body}"
    assert isinstance(body["title"], str) and body["title"], body
    assert body["amount"] is None or (isinstance(body["amount"], str) and
                                      MONEY_RE.match(body["amount"])), body
    assert isinstance(body["currency"], str) and re.match(r"^[A-Z]{3}$", body["currency"]), body
    assert body["expected_close_date"] is None or (
        isinstance(body["expected_close_date"], str) and DATE_RE.match(body["expected_close_date"])
    ), body
    assert body["status"] in STAGE_KINDS, body
    assert body["lost_reason"] is None or isinstance(body["lost_reason"], str), body
    assert isinstance(body["custom_fields"], dict), body
    assert_timestamp(body["created_at"])
    assert_timestamp(body["updated_at"])
    assert body["updated_at"] >= body["created_at"], body
    if body["status"] == "open":
        assert body["closed_at"] is None, f"an open deal with closed_at: {body}"
    else:
        assert_timestamp(body["closed_at"])
    _assert_expected(body, expected)


def assert_deal_card(card: Any, deal: dict | None = None) -> None:
    assert isinstance(card, dict) and set(card) == DEAL_CARD_KEYS, \
        f"board card must have exactly {sorted(DEAL_CARD_KEYS)}: {card}"
    if deal is not None:
        assert card == {k: deal[k] for k in DEAL_CARD_KEYS}, (card, deal)


def create_deal(client: Client, token: str, **fields) -> dict:
    """POST /deals (201 + Location required); default title "Deal <random>"."""
    fields.setdefault("title", "Deal " + secrets.token_hex(3))
    resp = client.post(DEALS, fields, token=token)
    assert resp.status == 201, f"creating deal {fields} failed: {resp.describe()}"
    body = assert_json_response(resp, 201)
    assert_deal(body)
    assert resp.header("Location") == deal_url(body["id"]), resp.describe()
    return body


def get_deal(client: Client, token: str, deal_id) -> dict:
    body = assert_json_response(client.get(deal_url(deal_id), token=token), 200)
    assert_deal(body)
    return body


def move_deal(client: Client, token: str, deal_id, stage_id, **extra) -> dict:
    """POST /deals/{id}/move {"stage_id", ...extra}: 200 with the moved deal."""
    resp = client.post(move_url(deal_id), {"stage_id": stage_id, **extra}, token=token)
    body = assert_json_response(resp, 200)
    assert_deal(body, id=deal_id, stage_id=stage_id)
    return body


def assert_history_item(item: Any, **expected) -> None:
    assert isinstance(item, dict) and set(item) == HISTORY_KEYS, \
        f"history item must have exactly {sorted(HISTORY_KEYS)}: {item}"
    assert is_int(item["id"]) and is_int(item["deal_id"]), item
    assert item["kind"] in HISTORY_KINDS, item
    for key in ("from_stage_id", "to_stage_id", "user_id", "workflow_run_id"):
        assert item[key] is None or is_int(item[key]), f"{key}: {item}"
    for key in ("from_amount", "to_amount"):
        assert item[key] is None or (isinstance(item[key], str) and MONEY_RE.match(item[key])), \
            f"{key}: {item}"
    assert isinstance(item["currency"], str), item
    assert_timestamp(item["at"])
    _assert_expected(item, expected)


def deal_history(client: Client, token: str, deal_id) -> list[dict]:
    """Every history item of a deal (all pages), oldest first."""
    items, page = [], 1
    while True:
        body = assert_json_response(
            client.get(history_url(deal_id, {"page": page, "per_page": 100}), token=token), 200)
        assert_page(body)
        for item in body["items"]:
            assert_history_item(item, deal_id=deal_id)
        items.extend(body["items"])
        if page >= body["pages"]:
            return items
        page += 1


def board_columns(body: Any) -> list[dict]:
    """The columns of a GET /pipelines/{id}/board answer, each checked for its shape. The doc
    fixes the columns ("per stage in position order") but not their envelope: a bare list,
    or an object holding the list under "stages", are both taken."""
    columns = body.get("stages") if isinstance(body, dict) else body
    assert isinstance(columns, list), f"board without a list of columns: {body}"
    for col in columns:
        assert isinstance(col, dict) and set(col) == BOARD_COLUMN_KEYS, \
            f"board column must have exactly {sorted(BOARD_COLUMN_KEYS)}: {col}"
        assert_stage(col["stage"])
        assert is_int(col["count"]) and col["count"] >= 0, col
        _assert_money_map(col["sums"])
        assert isinstance(col["deals"], list), col
        for card in col["deals"]:
            assert_deal_card(card)
        assert isinstance(col["has_more"], bool), col
    return columns


def get_board(client: Client, token: str, pipeline_id, params: Any = None) -> list[dict]:
    body = assert_json_response(client.get(board_url(pipeline_id, params), token=token), 200)
    return board_columns(body)


def get_summary(client: Client, token: str, pipeline_id, params: Any = None) -> dict:
    """GET /pipelines/{id}/summary: {"stages": [per stage], "totals": {...}}, shapes checked."""
    body = assert_json_response(client.get(summary_url(pipeline_id, params), token=token), 200)
    assert isinstance(body, dict) and isinstance(body.get("stages"), list) and \
        isinstance(body.get("totals"), dict), f"summary shape: {body}"
    for row in body["stages"]:
        assert isinstance(row, dict) and set(row) == SUMMARY_STAGE_KEYS, \
            f"summary stage must have exactly {sorted(SUMMARY_STAGE_KEYS)}: {row}"
        assert is_int(row["count"]) and row["count"] >= 0, row
        _assert_money_map(row["sums"])
        _assert_money_map(row["weighted"])
    totals = body["totals"]
    assert set(totals) == SUMMARY_TOTAL_KEYS, f"totals must have exactly " \
                                              f"{sorted(SUMMARY_TOTAL_KEYS)}: {totals}"
    _assert_money_map(totals["sums"])
    _assert_money_map(totals["weighted"])
    return body


# --------------------------------------------------------------------------------------------
# AI assistants (contract §8, docs/ai.md): agents, knowledge documents, the chat console, the
# decisions recorded per message (replies), and the AI fields of conversations and messages.

AI_AGENTS = "/api/v1/ai/agents"

AI_PROVIDERS = ("builtin", "openai_compatible")
AI_REPLY_LANGUAGES = ("auto", "en", "pt", "es")
AI_LANGUAGES = ("en", "pt", "es")
AI_INTENTS = ("greeting", "faq", "booking", "billing", "results", "complaint", "clinical",
              "urgent", "other")
HANDOFF_REASONS = ("urgent", "clinical", "keyword", "complaint", "no_answer", "provider_error")
DONT_KNOW_EN = "I don't know; a person from our team will answer you soon."
AI_EVENTS = ("ai.replied", "ai.handoff")

AGENT_KEYS = {"id", "name", "instructions", "provider", "model", "base_url", "has_api_key",
              "channel_ids", "service_ids", "auto_reply", "handoff_keywords", "reply_language",
              "emergency_message", "handoff_assignee_id", "stream", "is_active",
              "document_count", "passage_count", "created_at", "updated_at"}
DOCUMENT_KEYS = {"id", "agent_id", "title", "kind", "bytes", "passage_count", "created_at",
                 "updated_at"}
CHAT_KEYS = {"answer", "intent", "passages", "handoff", "handoff_reason", "language",
             "provider", "usage"}
CHAT_PASSAGE_KEYS = {"id", "document_id", "title", "text", "score"}
AI_REPLY_KEYS = {"id", "agent_id", "conversation_id", "message_id", "reply_message_ids",
                 "intent", "handoff", "handoff_reason", "passages", "provider", "prompt_tokens",
                 "completion_tokens", "latency_ms", "error", "dropped", "created_at"}
AI_SUMMARY_KEYS = {"contact_id", "summary", "conversation_count", "message_count", "provider",
                   "generated_at"}
# The conversation and message shapes of docs/channels.md plus what docs/ai.md adds.
AI_CONVERSATION_KEYS = CONVERSATION_KEYS
AI_MESSAGE_KEYS = MESSAGE_KEYS

# A clinic's knowledge, one document per topic: (title, text, a fact only that text holds).
CLINIC_DOCS = [
    ("Opening hours",
     "Clinica Sol opens at 8 am and closes at 6 pm from Monday to Friday. "
     "On Saturdays the clinic opens from 9 am to 1 pm.", "9 am to 1 pm"),
    ("Parking",
     "Patients park for free in the garage on Rua Augusta, level 2.", "Rua Augusta, level 2"),
    ("Prices",
     "A first consultation costs 250 reais. We accept the Unimed and Bradesco insurance plans.",
     "250 reais"),
    ("Cancellations",
     "To cancel an appointment, call the front desk at least 24 hours before it.",
     "24 hours before"),
    ("Aftercare",
     "After a tooth extraction our dentists usually prescribe ibuprofen 400 mg.", "400 mg"),
    # Unrelated sentences: with a handful of passages BM25's IDF is too small for any score
    # to reach the 1.0 threshold; these make the knowledge base big enough to answer from.
    ("About us",
     "Clinica Sol was founded in 1998 by two sisters from Porto Alegre. The building has a "
     "small courtyard with orange trees. Our waiting room has magazines and a water fountain. "
     "The reception team speaks English, Portuguese and Spanish. We send appointment reminders "
     "by text message. There are four treatment rooms on the ground floor. Our x-ray machine "
     "is digital and uses a low radiation level. Young patients get a sticker after each "
     "visit. The lift is next to the main entrance. We recycle paper and plastic. The coffee "
     "machine is on the first floor. Our dentists attend a training course every year.",
     "founded in 1998"),
]


def agent_url(agent_id) -> str:
    return f"{AI_AGENTS}/{agent_id}"


def knowledge_url(agent_id, params: Any = None) -> str:
    return with_query(f"{AI_AGENTS}/{agent_id}/knowledge", params)


def document_url(agent_id, document_id) -> str:
    return f"{AI_AGENTS}/{agent_id}/knowledge/{document_id}"


def chat_url(agent_id) -> str:
    return f"{AI_AGENTS}/{agent_id}/chat"


def replies_url(agent_id, params: Any = None) -> str:
    return with_query(f"{AI_AGENTS}/{agent_id}/replies", params)


def contact_summary_url(contact_id) -> str:
    return f"{CONTACTS}/{contact_id}/ai/summary"


def assert_agent(body: Any, **expected) -> None:
    """Exactly the agent keys of docs/ai.md, with their types; never an api_key."""
    assert isinstance(body, dict) and set(body) == AGENT_KEYS, \
        f"agent must have exactly {sorted(AGENT_KEYS)}: {body}"
    assert is_int(body["id"]), body
    assert isinstance(body["name"], str) and body["name"].strip(), body
    assert isinstance(body["instructions"], str), body
    assert body["provider"] in AI_PROVIDERS, body
    _assert_optional_str(body, "model", "base_url", "emergency_message")
    if body["provider"] == "openai_compatible":
        assert isinstance(body["model"], str) and isinstance(body["base_url"], str), body
    for key in ("has_api_key", "auto_reply", "stream", "is_active"):
        assert isinstance(body[key], bool), f"{key}: {body}"
    assert isinstance(body["channel_ids"], list) and all(is_int(i) for i in body["channel_ids"])
    assert isinstance(body["handoff_keywords"], list) and \
        all(isinstance(k, str) for k in body["handoff_keywords"]), body
    assert body["reply_language"] in AI_REPLY_LANGUAGES, body
    assert body["handoff_assignee_id"] is None or is_int(body["handoff_assignee_id"]), body
    for key in ("document_count", "passage_count"):
        assert is_int(body[key]) and body[key] >= 0, f"{key}: {body}"
    assert_timestamp(body["created_at"])
    assert_timestamp(body["updated_at"])
    assert body["updated_at"] >= body["created_at"], body
    _assert_expected(body, expected)


def create_agent(client: Client, token: str, **fields) -> dict:
    """POST /ai/agents (201 + Location required); default: a unique name, builtin."""
    fields.setdefault("name", unique("agent"))
    resp = client.post(AI_AGENTS, fields, token=token)
    assert resp.status == 201, f"creating agent {fields} failed: {resp.describe()}"
    body = assert_json_response(resp, 201)
    assert_agent(body)
    assert resp.header("Location") == agent_url(body["id"]), resp.describe()
    key = fields.get("api_key")
    if isinstance(key, str):
        assert key.encode() not in resp.body, f"the api_key came back: {resp.describe()}"
    return body


def get_agent(client: Client, token: str, agent_id) -> dict:
    body = assert_json_response(client.get(agent_url(agent_id), token=token), 200)
    assert_agent(body)
    return body


def assert_document(body: Any, content: str | None = None, **expected) -> None:
    """The document keys; with `content` ("text" or "csv"), GET by id: that key too."""
    want = DOCUMENT_KEYS | ({content} if content else set())
    assert isinstance(body, dict) and set(body) == want, \
        f"document must have exactly {sorted(want)}: {body}"
    assert is_int(body["id"]) and is_int(body["agent_id"]), body
    assert isinstance(body["title"], str) and body["title"], body
    assert body["kind"] in ("text", "qa", "html", "pdf"), body
    assert is_int(body["bytes"]) and body["bytes"] > 0, body
    assert is_int(body["passage_count"]) and body["passage_count"] > 0, body
    if content:
        assert isinstance(body[content], str), body
        # HTML and PDF documents show the text extracted from them.
        assert body["kind"] in (("text", "html", "pdf") if content == "text" else ("qa",)), body
    assert_timestamp(body["created_at"])
    assert_timestamp(body["updated_at"])
    _assert_expected(body, expected)


def add_document(client: Client, token: str, agent_id, title: str | None = None, *,
                 text: str | None = None, csv: str | None = None) -> dict:
    """POST /ai/agents/{id}/knowledge (201 + Location required); returns the document."""
    body = {"title": title or unique("doc")}
    if text is not None:
        body["text"] = text
    if csv is not None:
        body["csv"] = csv
    resp = client.post(knowledge_url(agent_id), body, token=token)
    assert resp.status == 201, f"adding document {body['title']!r} failed: {resp.describe()}"
    doc = assert_json_response(resp, 201)
    assert_document(doc, agent_id=agent_id, title=body["title"],
                    kind="text" if text is not None else "qa")
    assert resp.header("Location") == document_url(agent_id, doc["id"]), resp.describe()
    return doc


def add_clinic_docs(client: Client, token: str, agent_id, docs=None) -> dict:
    """The CLINIC_DOCS (or `docs`) as documents of the agent: {title: document}."""
    return {title: add_document(client, token, agent_id, title, text=text)
            for title, text, _ in (docs or CLINIC_DOCS)}


def assert_chat(body: Any) -> None:
    assert isinstance(body, dict) and set(body) == CHAT_KEYS, \
        f"chat answer must have exactly {sorted(CHAT_KEYS)}: {body}"
    assert isinstance(body["answer"], str) and body["answer"].strip(), \
        f"an empty answer (never silence): {body}"
    assert body["intent"] in AI_INTENTS, body
    assert isinstance(body["handoff"], bool), body
    if body["handoff"]:
        assert body["handoff_reason"] in HANDOFF_REASONS, body
    else:
        assert body["handoff_reason"] is None, body
    assert body["language"] in AI_LANGUAGES, body
    assert body["provider"] in AI_PROVIDERS, body
    assert body["usage"] is None or isinstance(body["usage"], dict), body
    assert isinstance(body["passages"], list), body
    for p in body["passages"]:
        assert isinstance(p, dict) and set(p) == CHAT_PASSAGE_KEYS, \
            f"passage must have exactly {sorted(CHAT_PASSAGE_KEYS)}: {body}"
        assert is_int(p["id"]) and is_int(p["document_id"]), p
        assert isinstance(p["title"], str) and isinstance(p["text"], str) and p["text"], p
        assert isinstance(p["score"], (int, float)) and not isinstance(p["score"], bool), p


def chat(client: Client, token: str, agent_id, message: str) -> dict:
    """POST /ai/agents/{id}/chat: 200 with the decision, shape checked."""
    resp = client.post(chat_url(agent_id), {"message": message}, token=token)
    body = assert_json_response(resp, 200)
    assert_chat(body)
    return body


def squash(text: str) -> str:
    """Whitespace runs to one space, trimmed."""
    return " ".join(text.split())


def assert_grounded(answer: str, passages: list[dict]) -> None:
    """The answer is made of the passages' text and nothing else (docs/ai.md: "it invents no
    fact"): with every passage's text (or each of its lines) taken out, no letter or digit is
    left."""
    assert passages, f"an answer without passages: {answer!r}"
    rest = squash(answer)
    pieces = [squash(p["text"]) for p in passages]
    pieces += [squash(line) for p in passages for line in p["text"].splitlines() if line.strip()]
    for piece in sorted(set(pieces), key=len, reverse=True):
        rest = rest.replace(piece, " ")
    leftover = re.sub(r"[\W_]+", "", rest)
    assert leftover == "", \
        f"the answer holds text that is in no passage ({rest!r}): {answer!r} / {passages}"


def assert_ai_conversation(body: Any, **expected) -> None:
    assert isinstance(body, dict) and set(body) == AI_CONVERSATION_KEYS, \
        f"conversation must have exactly {sorted(AI_CONVERSATION_KEYS)}: {body}"
    assert_conversation({k: body[k] for k in CONVERSATION_KEYS})
    assert isinstance(body["ai_paused"], bool), body
    assert body["handoff_reason"] is None or body["handoff_reason"] in HANDOFF_REASONS, body
    _assert_expected(body, expected)


def get_ai_conversation(client: Client, token: str, conversation_id) -> dict:
    body = assert_json_response(client.get(conversation_url(conversation_id), token=token), 200)
    assert_ai_conversation(body)
    return body


# Messages and conversations carry their AI fields everywhere (assert_message checks them).
assert_ai_message = assert_message
list_ai_messages = list_messages


def by_agent(messages: list[dict], agent_id) -> list[dict]:
    return [m for m in messages if m["sender_agent_id"] == agent_id]


def wait_ai_messages(client: Client, token: str, conversation_id, check,
                     timeout: float = 20.0) -> list[dict]:
    """Polls the conversation's messages until check(messages) is true; returns them."""
    last = {"messages": []}

    def poll():
        last["messages"] = list_ai_messages(client, token, conversation_id)
        return check(last["messages"])

    if not eventually(poll, timeout, 0.2):
        raise AssertionError(f"conversation {conversation_id}: messages did not reach the "
                             f"expected state within {timeout:.0f} s: {last['messages']}")
    return last["messages"]


class BookingClinic:
    """A tenant's clinic for the booking assistant's tests: a calendar open all day in `zone`,
    a "Blood test" service on it, an api channel (signed with `secret`) sending to `rcv`, and
    an auto-replying agent allowed to book the service (`agent`: its other fields)."""

    def __init__(self, client: Client, token: str, rcv, zone: str, secret: str, **agent):
        self.client, self.token = client, token
        self.calendar = create_calendar(client, token, time_zone=zone,
                                        working_hours=every_day(("00:00", "23:30")))
        self.service = create_service(client, token, [self.calendar["id"]], name="Blood test")
        self.channel = create_channel(client, token, type="api", webhook_secret=secret,
                                      config={"outbound_url": rcv.url("/out")})
        self.agent = create_agent(client, token, channel_ids=[self.channel["id"]],
                                  auto_reply=True, service_ids=[self.service["id"]], **agent)


class ChatPatient:
    """A patient writing on an api channel (signed with `secret`) to a clinic whose agent
    answers: say() sends a message, reply() waits for the agent's next one, appointments()
    lists theirs."""

    @classmethod
    def of(cls, clinic, secret: str, wait: float = 20.0) -> "ChatPatient":
        """Of a test's clinic (its client, token, channel and agent)."""
        p = cls(clinic.client, clinic.token, clinic.channel["id"], secret, clinic.agent["id"],
                wait)
        p.clinic = clinic
        return p

    def __init__(self, client: Client, token: str, channel_id, secret: str, agent_id,
                 wait: float = 20.0):
        self.client, self.token, self.channel_id, self.secret = client, token, channel_id, secret
        self.agent_id, self.wait = agent_id, wait
        self.phone = unique_phone()
        self.conversation_id = self.contact_id = None
        self.seen = 0  # agent messages already read

    def say(self, text: str) -> dict:
        ack = inbound(self.client, self.channel_id, self.secret, {"phone": self.phone}, text)
        self.conversation_id, self.contact_id = ack["conversation_id"], ack["contact_id"]
        return ack

    def reply(self) -> str:
        """The agent's next message in the conversation."""
        want = self.seen + 1
        msgs = wait_ai_messages(
            self.client, self.token, self.conversation_id,
            lambda ms: len(by_agent(ms, self.agent_id)) >= want, self.wait)
        self.seen = want
        return by_agent(msgs, self.agent_id)[want - 1]["text"]

    def appointments(self) -> list[dict]:
        return assert_json_response(
            self.client.get(with_query(APPOINTMENTS, {"contact_id": self.contact_id}),
                            token=self.token), 200)["items"]


def post_person_message(client: Client, token: str, conversation_id, text: str) -> dict:
    """POST /conversations/{id}/messages by a person: 201, the AI message shape."""
    resp = client.post(messages_url(conversation_id), {"text": text}, token=token)
    body = assert_json_response(resp, 201)
    assert_ai_message(body, conversation_id=conversation_id, direction="outbound", text=text,
                      status="queued", sender_agent_id=None)
    return body


def assert_ai_reply(item: Any, **expected) -> None:
    assert isinstance(item, dict) and set(item) == AI_REPLY_KEYS, \
        f"reply record must have exactly {sorted(AI_REPLY_KEYS)}: {item}"
    for key in ("id", "agent_id", "conversation_id", "message_id"):
        assert is_int(item[key]), f"{key}: {item}"
    assert isinstance(item["reply_message_ids"], list) and \
        all(is_int(i) for i in item["reply_message_ids"]), item
    assert item["intent"] in AI_INTENTS, item
    assert isinstance(item["handoff"], bool), item
    if item["handoff"]:
        assert item["handoff_reason"] in HANDOFF_REASONS, item
    else:
        assert item["handoff_reason"] is None, item
    assert isinstance(item["passages"], list), item
    assert item["provider"] in AI_PROVIDERS, item
    for key in ("prompt_tokens", "completion_tokens"):
        assert item[key] is None or (is_int(item[key]) and item[key] >= 0), f"{key}: {item}"
    assert isinstance(item["latency_ms"], (int, float)) and not isinstance(
        item["latency_ms"], bool) and item["latency_ms"] >= 0, item
    assert item["error"] is None or isinstance(item["error"], str), item
    assert_timestamp(item["created_at"])
    _assert_expected(item, expected)


def list_replies(client: Client, token: str, agent_id) -> list[dict]:
    """Every decision recorded for an agent (all pages), shapes checked."""
    items, page = [], 1
    while True:
        resp = client.get(replies_url(agent_id, {"page": page, "per_page": 100}), token=token)
        body = assert_json_response(resp, 200)
        assert_page(body)
        for item in body["items"]:
            assert_ai_reply(item, agent_id=agent_id)
        items.extend(body["items"])
        if page >= body["pages"]:
            return items
        page += 1


def wait_reply_for(client: Client, token: str, agent_id, message_id,
                   timeout: float = 20.0) -> dict:
    """Polls the agent's replies until the decision on inbound message `message_id` is there."""
    last = {"items": []}

    def poll():
        last["items"] = list_replies(client, token, agent_id)
        return [r for r in last["items"] if r["message_id"] == message_id]

    found = eventually(poll, timeout, 0.2)
    if not found:
        raise AssertionError(f"agent {agent_id}: no decision on message {message_id} within "
                             f"{timeout:.0f} s: {last['items']}")
    assert len(found) == 1, f"more than one decision on message {message_id}: {found}"
    return found[0]


# --------------------------------------------------------------------------------------------
# Calendars, services and appointments (contract §10)

CALENDARS = "/api/v1/calendars"
SERVICES = "/api/v1/services"
APPOINTMENTS = "/api/v1/appointments"
AVAILABILITY = "/api/v1/availability"
CALENDAR_KEYS = {"id", "name", "kind", "user_id", "time_zone", "working_hours",
                 "slot_step_minutes", "is_active", "feed_shows_names", "has_feed_token",
                 "created_at", "updated_at"}
SERVICE_KEYS = {"id", "name", "duration_minutes", "buffer_minutes", "calendar_ids", "price",
                "currency", "reminders", "is_active", "created_at", "updated_at"}
APPOINTMENT_KEYS = {"id", "contact_id", "service_id", "calendar_id", "start", "end", "status",
                    "notes", "source", "cancel_reason", "created_at", "updated_at"}
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def calendar_url(calendar_id) -> str:
    return f"{CALENDARS}/{calendar_id}"


def service_url(service_id) -> str:
    return f"{SERVICES}/{service_id}"


def appointment_url(appointment_id, action: str | None = None) -> str:
    base = f"{APPOINTMENTS}/{appointment_id}"
    return base if action is None else f"{base}/{action}"


def every_day(*spans) -> dict:
    """working_hours open every day of the week with these [start, end] spans."""
    return {d: [list(s) for s in spans] for d in WEEKDAYS}


def create_calendar(client: Client, token: str, **fields) -> dict:
    """POST /calendars (201 + Location); defaults: UTC, open 08:00-12:00 every day."""
    fields.setdefault("name", unique("Dr. "))
    fields.setdefault("time_zone", "UTC")
    fields.setdefault("working_hours", every_day(("08:00", "12:00")))
    resp = client.post(CALENDARS, fields, token=token)
    body = assert_json_response(resp, 201)
    assert set(body) == CALENDAR_KEYS, body
    assert resp.header("Location") == calendar_url(body["id"]), resp.describe()
    return body


def create_service(client: Client, token: str, calendar_ids: list, **fields) -> dict:
    """POST /services (201 + Location); defaults: 30 minutes, no buffer."""
    fields.setdefault("name", unique("Service "))
    fields.setdefault("duration_minutes", 30)
    resp = client.post(SERVICES, {"calendar_ids": calendar_ids, **fields}, token=token)
    body = assert_json_response(resp, 201)
    assert set(body) == SERVICE_KEYS, body
    assert resp.header("Location") == service_url(body["id"]), resp.describe()
    return body


def book(client: Client, token: str, contact_id, service_id, calendar_id, start: str,
         **fields) -> Response:
    return client.post(APPOINTMENTS, {"contact_id": contact_id, "service_id": service_id,
                                      "calendar_id": calendar_id, "start": start, **fields},
                       token=token)


def booked(client: Client, token: str, contact_id, service_id, calendar_id, start: str,
           **fields) -> dict:
    resp = book(client, token, contact_id, service_id, calendar_id, start, **fields)
    body = assert_json_response(resp, 201)
    assert set(body) == APPOINTMENT_KEYS, body
    assert resp.header("Location") == appointment_url(body["id"]), resp.describe()
    return body


def free_slots(client: Client, token: str, service_id, start: str, end: str, **params) -> list:
    """GET /availability: the slots as (calendar_id, start, end)."""
    body = assert_json_response(client.get(with_query(AVAILABILITY, {
        "service_id": service_id, "from": start, "to": end, **params}), token=token), 200)
    return [(s["calendar_id"], s["start"], s["end"]) for s in body["slots"]]


# ---- a page in headless Chromium (the operator console) -----------------------------------


def chromium_driver(tmp_path):
    """Debian's chromium driven by chromedriver through selenium (python3-selenium), headless,
    with a profile of its own under `tmp_path`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1400,1800",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def wait_in_page(driver, condition, timeout: float = 15.0):
    """What `condition(driver)` returns once it is truthy (the page redraws every second, so
    an element may go stale between finding and reading it: tried again)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = condition(driver)
        except Exception:  # noqa: BLE001
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, driver.page_source[:3000]
        time.sleep(0.2)


def click_in_page(driver, css: str, timeout: float = 15.0) -> None:
    """Finds and clicks the element `css` names, again if the page redrew it in between."""
    from selenium.webdriver.common.by import By

    def click(d):
        d.find_element(By.CSS_SELECTOR, css).click()
        return True
    wait_in_page(driver, click, timeout)


def console_sign_in(driver, metrics_url: str, token: str = METRICS_TOKEN) -> None:
    """Opens the operator console and signs in with the operator token."""
    from selenium.webdriver.common.by import By
    driver.get(f"{metrics_url}/console")
    wait_in_page(driver, lambda d: d.find_element(By.ID, "signin-form").is_displayed())
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#signin-form button").click()
    wait_in_page(driver, lambda d: d.find_element(By.ID, "console").is_displayed())


class ContactWriter(threading.Thread):
    """Creates contacts as a careful client does: each with its own Idempotency-Key, retried on
    503 or a broken connection (the same key: one contact however many tries), then read back
    (a GET, retried the same way). A request that no retry could complete within `deadline`
    seconds is a failure the client would see. With `retry=False`, a client that never retries:
    any answer but 201/200, or a broken connection, is a failure."""

    def __init__(self, host, port, token, tenant_id, name, tls_ca=None, deadline: float = 30,
                 retry: bool = True):
        super().__init__(daemon=True)
        self.deadline = deadline if retry else 0
        self.reads = 0
        self.client = Client(host, port, timeout=10, tls_ca=tls_ca)
        self.token, self.tenant_id, self.name = token, tenant_id, name
        self.stop = threading.Event()
        self.acked: list[tuple[str, int]] = []
        self.failures: list[str] = []
        self.retries = 0

    def call(self, method, path, body=None, headers=None):
        deadline = time.monotonic() + self.deadline
        while True:
            try:
                r = self.client.request(method, path, body, token=self.token,
                                        headers=headers or {})
                if r.status != 503:
                    return r
                last = r.describe()
            except OSError as e:
                last = repr(e)
            if time.monotonic() >= deadline:
                self.failures.append(f"{method} {path}: {last}")
                return None
            self.retries += 1
            time.sleep(0.05)

    def run(self):
        i = 0
        while not self.stop.is_set():
            i += 1
            email = f"{self.name}-{i}@example.org"
            r = self.call("POST", "/api/v1/contacts", {"first_name": self.name, "email": email},
                          {"Idempotency-Key": f"{self.name}-{i}"})
            if r is None:
                continue
            if r.status != 201:
                self.failures.append(r.describe())
                continue
            self.acked.append((email, r.json["id"]))
            g = self.call("GET", f"/api/v1/contacts/{r.json['id']}")
            if g is not None and g.status != 200:
                self.failures.append(g.describe())
            elif g is not None:
                self.reads += 1
