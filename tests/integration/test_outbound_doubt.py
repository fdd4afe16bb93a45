"""A send cut by a crash (issue 34, docs/channels.md "A send whose outcome is unknown"): carecrm
marks a message before its provider is called and clears the mark with the outcome, so after a
`kill -9` in between it knows the provider may have the message. A WhatsApp message is then
settled by Meta's report naming it (biz_opaque_callback_data) and never sent twice; one the
provider never reports is sent again after the wait, so it is not lost either; an api
channel's is sent again at once under the same webhook-id, which its receiver deduplicates.

The tests that kill this module's server start it again: use `server.client()` after a
restart, never the module's `client`."""
import json
import time

import crm
from test_whatsapp import change, post, receive, sent_ok, status, wa_channel

REPORT_WAIT = 4  # --outbound-report-wait
SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true",
              "CARECRM_OUTBOUND_REPORT_WAIT": REPORT_WAIT}
WAIT = 30.0


def restart(server) -> crm.Client:
    """kill -9, then a new `carecrm serve` on the same database; returns a client for it."""
    server.kill()
    assert not server.running
    server.start()
    return server.client()


def message(client, token, cid, mid) -> dict:
    return next(m for m in crm.list_messages(client, token, cid) if m["id"] == mid)


def in_doubt(database, mid) -> bool:
    return database.query(
        f"SELECT send_started_at IS NOT NULL AND status = 'queued' FROM messages"
        f" WHERE id = {mid}").strip() == "t"


def test_a_whatsapp_send_cut_by_a_crash_is_never_sent_twice_nor_lost(server, database,
                                                                      cli_env):
    session = crm.tenant_session(server.client(), cli_env)
    client, t = server.client(), session.admin
    # The Graph API holds the first two sends (carecrm is killed meanwhile), answers the rest.
    with crm.Receiver([crm.HANG, crm.HANG, sent_ok("wamid.LATE")]) as graph:
        chan = wa_channel(client, t, graph.url(""))
        cid = receive(client, chan, "Oi")["conversation_id"]

        # 1. The provider took the message, and reports it after carecrm is back.
        took = crm.send_message(client, t, cid, "Sua consulta é amanhã às 10h.")
        [first] = graph.wait_for(1, WAIT)
        assert first.json["biz_opaque_callback_data"] == str(took["id"]), first.body
        crm.wait_until("the send is marked before the provider answers",
                       lambda: in_doubt(database, took["id"]), 10)
        client = restart(server)
        report = status("wamid.TOOK", "delivered", biz_opaque_callback_data=str(took["id"]))
        answer = crm.assert_json_response(post(client, chan, change(chan, statuses=[report])), 200)
        assert answer["statuses"] == 1, answer
        got = message(client, t, cid, took["id"])
        crm.assert_message(got, status="delivered", external_message_id="wamid.TOOK")

        # 2. The provider never reports the next one: it is sent again once the wait is over.
        lost = crm.send_message(client, t, cid, "Traga o pedido médico.")
        graph.wait_for(2, WAIT)
        crm.wait_until("the second send is marked", lambda: in_doubt(database, lost["id"]), 10)
        marked = time.monotonic()  # the wait counts from the mark
        client = restart(server)
        # Anything for the tenant loads its channels (and their queued messages).
        assert client.get(f"/api/v1/conversations/{cid}", token=t).status == 200
        sent = crm.wait_message(client, t, cid, lost["id"], timeout=WAIT)
        assert time.monotonic() - marked >= REPORT_WAIT - 1, "sent again before the wait"
        crm.assert_message(sent, status="sent", external_message_id="wamid.LATE")
        # Past the wait for the first as well: it was not sent again.
        time.sleep(1)
        requests = graph.requests
    texts = [r.json["text"]["body"] for r in requests]
    assert texts == ["Sua consulta é amanhã às 10h.", "Traga o pedido médico.",
                     "Traga o pedido médico."], texts
    assert message(client, t, cid, took["id"])["status"] == "delivered"


def test_an_api_channels_send_cut_by_a_crash_goes_again_under_the_same_webhook_id(
        server, database, cli_env):
    session = crm.tenant_session(server.client(), cli_env)
    client, t = server.client(), session.admin
    secret = "doubt-secret-0123456789"
    with crm.Receiver([crm.HANG, 200]) as rcv:
        chan = crm.create_channel(client, t, type="api", webhook_secret=secret,
                                  config={"outbound_url": rcv.url("/out"),
                                          "signing_secret": secret})
        cid = crm.inbound(client, chan["id"], secret, {"phone": "+351912345678"})[
            "conversation_id"]
        queued = crm.send_message(client, t, cid, "Resultados prontos")
        [first] = rcv.wait_for(1, WAIT)
        crm.wait_until("the send is marked", lambda: in_doubt(database, queued["id"]), 10)
        client = restart(server)
        assert client.get(f"/api/v1/conversations/{cid}", token=t).status == 200
        second = rcv.wait_for(2, WAIT)[1]
    assert first.header("webhook-id") == second.header("webhook-id") == f"msg_out_{queued['id']}"
    assert json.loads(first.body)["data"] == json.loads(second.body)["data"]
    sent = crm.wait_message(client, t, cid, queued["id"], timeout=WAIT)
    crm.assert_message(sent, status="sent")


def test_a_channel_has_at_most_eight_sends_in_flight(server, cli_env):
    """A queue drains through a few connections at the provider's pace (docs/channels.md
    "Pace"), not one connection a message."""
    session = crm.tenant_session(server.client(), cli_env)
    client, t = server.client(), session.admin
    with crm.Receiver(hang=True) as graph:
        chan = wa_channel(client, t, graph.url(""))
        cid = receive(client, chan, "Oi")["conversation_id"]
        for i in range(12):
            crm.send_message(client, t, cid, f"Mensagem {i}")
        graph.wait_for(8, WAIT)
        time.sleep(1.5)  # the other four would have arrived by now
        assert len(graph.requests) == 8, [r.json["text"]["body"] for r in graph.requests]
        # The first ones out, in the order they were queued.
        assert sorted(r.json["text"]["body"] for r in graph.requests) == sorted(
            f"Mensagem {i}" for i in range(8))


def test_a_report_that_beats_the_sends_answer_keeps_its_status_and_stops_a_retry(server,
                                                                                   cli_env):
    """Meta's report names carecrm's id, so it can arrive while the send's answer is still on
    its way: the message is delivered at once, the answer that comes late (here: lost, so the
    attempt is to be retried) does not put it back, and the retry finds nothing to send."""
    session = crm.tenant_session(server.client(), cli_env)
    client, t = server.client(), session.admin
    with crm.Receiver([crm.HANG]) as graph:
        chan = wa_channel(client, t, graph.url(""))
        cid = receive(client, chan, "Oi")["conversation_id"]
        queued = crm.send_message(client, t, cid, "Seu exame está pronto.")
        graph.wait_for(1, WAIT)
        report = status("wamid.EARLY", "delivered", biz_opaque_callback_data=str(queued["id"]))
        crm.assert_json_response(post(client, chan, change(chan, statuses=[report])), 200)
        crm.assert_message(message(client, t, cid, queued["id"]), status="delivered",
                           external_message_id="wamid.EARLY")
    # The held send's connection closed unanswered: an attempt to retry, 1 s later.
    time.sleep(3)
    got = message(client, t, cid, queued["id"])
    crm.assert_message(got, status="delivered", external_message_id="wamid.EARLY", attempts=1)
