"""A database failover (issue 39 item 4, docs/operations.md "Database failover"): PostgreSQL 15
as a primary and a synchronous standby managed by Patroni (Debian's `patroni`, its state in a
one-member etcd, Debian's `etcd-server`), carecrm connected through a multi-host connection
string with `target_session_attrs=read-write`. The primary's machine dies (Patroni and
PostgreSQL killed with SIGKILL) under write load; Patroni promotes the standby once the
leader's key expires, carecrm's next connections find the new primary by themselves, and a
client that retries with its Idempotency-Key finds every acknowledged contact stored, once.

About 35 s (the leader key's TTL is 20 s, Patroni's least): in every run of scripts/test, and
alone with `scripts/test -L cluster-ha`; benchmarks/pg_failover prints the figures into
RESULTS.md."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import pytest

import crm

PG_BIN = "/usr/lib/postgresql/15/bin"
PG_USER = "carecrm-pg"  # scripts/lib.sh's CRM_PG_SYSTEM_USER: PostgreSQL never runs as root
TTL = 20  # seconds: Patroni's least leader-key TTL; the standby is promoted after it


def processes() -> list[tuple[int, int]]:
    """(pid, parent pid) of every process, from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out.append((int(entry), int(fields[1])))
        except (OSError, IndexError, ValueError):
            continue
    return out


def as_pg(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", PG_USER, "--", *cmd] if os.geteuid() == 0 else cmd


class Patroni:
    """etcd and two Patroni members (pg1, pg2) in a temporary directory on free ports."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="carecrm-ha-")
        os.chmod(self.dir, 0o755)
        self.etcd_client, self.etcd_peer = crm.free_port(), crm.free_port()
        self.rest = {n: crm.free_port() for n in ("pg1", "pg2")}
        self.pg = {n: crm.free_port() for n in ("pg1", "pg2")}
        self.procs: list[subprocess.Popen] = []

    def _config(self, name: str) -> str:
        path = os.path.join(self.dir, f"{name}.yml")
        with open(path, "w") as f:
            f.write(f"""scope: carecrm-ha
name: {name}
restapi:
  listen: 127.0.0.1:{self.rest[name]}
  connect_address: 127.0.0.1:{self.rest[name]}
etcd:
  host: 127.0.0.1:{self.etcd_client}
bootstrap:
  dcs:
    ttl: {TTL}
    loop_wait: 1
    retry_timeout: 5
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      parameters:
        max_wal_senders: 10
        max_replication_slots: 10
  initdb:
    - encoding: UTF8
    - locale: C
  pg_hba:
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{self.pg[name]}
  connect_address: 127.0.0.1:{self.pg[name]}
  data_dir: {self.dir}/{name}
  bin_dir: {PG_BIN}
  pgpass: {self.dir}/{name}.pgpass
  authentication:
    replication:
      username: replicator
      password: replicator
    superuser:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: {self.dir}
    fsync: "on"
    synchronous_commit: "on"
""")
        return path

    def _spawn(self, cmd: list[str], log: str) -> subprocess.Popen:
        out = open(os.path.join(self.dir, log), "w")
        p = subprocess.Popen(as_pg(cmd), stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, cwd="/", start_new_session=True)
        self.procs.append(p)
        return p

    def start(self) -> "Patroni":
        for missing in [c for c in ("patroni", "etcd") if shutil.which(c) is None]:
            pytest.fail(f"{missing} is not installed (scripts/lib.sh's CRM_PACKAGES has it)")
        configs = {n: self._config(n) for n in ("pg1", "pg2")}
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", PG_USER, self.dir], check=True)
        self._spawn(["etcd", "--name", "ha", "--data-dir", f"{self.dir}/etcd",
                     "--listen-client-urls", f"http://127.0.0.1:{self.etcd_client}",
                     "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_client}",
                     "--listen-peer-urls", f"http://127.0.0.1:{self.etcd_peer}",
                     "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.etcd_peer}",
                     "--initial-cluster", f"ha=http://127.0.0.1:{self.etcd_peer}",
                     "--enable-v2=true"], "etcd.log")
        self._spawn(["patroni", configs["pg1"]], "pg1.log")
        crm.wait_until("pg1 leads", lambda: self.leader() == "pg1", 60)
        self._spawn(["patroni", configs["pg2"]], "pg2.log")
        crm.wait_until("pg2 is the synchronous standby", lambda: any(
            m["name"] == "pg2" and m["role"] == "sync_standby" and m["state"] in
            ("running", "streaming") for m in self.members()), 90)
        return self

    def members(self) -> list[dict]:
        for port in self.rest.values():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/cluster", timeout=2) as r:
                    return json.load(r)["members"]
            except OSError:
                continue
        return []

    def leader(self) -> str | None:
        return next((m["name"] for m in self.members() if m["role"] == "leader"
                     and m["state"] == "running"), None)

    def url(self, database: str) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.pg.values())
        return (f"postgresql://postgres:postgres@{hosts}/{database}"
                "?target_session_attrs=read-write")

    def accepts(self, name: str) -> bool:
        """Whether member `name`'s PostgreSQL accepts a connection."""
        r = subprocess.run([f"{PG_BIN}/pg_isready", "-h", "127.0.0.1", "-p", str(self.pg[name]),
                            "-t", "2"], capture_output=True)
        return r.returncode == 0

    def psql(self, sql: str, database: str = "postgres") -> str:
        r = subprocess.run(["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d",
                            self.url(database), "-c", sql], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    def kill_machine(self, name: str) -> None:
        """The member's machine dies: its Patroni and its PostgreSQL, SIGKILL, at once."""
        subprocess.run(["pkill", "-KILL", "-f", f"patroni {self.dir}/{name}.yml"], check=False)
        try:
            with open(os.path.join(self.dir, name, "postmaster.pid")) as f:
                postmaster = int(f.readline())
        except (OSError, ValueError):
            return
        # The postmaster and every process it started (backends, WAL sender, checkpointer...).
        doomed = [postmaster] + [pid for pid, ppid in processes() if ppid == postmaster]
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def destroy(self) -> None:
        for name in self.pg:
            self.kill_machine(name)
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def ha():
    cluster = Patroni()
    try:
        yield cluster.start()
    finally:
        cluster.destroy()


def test_a_killed_primary_promoted_by_patroni_loses_no_acknowledged_write(ha, redis_url):
    ha.psql("CREATE DATABASE carecrm")
    env = crm.server_env(ha.url("carecrm"), redis_url)
    crm.migrate(env)
    t = crm.create_tenant(env)
    srv = crm.start_server(ha.url("carecrm"), redis_url, {}, label="carecrm[ha]")
    writer = None
    try:
        token = crm.login(srv.client(), t.admin_email, t.admin_password)["access_token"]
        writer = crm.ContactWriter("127.0.0.1", srv.port, token, t.tenant_id,
                                    f"ha-{crm.unique('w')}", deadline=90)
        writer.start()
        crm.wait_until("writes acknowledged", lambda: len(writer.acked) >= 50, 30)
        old = ha.leader()
        ha.kill_machine(old)
        killed = time.monotonic()
        assert not ha.accepts(old), f"{old} still answers after its machine died"
        acked_at_kill = len(writer.acked)
        crm.wait_until("the standby is promoted",
                       lambda: ha.leader() not in (None, old), TTL + 40)
        promoted = time.monotonic()
        crm.wait_until("writes are acknowledged again",
                       lambda: len(writer.acked) > acked_at_kill + 5, 60)
        back = time.monotonic()
        time.sleep(2)
    finally:
        if writer is not None:
            writer.stop.set()
            writer.join(120)
        srv.stop(check=False)
        srv.cleanup()
    stored = ha.psql(f"SELECT count(*), count(DISTINCT email) FROM contacts"
                     f" WHERE tenant_id = {t.tenant_id} AND first_name = '{writer.name}'",
                     "carecrm")
    print(f"\nfailover: primary killed; promoted after {promoted - killed:.1f} s; writes back"
          f" {back - promoted:.1f} s after the promotion; {len(writer.acked)} acknowledged,"
          f" stored {stored.replace('|', ' (distinct ')}); {writer.retries} retries")
    assert not writer.failures, writer.failures[:5]
    assert stored == f"{len(writer.acked)}|{len(writer.acked)}", stored
    assert back - promoted <= 10, f"writes came back {back - promoted:.1f} s after promotion"
