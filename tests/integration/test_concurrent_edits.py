"""Concurrent edits of one record (issue 32): each aggregate has one writer, so two PATCHes of
different fields sent at the same moment both stick, a DELETE racing a PATCH answers 204 and
200-or-404 (never a 5xx), and a deleted record never comes back."""
import threading
import time

import pytest

import crm

ROUNDS = 8


@pytest.fixture(scope="module")
def admin(server, cli_env):
    t = crm.create_tenant(cli_env)
    client = server.client()
    return client, crm.login(client, t.admin_email, t.admin_password)["access_token"]


# Each area: how to make a record, where it lives, and its GET (checked against the schema).
AREAS = {
    "channels": (crm.create_channel, crm.channel_url),
    "workflows": (crm.create_workflow, crm.workflow_url),
    "agents": (crm.create_agent, crm.agent_url),
}


def at_once(*calls):
    """Runs each call on its own thread, released together; their answers, in order."""
    gate = threading.Barrier(len(calls))
    out = [None] * len(calls)

    def run(i, call):
        gate.wait()
        out[i] = call()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return out


@pytest.mark.parametrize("area", sorted(AREAS))
def test_two_patches_of_different_fields_both_stick(server, admin, area):
    create, url_of = AREAS[area]
    client, token = admin
    for round_ in range(ROUNDS):
        record = create(client, token)
        url = url_of(record["id"])
        name = f"renamed {round_} {record['id']}"
        renamed, deactivated = at_once(
            lambda: server.client().patch(url, {"name": name}, token=token),
            lambda: server.client().patch(url, {"is_active": False}, token=token))
        assert renamed.status == 200, renamed.describe()
        assert deactivated.status == 200, deactivated.describe()
        got = crm.assert_json_response(client.get(url, token=token), 200)
        assert (got["name"], got["is_active"]) == (name, False), (round_, got)


@pytest.mark.parametrize("area", sorted(AREAS))
def test_a_delete_racing_a_patch_never_fails_and_stays_deleted(server, admin, area):
    create, url_of = AREAS[area]
    client, token = admin
    for round_ in range(ROUNDS):
        record = create(client, token)
        url = url_of(record["id"])
        # The PATCH first in half the rounds, the DELETE first in the other half.
        calls = [lambda: server.client().delete(url, token=token),
                 lambda: server.client().patch(url, {"name": f"late {round_}"}, token=token)]
        if round_ % 2:
            calls.reverse()
        answers = at_once(*calls)
        deleted, patched = answers if round_ % 2 == 0 else answers[::-1]
        assert deleted.status == 204, deleted.describe()
        assert patched.status in (200, 404), patched.describe()
        if patched.status == 404:
            crm.assert_error(patched, 404, "NOT_FOUND")
        # Gone now, and still gone once anything late has landed.
        for _ in range(2):
            crm.assert_error(client.get(url, token=token), 404, "NOT_FOUND")
            time.sleep(0.2)
