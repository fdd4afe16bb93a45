"""Faults under write load (issue "Hardening", standing defences): carecrm killed with SIGKILL,
and Postgres restarted behind carecrm's back. What a client was told is the truth: every write
answered 2xx is in Postgres and served by the API with its last acknowledged values; a write
that got no answer (or a 503) is either wholly there or wholly absent, never half-written; and
writes succeed again once the fault is gone.

Each test runs its own `carecrm serve`. The Postgres restart happens on a cluster of its own
(crm.PgCluster), never on the shared test cluster other test files use at the same time."""
import http.client
import secrets
import threading
import time
from typing import Any, NamedTuple

import crm

CONTACTS, DEALS = crm.CONTACTS, crm.DEALS
WRITERS = 4
# (last_name, status) of a contact's create and its three updates: a pair that is not one of
# these would be a write stored in part.
VERSIONS = [("v0", "active"), ("v1", "qualified"), ("v2", "inactive"), ("v3", "unqualified")]
REVISIT = ("v4", "inactive")  # a contact's update sent after the fault
LOAD_TIMEOUT = 20.0      # generous bounds on waits: the machine is noisy, ASan is slow
RECOVERY_TIMEOUT = 30.0


# ---- the write load ---------------------------------------------------------------------------


class Write(NamedTuple):
    op: str
    fields: dict
    acked: bool


class Record:
    """A contact or a deal the load tried to create, with every write sent to it in order.
    `key` (the contact's e-mail, the deal's title) finds it in Postgres when the create got no
    answer; `id` is set only when the create was acknowledged."""

    def __init__(self, kind: str, key: str, fields: dict):
        self.kind, self.key, self.fields = kind, key, fields
        self.id: int | None = None
        self.writes: list[Write] = []

    def __repr__(self) -> str:
        return f"<{self.kind} {self.id} {self.key!r} {self.writes}>"


class Attempt(NamedTuple):
    writer: int
    op: str
    started: float
    ended: float
    resp: crm.Response | None  # None: no answer (connection refused, reset or closed)

    @property
    def acked(self) -> bool:
        return self.resp is not None and 200 <= self.resp.status < 300

    def describe(self) -> str:
        return f"writer {self.writer} {self.op}: " + \
            (self.resp.describe() if self.resp is not None else "no answer")


class Writer(threading.Thread):
    """One client writing in rounds until told to stop: create a contact (with a tag), update
    it, add a tag, create a deal for it, update the contact, update the deal's amount, add a
    tag, update the contact once more. A round whose create is not acknowledged ends there;
    the next write on a record follows whatever answer the previous one got."""

    def __init__(self, n: int, server: crm.Server, token: str, stopping: threading.Event):
        super().__init__(name=f"writer-{n}", daemon=True)
        self.n, self.token, self.stopping = n, token, stopping
        self.client = crm.Client(server.host, server.port, timeout=15.0)
        self.records: list[Record] = []
        self.attempts: list[Attempt] = []
        self.busy = False  # a request is on its way or awaited
        self.rounds = 0

    def acks(self, since: float = 0.0) -> int:
        return sum(1 for a in list(self.attempts) if a.acked and a.started >= since)

    def run(self) -> None:
        while not self.stopping.is_set():
            self.one_round()
            self.rounds += 1

    def send(self, op: str, method: str, path: str, body: dict) -> Any:
        """The JSON of a 2xx answer, or None (any other answer, or none at all)."""
        started = time.monotonic()
        self.busy = True
        try:
            resp = self.client.request(method, path, body, token=self.token)
        except (OSError, http.client.HTTPException):
            resp = None
        finally:
            self.busy = False
        attempt = Attempt(self.n, op, started, time.monotonic(), resp)
        self.attempts.append(attempt)
        if not attempt.acked:
            time.sleep(0.02)  # do not spin against a dead port or a down database
            return None
        return resp.json if resp.json is not None else {}

    def write(self, record: Record, op: str, method: str, path: str, fields: dict) -> Any:
        body = self.send(f"{op} {record.kind} {record.key}", method, path, fields)
        record.writes.append(Write(op, fields, body is not None))
        return body

    def one_round(self) -> None:
        tag = f"w{self.n}r{self.rounds}"
        email = f"{tag}-{secrets.token_hex(4)}@faults.example"
        last, status = VERSIONS[0]
        contact = Record("contact", email, {"first_name": f"Writer {tag}", "last_name": last,
                                            "email": email, "status": status,
                                            "tags": [f"{tag}-t0"]})
        self.records.append(contact)
        created = self.write(contact, "create", "POST", CONTACTS, contact.fields)
        if created is None:
            return
        contact.id = created["id"]
        url = crm.contact_url(contact.id)
        title = f"Deal {tag} {secrets.token_hex(4)}"
        deal = Record("deal", title, {"title": title, "amount": f"{self.rounds + 1}.25",
                                      "currency": "USD", "contact_id": contact.id})

        def update(k):
            last, status = VERSIONS[k]
            self.write(contact, "update", "PATCH", url, {"last_name": last, "status": status})

        def add_tag(k):
            self.write(contact, "tag", "POST", url + "/tags", {"tags": [f"{tag}-t{k}"]})

        def create_deal():
            self.records.append(deal)
            body = self.write(deal, "create", "POST", DEALS, deal.fields)
            deal.id = None if body is None else body["id"]

        def update_deal():
            if deal.id is not None:
                self.write(deal, "update", "PATCH", crm.deal_url(deal.id),
                           {"amount": f"{self.rounds + 1}.75"})

        for step in (lambda: update(1), lambda: add_tag(1), create_deal, lambda: update(2),
                     update_deal, lambda: add_tag(2), lambda: update(3)):
            if self.stopping.is_set():
                return
            step()


class Load:
    """WRITERS writers on one server, all sharing one stop switch."""

    def __init__(self, server: crm.Server, token: str):
        self.stopping = threading.Event()
        self.writers = [Writer(n, server, token, self.stopping) for n in range(WRITERS)]
        for w in self.writers:
            w.start()

    def wait(self, what: str, check, timeout: float = LOAD_TIMEOUT, interval: float = 0.02):
        if not crm.eventually(check, timeout, interval):
            self.stop()
            raise AssertionError(f"the load did not reach this within {timeout:.0f} s: {what} "
                                 f"(acknowledged per writer: {[w.acks() for w in self.writers]})")

    def halt(self) -> None:
        self.stopping.set()
        for w in self.writers:
            w.join(timeout=30)

    def stop(self) -> None:
        self.halt()
        alive = [w.name for w in self.writers if w.is_alive()]
        assert not alive, f"writers still running 30 s after being told to stop: {alive}"

    @property
    def attempts(self) -> list[Attempt]:
        return sorted((a for w in self.writers for a in w.attempts), key=lambda a: a.started)

    @property
    def records(self) -> list[Record]:
        return [r for w in self.writers for r in w.records]


# ---- what Postgres and the API hold afterwards ----------------------------------------------


def allowed(record: Record, keys: tuple) -> list[tuple]:
    """The values `keys` may hold after the record's writes: those of the last acknowledged
    write that set them, or those of a later write that was never acknowledged."""
    setting = [w for w in record.writes if all(k in w.fields for k in keys)]
    last = max(i for i, w in enumerate(setting) if w.acked)
    return [tuple(w.fields[k] for k in keys) for w in setting[last:]]


def contact_of(row: dict) -> dict:
    return {k: row[k] for k in ("id", "first_name", "last_name", "email", "status", "tags")}


def deal_of(row: dict) -> dict:
    return {k: row[k] for k in ("id", "title", "amount", "currency", "contact_id")}


def revisit(client: crm.Client, token: str, records: list[Record]) -> int:
    """Once the fault is gone, one more write to every record whose last write got no
    acknowledgement: a contact update and a tag, a deal's amount. Each must be acknowledged,
    and then wins over the write in doubt. Returns the number of records revisited."""
    doubtful = [r for r in records if r.id is not None and not r.writes[-1].acked]
    for rec in doubtful:
        if rec.kind == "contact":
            url = crm.contact_url(rec.id)
            writes = [("update", "PATCH", url, dict(zip(("last_name", "status"), REVISIT))),
                      ("tag", "POST", url + "/tags", {"tags": [f"revisit-{rec.id}"]})]
        else:
            writes = [("update", "PATCH", crm.deal_url(rec.id), {"amount": "99.50"})]
        for op, method, path, fields in writes:
            resp = client.request(method, path, fields, token=token)
            crm.assert_json_response(resp, 200)
            rec.writes.append(Write(op, fields, True))
    return len(doubtful)


def check_stored(client: crm.Client, token: str, db: crm.Database, tenant_id: int,
                 records: list[Record]) -> tuple[int, int]:
    """Every acknowledged create is in Postgres under its id with its last acknowledged values,
    and the API serves exactly that row; a create that was never acknowledged is absent or
    there as sent; Postgres holds nothing the load did not send. Returns the numbers of
    acknowledged and of unacknowledged-but-stored creates."""
    stored = {}
    for kind, key, select in (
            ("contact", "email", "SELECT id, first_name, last_name, email, status, tags "
                                 "FROM contacts"),
            ("deal", "title", "SELECT id, title, amount::text AS amount, currency, contact_id "
                              "FROM deals")):
        rows = crm.sql_rows(db, f"{select} WHERE tenant_id = {tenant_id} ORDER BY id")
        stored[kind] = {r[key]: r for r in rows}
        assert len(stored[kind]) == len(rows), f"a {kind} stored twice: {rows}"
    shape = {"contact": contact_of, "deal": deal_of}
    sent = {"contact": set(), "deal": set()}
    acked = late = 0
    for rec in records:
        sent[rec.kind].add(rec.key)
        row = stored[rec.kind].get(rec.key)
        if rec.id is None:  # the create was never acknowledged
            if row is None:
                continue
            late += 1
            got, want = shape[rec.kind](row), shape[rec.kind](dict(rec.fields, id=row["id"]))
            assert got == want, \
                f"an unacknowledged {rec.kind} create is stored other than sent: {got} / {rec}"
        else:
            acked += 1
            assert row is not None, f"an acknowledged {rec.kind} create is not in Postgres: {rec}"
            assert row["id"] == rec.id, f"stored under id {row['id']}, acknowledged as {rec}"
            check_values(rec, row)
        path = crm.contact_url(row["id"]) if rec.kind == "contact" else crm.deal_url(row["id"])
        served = crm.assert_json_response(client.get(path, token=token), 200)
        assert shape[rec.kind](served) == shape[rec.kind](row), \
            f"the API serves other values than Postgres holds: {served} / {row} / {rec}"
    for kind, rows in stored.items():
        extra = [rows[k] for k in set(rows) - sent[kind]]
        assert not extra, f"Postgres holds {kind}s the load never sent: {extra}"
    assert crm.list_total(client, token, CONTACTS) == len(stored["contact"])
    assert crm.list_total(client, token, DEALS) == len(stored["deal"])
    return acked, late


def check_values(rec: Record, row: dict) -> None:
    """The stored row of an acknowledged create against the writes sent to it."""
    if rec.kind == "deal":
        for key in ("title", "currency", "contact_id"):
            assert row[key] == rec.fields[key], f"{key}: {row} / {rec}"
        assert (row["amount"],) in allowed(rec, ("amount",)), \
            f"the amount is not the last acknowledged one (nor a later one): {row} / {rec}"
        return
    for key in ("first_name", "email"):
        assert row[key] == rec.fields[key], f"{key}: {row} / {rec}"
    pair = (row["last_name"], row["status"])
    assert pair in allowed(rec, ("last_name", "status")), \
        f"(last_name, status) {pair} is not that of the last acknowledged update (nor of a " \
        f"later one sent in one write): {row} / {rec}"
    acked_tags = {t for w in rec.writes if w.acked for t in w.fields.get("tags", [])}
    sent_tags = {t for w in rec.writes for t in w.fields.get("tags", [])}
    assert acked_tags <= set(row["tags"]) <= sent_tags, \
        f"tags {row['tags']}: acknowledged {sorted(acked_tags)}, sent {sorted(sent_tags)}: {rec}"
    assert len(row["tags"]) == len(set(row["tags"])), f"a tag stored twice: {row}"


def check_writes_again(client: crm.Client, token: str, db: crm.Database) -> None:
    """A contact, a deal for it and an update of each are acknowledged and stored."""
    email = crm.unique_email("after")
    contact = crm.create_contact(client, token, first_name="After", email=email)
    resp = client.patch(crm.contact_url(contact["id"]), {"last_name": "Fault"}, token=token)
    crm.assert_json_response(resp, 200)
    deal = crm.create_deal(client, token, title="After " + secrets.token_hex(3), amount="7",
                           contact_id=contact["id"])
    crm.assert_json_response(client.patch(crm.deal_url(deal["id"]), {"amount": "8"},
                                          token=token), 200)
    assert crm.get_contact(client, token, contact["id"])["last_name"] == "Fault"
    assert crm.sql_rows(db, f"SELECT c.email, c.last_name, d.amount::text AS amount FROM contacts "
                            f"c JOIN deals d ON d.contact_id = c.id WHERE c.id = {contact['id']}"
                        ) == [{"email": email, "last_name": "Fault", "amount": "8.00"}]


def ready_status(client: crm.Client) -> int:
    try:
        return client.get("/readyz").status
    except (OSError, http.client.HTTPException):
        return 0


# ---- kill -9 -----------------------------------------------------------------------------


def test_every_acknowledged_write_survives_a_kill_9_under_write_load(
        request, database, migrated, cli_env, redis_url):
    """carecrm answers 2xx only once a write is committed: SIGKILL in the middle of write load
    loses none of them. A new server on the same database serves every acknowledged contact
    and deal with its last acknowledged values (a later acknowledged update wins over an
    earlier one), exactly as Postgres holds them; a write in flight at the kill is wholly there
    or wholly absent; and the new server takes writes."""
    first = second = load = None
    try:
        # A round in which every write was answered before the SIGKILL landed proves nothing
        # about a write in flight: such a round is played again, on a tenant of its own (the
        # checks below compare the tenant's rows with what its load sent).
        for round_no in range(3):
            tenant = crm.create_tenant(cli_env)
            first = crm.start_server(database.url, redis_url,
                                     label=f"carecrm[{request.node.name}-{round_no}]")
            token = crm.login(first.client(), tenant.admin_email,
                              tenant.admin_password)["access_token"]
            start = time.monotonic()
            load = Load(first, token)
            load.wait("every writer has 8 acknowledged writes, for a second",
                      lambda: time.monotonic() - start > 1.0 and
                      min(w.acks() for w in load.writers) >= 8)
            load.wait("a request in flight", lambda: any(w.busy for w in load.writers), 5.0, 0)
            kill_sent = time.monotonic()
            first.kill()  # SIGKILL, and waits until the process is gone
            killed_at = time.monotonic()
            load.wait("every writer tried again after the kill",
                      lambda: all(w.attempts and w.attempts[-1].started > killed_at
                                  for w in load.writers))
            load.stop()
            attempts = load.attempts
            # Writes sent before the kill whose answer it took away (their outcome is unknown).
            cut = [a for a in attempts if a.started < kill_sent < a.ended and a.resp is None]
            if cut:
                break
            first.cleanup()
            first = None

        before = [a for a in attempts if a.ended < kill_sent]
        assert all(a.acked for a in before), \
            "a write failed before the kill: " + next(a.describe() for a in before if not a.acked)
        assert cut, "no write was in flight when the server was killed, in 3 rounds"
        late = [a for a in attempts if a.started > killed_at]
        assert late and not any(a.acked for a in late), \
            "a killed server acknowledged a write: " + next(a.describe() for a in late if a.acked)

        second = crm.start_server(database.url, redis_url,
                                  label=f"carecrm[{request.node.name}-after]")
        client = second.client()
        revisited = revisit(client, token, load.records)
        acked, stored_late = check_stored(client, token, database, tenant.tenant_id,
                                          load.records)
        assert acked >= 2 * WRITERS, acked  # a contact and a deal per writer at least
        check_writes_again(client, token, database)
        print(f"kill -9: {len(before)} writes acknowledged before the kill, {len(cut)} cut "
              f"({stored_late} creates among them stored), {acked} creates checked, "
              f"{revisited} records revisited")
        second.stop(check=True)
    finally:
        if load is not None:
            load.halt()
        for server in (first, second):
            if server is not None:
                server.cleanup()


# ---- Postgres restarted -------------------------------------------------------------------


def tenant_on_own_cluster(cluster, redis_url):
    """Starts `cluster` and makes a migrated database on it with one tenant: (database, tenant)."""
    cluster.start()
    db = cluster.create_database()
    env = crm.server_env(db.url, redis_url)
    crm.migrate(env)
    return db, crm.create_tenant(env)


def test_writes_ride_through_a_postgres_restart_without_restarting_carecrm(request, redis_url):
    """Postgres goes down (fast shutdown) and comes back while clients write. carecrm keeps
    running and answers every request: a write it cannot commit is a 503 SERVICE_UNAVAILABLE
    with the contract's error body (a retry may succeed), never another 5xx and never a 2xx
    for something Postgres did not take; /readyz reports the outage and recovers; writes are
    acknowledged again soon after Postgres is back; and everything acknowledged, before,
    during or after, is in Postgres and served by the API."""
    cluster = crm.PgCluster()
    server = None
    load = None
    try:
        db, tenant = tenant_on_own_cluster(cluster, redis_url)
        server = crm.start_server(db.url, redis_url, label=f"carecrm[{request.node.name}]")
        client = server.client()
        token = crm.login(client, tenant.admin_email, tenant.admin_password)["access_token"]
        assert ready_status(client) == 200

        start = time.monotonic()
        load = Load(server, token)
        load.wait("every writer has 8 acknowledged writes, for a second",
                  lambda: time.monotonic() - start > 1.0 and
                  min(w.acks() for w in load.writers) >= 8)
        stopping_at = time.monotonic()
        cluster.stop()
        down_at = time.monotonic()
        load.wait("/readyz reports the outage", lambda: ready_status(client) == 503, 10.0, 0.1)
        crm.assert_error(client.get("/readyz"), 503, "SERVICE_UNAVAILABLE")
        load.wait("every writer was answered while Postgres was down, for a second",
                  lambda: time.monotonic() - down_at > 1.0 and
                  all(any(a.started > down_at and a.resp is not None
                          for a in list(w.attempts)) for w in load.writers), 10.0, 0.05)
        restart_at = time.monotonic()
        cluster.start()
        up_at = time.monotonic()
        assert server.running, "carecrm died while Postgres was down"
        load.wait("every writer has an acknowledged write after Postgres came back",
                  lambda: all(w.acks(since=up_at) >= 1 for w in load.writers),
                  RECOVERY_TIMEOUT, 0.1)
        assert crm.eventually(lambda: ready_status(client) == 200, RECOVERY_TIMEOUT, 0.1), \
            "/readyz did not recover after Postgres came back"
        load.stop()
        assert server.running, "carecrm died after Postgres came back"

        attempts = load.attempts
        silent = [a.describe() for a in attempts if a.resp is None]
        assert not silent, f"requests without an answer (carecrm hung or crashed): {silent[:5]}"
        for a in attempts:
            if not a.acked:
                try:
                    crm.assert_error(a.resp, 503, "SERVICE_UNAVAILABLE")
                except AssertionError as e:
                    raise AssertionError(f"{a.describe()}\n{e}") from None
        assert any(a.acked for a in attempts if a.ended < stopping_at)
        outage = [a for a in attempts if down_at < a.started and a.ended < restart_at]
        assert outage, "no write was answered while Postgres was down"
        lies = [a.describe() for a in outage if a.acked]
        assert not lies, f"writes acknowledged while Postgres was down: {lies[:5]}"

        revisited = revisit(client, token, load.records)
        assert revisited, "no record had a write in doubt: the outage missed the load"
        acked, stored_late = check_stored(client, token, db, tenant.tenant_id, load.records)
        check_writes_again(client, token, db)
        refused = sum(1 for a in attempts if not a.acked)
        back = min(a.ended for a in attempts if a.acked and a.started >= up_at) - up_at
        print(f"postgres restart: {len(attempts)} writes, {refused} answered 503 "
              f"({len(outage)} during the outage), {acked} acknowledged creates checked, "
              f"{stored_late} unacknowledged creates stored, {revisited} records revisited; "
              f"down {restart_at - down_at:.1f} s, "
              f"first write acknowledged {back:.1f} s after the restart")
        server.stop(check=True)
    finally:
        if load is not None:
            load.halt()
        try:
            if server is not None:
                server.cleanup()
        finally:
            cluster.destroy(check=False)


def test_inbound_messages_ride_through_a_postgres_restart(request, redis_url):
    """Inbound messages are staged and committed in batches (docs/channels.md "Inbound group
    commit"). Postgres goes down and comes back while 4 senders post: every message answered
    200 is stored, a message that got a 503 is stored exactly once when the sender retries it,
    and every conversation's unread count is the number of its messages (a batch whose outcome
    was unknown left no conversation counting from a wrong state)."""
    cluster = crm.PgCluster()
    server = None
    stop = threading.Event()
    try:
        db, tenant = tenant_on_own_cluster(cluster, redis_url)
        server = crm.start_server(db.url, redis_url, label=f"carecrm[{request.node.name}]")
        client = server.client()
        token = crm.login(client, tenant.admin_email, tenant.admin_password)["access_token"]
        secret = "inbound-fault-" + secrets.token_hex(8)
        chan = crm.create_channel(client, token, webhook_secret=secret)
        senders = [crm.unique_phone() for _ in range(4)]
        posted: list[list[tuple[str, Any]]] = [[] for _ in senders]  # (external id, response)

        def post(i, ext):
            body = crm.inbound_body({"phone": senders[i]}, f"message {ext}", ext)
            try:
                return crm.post_channel_webhook(server.client(), chan["id"], secret, body)
            except (OSError, http.client.HTTPException):
                return None

        def sender(i):
            n = 0
            while not stop.is_set():
                ext = f"s{i}-{n}"
                posted[i].append((ext, post(i, ext)))
                n += 1

        def acks(i, since=0):
            return sum(1 for _, r in posted[i][since:] if r is not None and r.status == 200)

        threads = [threading.Thread(target=sender, args=(i,)) for i in range(len(senders))]
        for t in threads:
            t.start()
        assert crm.eventually(lambda: all(acks(i) >= 5 for i in range(len(senders))),
                              LOAD_TIMEOUT, 0.05)
        cluster.stop()
        time.sleep(1.0)
        marks = [len(p) for p in posted]
        cluster.start()
        assert crm.eventually(lambda: all(acks(i, marks[i]) >= 3 for i in range(len(senders))),
                              RECOVERY_TIMEOUT, 0.1), "inbound messages not stored again"
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert server.running
        refused = [(i, ext, r) for i, p in enumerate(posted) for ext, r in p
                   if r is None or r.status != 200]
        assert refused, "no message was refused: the outage missed the load"
        for i, ext, r in refused:  # answered, and with the contract's 503
            assert r is not None, f"{ext}: no answer"
            crm.assert_error(r, 503, "SERVICE_UNAVAILABLE")
        refused = [(i, ext) for i, ext, _ in refused]
        for i, ext in refused:  # the provider retries what was not acknowledged
            resp = crm.eventually(lambda: (r := post(i, ext)) is not None and r.status == 200 and r,
                                  RECOVERY_TIMEOUT, 0.2)
            assert resp, f"{ext} was never acknowledged"
        stored = dict((row["external_message_id"], row["n"]) for row in crm.sql_rows(
            db, "SELECT external_message_id, count(*) AS n FROM messages WHERE direction ="
                f" 'inbound' AND channel_id = {chan['id']} GROUP BY 1"))
        every = [ext for p in posted for ext, _ in p]
        assert sorted(stored) == sorted(every), "messages missing or unexpected"
        assert set(stored.values()) == {1}, "a message stored twice"
        counts = crm.sql_rows(db, "SELECT c.id, c.unread_count, count(m.id) AS n FROM"
                                  " conversations c JOIN messages m ON m.conversation_id = c.id"
                                  f" WHERE c.channel_id = {chan['id']} GROUP BY 1, 2")
        assert len(counts) == len(senders), counts
        assert all(row["unread_count"] == row["n"] for row in counts), counts
        server.stop(check=True)
    finally:
        stop.set()
        try:
            if server is not None:
                server.cleanup()
        finally:
            cluster.destroy(check=False)
