"""A link between two nodes that drops while a forwarded request is on it (docs/cluster.md
"Between nodes"): the forwarding node connects again and sends the request again under the same
id, and the owner runs it once, answering the copy with the answer it kept. The client sees one
answer, never a 503, and a write is made once.

Node A's gateway is dialled through a TCP proxy (`--cluster-advertise`) that cuts the connection
at a chosen moment: just before the request reaches A, or just after A has run it and is sending
the answer back. CAF 0.17 drops links by itself too: two nodes that dial each other at the same
moment each close the connection they dialled and keep the other's, so both are lost (the
cluster benchmark's smoke once answered 503 to a write so)."""
import socket
import threading

import pytest

import crm


class CuttingProxy:
    """TCP between the nodes and A's gateway. Armed with a direction, it closes both sides of
    the connection on the next bytes going that way instead of passing them ("request": from
    the dialling node to A; "answer": from A back), then passes everything again."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.armed: str | None = None
        self.cuts = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, direction: str) -> None:
        with self.lock:
            self.armed = direction

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()  # A is not listening (yet): the dialling node tries again
                continue
            for src, dst, way in ((client, upstream, "request"), (upstream, client, "answer")):
                threading.Thread(target=self._pipe, args=(src, dst, way, (client, upstream)),
                                 daemon=True).start()

    def _pipe(self, src, dst, way, both) -> None:
        try:
            while chunk := src.recv(65536):
                with self.lock:
                    cut = self.armed == way
                    if cut:
                        self.armed = None
                        self.cuts += 1
                if cut:
                    break
                dst.sendall(chunk)
        except OSError:
            pass
        for s in both:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.listener.close()


def node_env(node_id: str, pki: dict, **extra) -> dict:
    env = {"CARECRM_NODE_ID": node_id, "CARECRM_CLUSTER_LISTEN": "127.0.0.1:0",
           "CARECRM_HEARTBEAT_INTERVAL": 0.5, "CARECRM_DEAD_AFTER": 2.0,
           "CARECRM_CLUSTER_CERT": pki["cert"], "CARECRM_CLUSTER_KEY": pki["key"],
           "CARECRM_CLUSTER_CA": pki["ca"],
           # The tests place tenants themselves: none follows its requests to B.
           "CARECRM_CLUSTER_REBALANCE": "false"}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def linked(database, redis_url, migrated):
    """Node A behind the proxy (its gateway on a port of its own, advertised as the proxy's) and
    node B, which forwards to A through it."""
    pki = crm.cluster_pki("cluster")
    a_port = crm.free_port()
    proxy = CuttingProxy(a_port)
    a = crm.start_server(database.url, redis_url, node_env(
        "link-a", pki, CARECRM_CLUSTER_LISTEN=f"127.0.0.1:{a_port}",
        CARECRM_CLUSTER_ADVERTISE=f"127.0.0.1:{proxy.port}"), label="carecrm[link-a]")
    b = crm.start_server(database.url, redis_url, node_env("link-b", pki),
                         label="carecrm[link-b]")
    for name in ("link-a", "link-b"):
        assert crm.eventually(lambda n=name: database.query(
            f"SELECT 1 FROM cluster_nodes WHERE node_id = '{n}' AND state = 'live'").strip(),
            timeout=15), f"{name} is not a live member"
    yield a, b, proxy
    proxy.close()
    for s in (a, b):
        if s.running:
            s.stop(check=True)
        s.cleanup()


metric = crm.metric


def test_the_advertised_address_is_what_the_other_nodes_dial(linked, database):
    _, _, proxy = linked
    got = database.query("SELECT actor_port FROM cluster_nodes WHERE node_id = 'link-a'").strip()
    assert int(got) == proxy.port


@pytest.mark.parametrize("cut", ["request", "answer"])
def test_a_link_that_drops_under_a_write_costs_no_answer_and_no_second_write(linked, cli_env,
                                                                              cut):
    a, b, proxy = linked
    t = crm.create_tenant(cli_env)
    crm.run_json_cli(["cluster", "move", "--tenant", str(t.tenant_id), "--to", "link-a"], cli_env)
    client = b.client()
    token = crm.login(client, t.admin_email, t.admin_password)["access_token"]
    # The link is up and quiet: every byte that crosses it next is the write or its answer.
    crm.assert_json_response(client.get(crm.CONTACTS, token=token), 200)
    resent, repeated = (metric(b, "carecrm_cluster_forwards_resent_total"),
                        metric(a, "carecrm_cluster_forwards_repeated_total"))
    cuts = proxy.cuts
    name = crm.unique("Link")

    proxy.arm(cut)
    created = crm.assert_json_response(client.post(crm.CONTACTS, {
        "first_name": name, "phone": crm.unique_phone()}, token=token), 201)

    assert proxy.cuts == cuts + 1, "the proxy did not cut the link"
    found = crm.list_all(client, token, crm.CONTACTS, {"search": name})
    assert [c["id"] for c in found] == [created["id"]], found
    assert "lost the connection to the gateway" in b.stderr_text()
    # (At least: a new connection that drops again is tried again too.)
    assert metric(b, "carecrm_cluster_forwards_resent_total") >= resent + 1
    if cut == "answer":
        # A ran the write before the cut: the copy is answered with the answer A kept.
        assert metric(a, "carecrm_cluster_forwards_repeated_total") >= repeated + 1
    # And the link serves on.
    crm.assert_json_response(client.get(crm.contact_url(created["id"]), token=token), 200)
