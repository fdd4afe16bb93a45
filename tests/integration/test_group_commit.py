"""Group commit (architecture rules 3 and 4): writes validated one after another against the
projected state must also commit together in one transaction, whatever rows they touch: an
e-mail released by one write of a batch is free for a later write of the same batch.

To put writes into one batch deterministically, a psql session holds a row lock on a contact
while carecrm commits a change to it: that commit stays in flight, and the writes under test
queue into the next batch together."""
import concurrent.futures
import threading
import time

import crm


class InFlightCommit:
    """Keeps one commit of the tenant's contacts actor in flight for `hold` seconds."""

    def __init__(self, client, token, database, hold: float = 1.5):
        self.client, self.token, self.database, self.hold = client, token, database, hold
        self.blocker = crm.create_contact(client, token, first_name="Blocker")
        self.threads = []
        self.results = []

    def __enter__(self):
        lock = threading.Thread(target=self.database.query, args=(
            f"BEGIN; SELECT 1 FROM contacts WHERE id = {self.blocker['id']} FOR UPDATE;"
            f" SELECT pg_sleep({self.hold}); COMMIT;",))
        lock.start()
        self.threads.append(lock)
        time.sleep(0.3)  # the row is locked
        self.submit(self.client.patch, crm.contact_url(self.blocker["id"]), {"status": "inactive"})
        time.sleep(0.2)  # that write's batch is committing and waits for the lock
        return self

    def submit(self, fn, *args, **kwargs):
        """Sends a request without waiting; returns a function giving its response."""
        box = {}

        def run():
            box["r"] = fn(*args, token=self.token, **kwargs)

        t = threading.Thread(target=run)
        t.start()
        self.threads.append(t)
        time.sleep(0.05)  # the actor stages it before the next one arrives
        return lambda: (t.join(timeout=30), box["r"])[1]

    def __exit__(self, *exc):
        for t in self.threads:
            t.join(timeout=30)


def db_email(database, contact_id) -> str:
    return database.query(f"SELECT coalesce(email, '') FROM contacts WHERE id = {contact_id}").strip()


def test_email_chain_staged_into_one_batch_commits(client, cli_env, database):
    s = crm.tenant_session(client, cli_env)
    x, y, w = (crm.unique_email(p) for p in ("x", "y", "w"))
    a = crm.create_contact(client, s.admin, first_name="A", email=x)
    b = crm.create_contact(client, s.admin, first_name="B", email=y)
    with InFlightCommit(client, s.admin, database) as held:
        # Validated in this order: A leaves x, B takes x and leaves y, A takes y.
        r1 = held.submit(client.patch, crm.contact_url(a["id"]), {"email": w})
        r2 = held.submit(client.patch, crm.contact_url(b["id"]), {"email": x})
        r3 = held.submit(client.patch, crm.contact_url(a["id"]), {"email": y})
        results = [r1(), r2(), r3()]
    assert [r.status for r in results] == [200, 200, 200], [r.describe() for r in results]
    assert crm.get_contact(client, s.admin, a["id"])["email"] == y == db_email(database, a["id"])
    assert crm.get_contact(client, s.admin, b["id"])["email"] == x == db_email(database, b["id"])


def test_delete_and_recreate_with_the_same_email_in_one_batch(client, cli_env, database):
    s = crm.tenant_session(client, cli_env)
    email = crm.unique_email("again")
    old = crm.create_contact(client, s.admin, first_name="Old", email=email)
    with InFlightCommit(client, s.admin, database) as held:
        deleted = held.submit(client.delete, crm.contact_url(old["id"]))
        created = held.submit(client.post, crm.CONTACTS, {"first_name": "New", "email": email})
        d, c = deleted(), created()
    assert d.status == 204, d.describe()
    assert c.status == 201, c.describe()
    rows = database.query(f"SELECT id FROM contacts WHERE tenant_id = {s.tenant.tenant_id}"
                          f" AND lower(email) = lower('{email}')").split()
    assert rows == [str(c.json["id"])], rows
    crm.assert_error(client.get(crm.contact_url(old["id"]), token=s.admin), 404, "NOT_FOUND")


def test_update_then_delete_in_one_batch_leaves_no_row(client, cli_env, database):
    s = crm.tenant_session(client, cli_env)
    gone = crm.create_contact(client, s.admin, first_name="Gone", email=crm.unique_email("g"))
    with InFlightCommit(client, s.admin, database) as held:
        updated = held.submit(client.patch, crm.contact_url(gone["id"]), {"first_name": "Renamed"})
        deleted = held.submit(client.delete, crm.contact_url(gone["id"]))
        u, d = updated(), deleted()
    assert u.status == 200 and d.status == 204, (u.describe(), d.describe())
    assert database.query(f"SELECT count(*) FROM contacts WHERE id = {gone['id']}").strip() == "0"
    crm.assert_error(client.get(crm.contact_url(gone["id"]), token=s.admin), 404, "NOT_FOUND")
