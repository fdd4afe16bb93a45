"""The fence in Postgres (crm_fence, migration 014; docs/cluster.md "Fencing, exactly"), raced
with real sessions: a change of a tenant's lease waits for every write transaction that passed
crm_fence, and a write that reached the fence while the lease was changing is refused once the
change commits, under READ COMMITTED (what the nodes use) and under REPEATABLE READ."""
import subprocess
import threading
import time
import uuid

import pytest

import crm


class Session:
    """One psql session kept open: statements are sent, and answered lines read up to a marker,
    so a session can sit inside a transaction (or blocked in a statement) while others act."""

    def __init__(self, dsn: str):
        self.proc = subprocess.Popen(["psql", dsn, "-X", "-q", "-At"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     bufsize=1)
        self.pid = int(self.run("SELECT pg_backend_pid();")[0])

    def send(self, sql: str) -> str:
        marker = f"__done_{uuid.uuid4().hex}__"
        self.proc.stdin.write(f"{sql}\n\\echo {marker}\n")
        self.proc.stdin.flush()
        return marker

    def read(self, marker: str, timeout: float = 20.0) -> list[str]:
        lines: list[str] = []
        done = threading.Event()

        def reader():
            for line in self.proc.stdout:
                if line.strip() == marker:
                    done.set()
                    return
                lines.append(line.rstrip("\n"))

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        t.join(timeout)
        assert done.is_set(), f"psql gave no answer within {timeout} s: {lines}"
        return lines

    def run(self, sql: str) -> list[str]:
        return self.read(self.send(sql))

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture
def sessions(database, migrated):
    opened: list[Session] = []

    def open_one() -> Session:
        s = Session(database.url)
        opened.append(s)
        return s

    yield open_one
    for s in opened:
        s.close()


@pytest.fixture
def leased(database, migrated, cli_env):
    """A tenant leased to node fence-a at epoch 1, and a node fence-b to take it over."""
    t = crm.create_tenant(cli_env)
    database.query(
        "INSERT INTO cluster_nodes (node_id, http_address, actor_host, actor_port, incarnation)"
        " VALUES ('fence-a', '127.0.0.1:1', '127.0.0.1', 1, 1),"
        "        ('fence-b', '127.0.0.1:2', '127.0.0.1', 2, 1) ON CONFLICT DO NOTHING")
    database.query("INSERT INTO tenant_leases (tenant_id, node_id, epoch)"
                   f" VALUES ({t.tenant_id}, 'fence-a', 1)")
    return t.tenant_id


def wait_until_waiting(database, pid: int):
    """Until session `pid` waits on a lock (pg_stat_activity), for up to 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if database.query(f"SELECT wait_event_type FROM pg_stat_activity"
                          f" WHERE pid = {pid}").strip() == "Lock":
            return
        time.sleep(0.05)
    pytest.fail(f"session {pid} never waited on a lock")


def write_under_fence(tenant: int, epoch: int) -> str:
    return (f"SELECT crm_fence({tenant}, 'fence-a', {epoch});"
            f" INSERT INTO companies (tenant_id, name, created_at, updated_at)"
            f" VALUES ({tenant}, 'fenced write', now(), now());")


def stored_writes(database, tenant: int) -> int:
    return int(database.query(
        f"SELECT count(*) FROM companies WHERE tenant_id = {tenant} AND name = 'fenced write'"))


TAKEOVER = "UPDATE tenant_leases SET node_id = 'fence-b', epoch = epoch + 1 WHERE tenant_id = {}"


def test_a_lease_change_waits_for_a_write_that_passed_the_fence(database, sessions, leased):
    writer, taker = sessions(), sessions()
    assert writer.run("BEGIN;") == []
    assert "ERROR" not in " ".join(writer.run(write_under_fence(leased, 1)))
    pending = taker.send(TAKEOVER.format(leased) + ";")
    wait_until_waiting(database, taker.pid)  # the takeover waits for the write to end ...
    assert writer.run("COMMIT;") == []
    assert taker.read(pending) == []  # ... and goes on once it has
    assert stored_writes(database, leased) == 1
    assert database.query(
        f"SELECT node_id, epoch FROM tenant_leases WHERE tenant_id = {leased}").strip() == \
        "fence-b|2"


@pytest.mark.parametrize("isolation", ["READ COMMITTED", "REPEATABLE READ"])
def test_a_write_that_reached_the_fence_during_a_lease_change_is_refused(database, sessions,
                                                                         leased, isolation):
    taker, writer = sessions(), sessions()
    assert taker.run("BEGIN;") == []
    assert taker.run(TAKEOVER.format(leased) + ";") == []
    # The write's transaction began before the change committed, and reaches the fence now.
    assert writer.run(f"BEGIN ISOLATION LEVEL {isolation};") == []
    assert writer.run("SELECT 1;") == ["1"]  # a REPEATABLE READ snapshot from before the change
    pending = writer.send(write_under_fence(leased, 1))
    wait_until_waiting(database, writer.pid)
    assert taker.run("COMMIT;") == []
    answer = " ".join(writer.read(pending))
    # Refused: the fence's own error, or (REPEATABLE READ) the serialization failure of a row
    # lock on a row changed since the snapshot. Never through.
    assert ("no longer leased" in answer or "could not serialize" in answer), answer
    writer.run("ROLLBACK;")
    assert stored_writes(database, leased) == 0


def test_a_write_under_the_current_lease_goes_through_after_a_change(database, sessions, leased):
    database.query(TAKEOVER.format(leased))
    writer = sessions()
    refused = writer.run(f"BEGIN; {write_under_fence(leased, 1)} COMMIT;")
    assert " ".join(refused).count("no longer leased") == 1
    database.query(f"UPDATE tenant_leases SET node_id = 'fence-a', epoch = 3"
                   f" WHERE tenant_id = {leased}")
    assert "ERROR" not in " ".join(writer.run(f"BEGIN; {write_under_fence(leased, 3)} COMMIT;"))
    assert stored_writes(database, leased) == 1
