"""Mutual TLS between a cluster's nodes (issue 31, docs/cluster.md "Between nodes"): a node's
gateway speaks TLS only, shows a certificate signed by the cluster's CA and refuses a peer that
shows none or one another CA signed; a node configured with a stranger's certificate can neither
send requests to the others nor be sent any; and a refused peer does not cost the healthy
connections anything (CAF's OpenSSL module left OpenSSL's error queue dirty: the next quiet read
of any connection then counted as a failure, app/openssl_error_queue.cpp)."""
import re
import socket
import ssl
import subprocess
import threading
import time

import pytest

import crm


def tls_env(pki: dict) -> dict:
    return {"CARECRM_CLUSTER_CERT": pki["cert"], "CARECRM_CLUSTER_KEY": pki["key"],
            "CARECRM_CLUSTER_CA": pki["ca"]}


def node_env(node_id: str, pki: dict) -> dict:
    env = {"CARECRM_NODE_ID": node_id, "CARECRM_CLUSTER_LISTEN": "127.0.0.1:0",
           "CARECRM_HEARTBEAT_INTERVAL": 0.5, "CARECRM_DEAD_AFTER": 2.0,
           "CARECRM_CLUSTER_REBALANCE": "false"}  # forwarding is what these tests look at
    env.update(tls_env(pki))
    return env


@pytest.fixture(scope="module")
def pair(database, redis_url, migrated):
    pki = crm.cluster_pki("cluster")
    started = [crm.start_server(database.url, redis_url, node_env(name, pki),
                                label=f"carecrm[{name}]") for name in ("tls-a", "tls-b")]
    yield started
    for s in started:
        if s.running:
            s.stop(check=True)
        s.cleanup()


def gateway_port(database, node_id: str) -> int:
    port = crm.eventually(lambda: database.query(
        f"SELECT actor_port FROM cluster_nodes WHERE node_id = '{node_id}' AND state = 'live'"
    ).strip(), timeout=15)
    assert port, f"{node_id} is not a live member"
    return int(port)


def handshake(port: int, cert: dict | None) -> bytes | str:
    """A TLS client at the gateway, trusting the cluster's CA and showing `cert` (none: no
    certificate): what the gateway sends first (BASP's server handshake once admitted), or the
    error that ended the connection."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # node certificates name no host: the CA is what is checked
    ctx.load_verify_locations(crm.cluster_pki("cluster")["ca"])
    if cert:
        ctx.load_cert_chain(cert["cert"], cert["key"])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        try:
            with ctx.wrap_socket(raw) as tls:
                # TLS 1.3: the server judges the client's certificate after the client's side of
                # the handshake is done, so a refusal shows on the first read.
                first = tls.recv(64) or "closed"
                assert tls.version() == "TLSv1.3", tls.version()
                return first
        except (ssl.SSLError, ConnectionError, socket.timeout) as e:
            return f"refused: {e}"


def fresh_tenant(cli_env, owner: str):
    t = crm.create_tenant(cli_env)
    crm.run_json_cli(["cluster", "move", "--tenant", str(t.tenant_id), "--to", owner], cli_env)
    return t


def served_here(node) -> float:
    text = node.metrics_client(crm.METRICS_TOKEN).get("/metrics").body.decode()
    m = re.search(r"^carecrm_cluster_forwards_served_total (\S+)$", text, re.M)
    assert m, text[:2000]
    return float(m.group(1))


def test_a_gateway_admits_only_a_peer_whose_certificate_the_cluster_ca_signed(pair, database):
    port = gateway_port(database, "tls-a")
    # The cluster's own certificate: the gateway answers with BASP (after the TLS handshake,
    # whose server certificate verified against the cluster's CA).
    admitted = handshake(port, crm.cluster_pki("cluster"))
    assert isinstance(admitted, bytes) and len(admitted) > 0, admitted
    # No certificate, or one another CA signed: refused in the handshake, before any BASP byte.
    assert str(handshake(port, None)).startswith("refused"), "a peer without a certificate"
    assert str(handshake(port, crm.cluster_pki("stranger"))).startswith("refused"), \
        "a peer with a stranger's certificate"
    # Plain TCP (a BASP client without TLS): nothing but a TLS alert comes back, and the
    # connection ends.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        raw.sendall(b"\x00" * 64)
        try:
            got = raw.recv(64)
        except ConnectionResetError:
            got = b""
        assert got == b"" or got[0] == 0x15, got  # 0x15: a TLS alert record


def test_forwarding_survives_refused_peers(pair, database, cli_env):
    """Each refused handshake used to leave an entry in OpenSSL's error queue of the thread that
    serves every connection; the next read with nothing left to read then counted as a failure,
    dropped the healthy link between the nodes and answered the requests on it 503."""
    a, b = pair
    port = gateway_port(database, "tls-a")
    gateway_port(database, "tls-b")
    t = fresh_tenant(cli_env, "tls-a")
    client = b.client()
    token = crm.login(client, t.admin_email, t.admin_password)["access_token"]
    for i in range(60):  # a page of them is an answer of several TLS records
        crm.assert_json_response(client.post("/api/v1/contacts", {
            "first_name": f"Over TLS {i}", "last_name": "n" * 100}, token=token), 201)
    before = served_here(a)
    until = time.monotonic() + 6
    refused, answers = [], []

    def refuse():
        while time.monotonic() < until:
            for cert in (None, crm.cluster_pki("stranger")):
                refused.append(str(handshake(port, cert)).startswith("refused"))

    def forward():  # through B, answered by A over the link between them
        while time.monotonic() < until:
            r = client.get("/api/v1/contacts?limit=60", token=token)
            answers.append((r.status, len(r.json["items"]) if r.status == 200 else r.body))
            r = client.post("/api/v1/contacts", {"first_name": "During"}, token=token)
            answers.append((r.status, r.body[:200]))

    threads = [threading.Thread(target=refuse)] + [threading.Thread(target=forward)
                                                   for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert refused and all(refused), refused
    failed = [x for x in answers if x[0] not in (200, 201) or x[1] == 0]
    assert not failed, failed[:5]
    assert served_here(a) - before >= len(answers)
    assert "lost the connection" not in b.stderr_text()


def test_a_node_with_a_stranger_certificate_cannot_reach_or_be_reached(pair, database,
                                                                        redis_url, cli_env):
    a, _ = pair
    stranger = crm.start_server(database.url, redis_url,
                                node_env("tls-stranger", crm.cluster_pki("stranger")),
                                label="carecrm[tls-stranger]")
    try:
        gateway_port(database, "tls-stranger")
        # A tenant held by a good node, asked for through the stranger: refused at the TLS
        # handshake, so nothing reaches tls-a and the stranger answers 503 itself.
        held_by_a = fresh_tenant(cli_env, "tls-a")
        token = crm.login(a.client(), held_by_a.admin_email,
                          held_by_a.admin_password)["access_token"]
        served = served_here(a)
        r = stranger.client().get("/api/v1/contacts", token=token)
        assert r.status == 503, r.describe()
        assert r.json["code"] == "SERVICE_UNAVAILABLE"
        assert served_here(a) == served
        # A tenant held by the stranger, asked for through a good node: refused the same way.
        held_by_stranger = fresh_tenant(cli_env, "tls-stranger")
        token = crm.login(stranger.client(), held_by_stranger.admin_email,
                          held_by_stranger.admin_password)["access_token"]
        r = a.client().get("/api/v1/contacts", token=token)
        assert r.status == 503, r.describe()
        assert served_here(stranger) == 0
        # The good nodes still talk to each other.
        r = a.client().get("/api/v1/contacts",
                           token=crm.login(a.client(), held_by_a.admin_email,
                                           held_by_a.admin_password)["access_token"])
        assert r.status == 200, r.describe()
    finally:
        stranger.stop(check=True)
        stranger.cleanup()


@pytest.mark.parametrize("case", ["none", "foreign_key", "not_signed_by_ca"])
def test_a_node_without_the_right_certificate_files_does_not_start(database, redis_url,
                                                                   migrated, case):
    good, other = crm.cluster_pki("cluster"), crm.cluster_pki("stranger")
    files = {"none": {},
             "foreign_key": {"cert": good["cert"], "key": other["key"], "ca": good["ca"]},
             "not_signed_by_ca": {"cert": other["cert"], "key": other["key"],
                                  "ca": good["ca"]}}[case]
    env = crm.server_env(database.url, redis_url, {
        "CARECRM_NODE_ID": f"tls-bad-{case}", "CARECRM_CLUSTER_LISTEN": "127.0.0.1:0",
        "CARECRM_LISTEN": "127.0.0.1:0", "CARECRM_METRICS_LISTEN": "127.0.0.1:0",
        **({"CARECRM_CLUSTER_CERT": files["cert"], "CARECRM_CLUSTER_KEY": files["key"],
            "CARECRM_CLUSTER_CA": files["ca"]} if files else {})})
    r = subprocess.run([crm.carecrm_bin(), "serve"], env=env, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    expected = {"none": "cluster-cert, cluster-key and cluster-ca",
                "foreign_key": "as the key of",
                "not_signed_by_ca": "does not verify against cluster-ca"}[case]
    assert expected in r.stderr, r.stderr[-2000:]
    # It never joined.
    assert database.query(
        f"SELECT count(*) FROM cluster_nodes WHERE node_id = 'tls-bad-{case}'").strip() == "0"
