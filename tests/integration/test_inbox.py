"""The shared inbox's teams (contract §12, docs/channels.md "Teams and assignment"): a new
conversation on a team's channel goes to the available member with the fewest open
conversations, round-robin among equals, never past the team's cap nor to someone who said they
are unavailable (then it waits unassigned, with its team); closing one frees a place; the
conversation list filters by team and assignee; teams are checked (members active users of the
tenant, a channel in one team at most) and shaped by managers and admins only."""
import secrets

import pytest

import crm

SECRET = "inbox-secret-" + secrets.token_hex(8)
TEAMS = "/api/v1/teams"


@pytest.fixture
def desk(client, cli_env):
    s = crm.tenant_session(client, cli_env, ("agent", "manager", "viewer"))
    chan = crm.create_channel(client, s.admin, type="api", webhook_secret=SECRET)
    return s, chan


def new_conversation(client, token, chan) -> dict:
    ack = crm.inbound(client, chan["id"], SECRET, {"phone": crm.unique_phone()}, "Olá")
    return crm.get_conversation(client, token, ack["conversation_id"])


def availability(client, token, available: bool) -> dict:
    body = crm.assert_json_response(client.put("/api/v1/users/me/availability",
                                               {"available": available}, token=token), 200)
    assert body["available"] is available, body
    return body


def test_new_conversations_go_round_robin_to_available_members_under_the_cap(client, desk):
    s, chan = desk
    t = s.admin
    a, m = s.users["agent"]["id"], s.users["manager"]["id"]
    assert a < m
    team = crm.assert_json_response(client.post(TEAMS, {
        "name": "Front desk", "member_ids": [m, a], "channel_ids": [chan["id"]],
        "max_open_per_member": 2}, token=t), 201)
    assert team["member_ids"] == [a, m] and team["channel_ids"] == [chan["id"]], team
    got = [new_conversation(client, t, chan) for _ in range(3)]
    assert [c["assignee_id"] for c in got] == [a, m, a], got
    assert all(c["team_id"] == team["id"] for c in got), got
    # The manager steps away: nobody under the cap is left, so the next one waits.
    assert availability(client, s.tokens["manager"], False)["user_id"] == m
    waiting = new_conversation(client, t, chan)
    assert (waiting["assignee_id"], waiting["team_id"]) == (None, team["id"]), waiting
    mine = crm.assert_json_response(client.get("/api/v1/users/me/availability",
                                               token=s.tokens["manager"]), 200)
    assert mine == {"user_id": m, "available": False}, mine
    availability(client, s.tokens["manager"], True)
    assert new_conversation(client, t, chan)["assignee_id"] == m
    # Closing one of the agent's frees a place for the next (the manager is at the cap now).
    crm.assert_json_response(client.patch(crm.conversation_url(got[0]["id"]),
                                          {"status": "closed"}, token=t), 200)
    assert new_conversation(client, t, chan)["assignee_id"] == a

    def ids(params):
        return sorted(c["id"] for c in crm.list_all(client, t, crm.CONVERSATIONS, params))

    assert len(ids({"team_id": team["id"]})) == 6
    assert len(ids({"assignee_id": a})) == 3
    # A channel of no team: unassigned, no team.
    other = crm.create_channel(client, t, type="api", webhook_secret=SECRET)
    plain = new_conversation(client, t, other)
    assert (plain["assignee_id"], plain["team_id"]) == (None, None), plain


def test_teams_are_checked_and_shaped_by_managers(client, desk, sess_b):
    s, chan = desk
    t = s.admin
    a = s.users["agent"]["id"]
    crm.assert_validation(client.post(TEAMS, {"name": "X", "member_ids": [a, 10**9]}, token=t),
                          (("body", "member_ids"), "value_error"))
    stranger = crm.create_channel(client, sess_b.admin, type="api")
    crm.assert_validation(client.post(TEAMS, {"name": "X", "channel_ids": [stranger["id"]]},
                                      token=t),
                          (("body", "channel_ids"), "value_error"))
    crm.assert_validation(client.post(TEAMS, {"name": "", "member_ids": "1",
                                              "max_open_per_member": 0}, token=t),
                          (("body", "name"), "string_too_short"),
                          (("body", "member_ids"), "list_type"),
                          (("body", "max_open_per_member"), "value_error"))
    first = crm.assert_json_response(client.post(TEAMS, {"name": "Lab", "channel_ids": [chan["id"]]},
                                                 token=s.tokens["manager"]), 201)
    crm.assert_error(client.post(TEAMS, {"name": "Desk", "channel_ids": [chan["id"]]}, token=t),
                     409, "CONFLICT")
    crm.assert_error(client.post(TEAMS, {"name": "Mine"}, token=s.tokens["agent"]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    listed = crm.assert_json_response(client.get(TEAMS, token=s.tokens["viewer"]), 200)
    assert [x["id"] for x in listed["items"]] == [first["id"]], listed
    renamed = crm.assert_json_response(client.patch(f"{TEAMS}/{first['id']}", {
        "name": "Laboratório", "max_open_per_member": None}, token=t), 200)
    assert renamed["name"] == "Laboratório" and renamed["channel_ids"] == [chan["id"]], renamed
    crm.assert_error(client.get(f"{TEAMS}/{first['id']}", token=sess_b.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert client.delete(f"{TEAMS}/{first['id']}", token=t).status == 204
    crm.assert_error(client.get(f"{TEAMS}/{first['id']}", token=t), 404, "NOT_FOUND")
    # Its channel is free again.
    crm.assert_json_response(client.post(TEAMS, {"name": "Desk", "channel_ids": [chan["id"]]},
                                         token=t), 201)


def inbox_figures(metrics) -> tuple:
    """(opened, first responses, resolutions) of api channels, as /metrics counts them."""
    resp = metrics.get("/metrics")
    assert resp.status == 200, resp.describe()
    samples = crm.parse_prometheus(resp.body.decode())

    def one(name):
        found = [v for n, labels, v in samples
                 if n == name and labels.get("channel_type") == "api"]
        assert len(found) == 1, (name, found)
        return found[0]

    return (one("carecrm_conversations_opened_total"),
            one("carecrm_conversation_first_response_seconds_count"),
            one("carecrm_conversation_resolution_seconds_count"))


def test_first_response_and_resolution_are_recorded_and_reported(client, desk, server):
    s, chan = desk
    t = s.admin
    a = s.users["agent"]["id"]
    metrics = server.metrics_client()
    before = inbox_figures(metrics)
    team = crm.assert_json_response(client.post(TEAMS, {
        "name": "Desk", "member_ids": [a], "channel_ids": [chan["id"]]}, token=t), 201)
    convs = [new_conversation(client, t, chan) for _ in range(3)]
    assert all(c["first_response_at"] is None and c["resolved_at"] is None for c in convs)
    # An automation's or an agent's message is no person's answer; the agent's reply is.
    for c in convs[:2]:
        crm.send_message(client, s.tokens["agent"], c["id"], "Olá, como posso ajudar?")
        crm.send_message(client, s.tokens["agent"], c["id"], "Mais alguma coisa?")
    answered = crm.get_conversation(client, t, convs[0]["id"])
    assert answered["first_response_at"] is not None, answered
    assert crm.get_conversation(client, t, convs[0]["id"])["first_response_at"] == \
        answered["first_response_at"]
    closed = crm.assert_json_response(client.patch(crm.conversation_url(convs[0]["id"]),
                                                   {"status": "closed"}, token=t), 200)
    assert closed["resolved_at"] is not None, closed
    report = crm.assert_json_response(client.get(
        "/api/v1/reports/conversations?group_by=assignee", token=s.tokens["manager"]), 200)
    assert report["group_by"] == "assignee", report
    [group] = report["groups"]
    assert (group["key"], group["conversations"], group["responded"], group["resolved"]) == \
        (a, 3, 2, 1), report
    assert group["first_response_seconds"]["median"] >= 0, report
    assert group["resolution_seconds"]["p90"] >= 0, report
    assert report["total"]["conversations"] == 3, report
    # The same figures for Prometheus, by channel type (histograms: their counts moved).
    assert [b - a for a, b in zip(before, inbox_figures(metrics))] == [3, 2, 1]
    by_team = crm.assert_json_response(client.get(
        "/api/v1/reports/conversations?group_by=team", token=t), 200)
    assert [g["key"] for g in by_team["groups"]] == [team["id"]], by_team
    # Reopening (a reply to a closed conversation) clears the resolution.
    crm.send_message(client, s.tokens["agent"], convs[0]["id"], "Reabrindo")
    assert crm.get_conversation(client, t, convs[0]["id"])["resolved_at"] is None
    crm.assert_validation(client.get("/api/v1/reports/conversations?group_by=day&from=x",
                                     token=t),
                          (("query", "group_by"), "enum"), (("query", "from"), "datetime_parsing"))
    crm.assert_error(client.get("/api/v1/reports/conversations", token=s.tokens["agent"]), 403,
                     "INSUFFICIENT_PERMISSIONS")


def test_a_deactivated_member_gets_no_new_conversation(client, desk):
    s, chan = desk
    t = s.admin
    a, m = s.users["agent"]["id"], s.users["manager"]["id"]
    crm.assert_json_response(client.post(TEAMS, {
        "name": "Desk", "member_ids": [a, m], "channel_ids": [chan["id"]]}, token=t), 201)
    assert new_conversation(client, t, chan)["assignee_id"] == a
    assert client.delete(f"/api/v1/users/{m}", token=t).status == 204
    # The manager had none: without the deactivation the next would be theirs.
    assert [new_conversation(client, t, chan)["assignee_id"] for _ in range(2)] == [a, a]
    crm.assert_json_response(client.patch(f"/api/v1/users/{m}", {"is_active": True}, token=t), 200)
    assert new_conversation(client, t, chan)["assignee_id"] == m
