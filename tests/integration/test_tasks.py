"""Tasks (contract §11, docs/tasks.md): what someone at the clinic must do and by when, about a
contact, a deal or an appointment. Agents and above create them (assigned to the creator unless
someone else is named); the assignee, the creator or a manager changes one, the creator or a
manager deletes it. Lists filter by assignee (me), status, contact, deal, due time and overdue.
task.overdue fires once when an open task passes its due time; a workflow's create_task step
makes one task (linked to the trigger's records). A task about a patient is audited on the
patient's record and goes with them."""
import datetime
import time

import crm

SERVER_ENV = {"CARECRM_OUTBOUND_ALLOW_PRIVATE": "true"}
TASKS = "/api/v1/tasks"
KEYS = {"id", "title", "description", "contact_id", "deal_id", "appointment_id", "assignee_id",
        "created_by", "due_at", "priority", "status", "overdue", "completed_at",
        "workflow_run_id", "created_at", "updated_at"}


def task_url(task_id) -> str:
    return f"{TASKS}/{task_id}"


def at(seconds_from_now: float) -> str:
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds_from_now)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def create(client, token, title="Call back with the lab result", **fields) -> dict:
    resp = client.post(TASKS, {"title": title, **fields}, token=token)
    task = crm.assert_json_response(resp, 201)
    assert resp.header("Location") == task_url(task["id"]), resp.describe()
    assert set(task) == KEYS, task
    assert task["title"] == title, task
    return task


def listed(client, token, **params) -> list[int]:
    page = crm.assert_json_response(client.get(crm.with_query(TASKS, params or None), token=token),
                                    200)
    return [t["id"] for t in page["items"]]


def test_a_task_is_created_assigned_listed_and_completed(client, sess):
    agent = sess.tokens["agent"]
    me = sess.users["agent"]["id"]
    c = crm.create_contact(client, sess.admin)["id"]
    first = create(client, agent, contact_id=c, due_at=at(3600), priority="high",
                   description="Results from the lab on Friday")
    assert (first["assignee_id"], first["created_by"], first["status"], first["priority"],
            first["overdue"], first["completed_at"], first["workflow_run_id"]) == (
        me, me, "open", "high", False, None, None), first
    # Someone else's, due earlier (already past), and one without a due time.
    manager = sess.users["manager"]["id"]
    late = create(client, agent, "Send the invoice", assignee_id=manager, due_at=at(-60))
    undated = create(client, agent, "Tidy the waiting room")
    assert late["assignee_id"] == manager and late["overdue"] is True, late
    got = crm.assert_json_response(client.get(task_url(first["id"]), token=sess.tokens["viewer"]),
                                   200)
    assert got == {**first, "overdue": False}, got
    # By due time, those without one last; and each filter.
    ids = listed(client, agent)
    assert [i for i in ids if i in (first["id"], late["id"], undated["id"])] == [
        late["id"], first["id"], undated["id"]], ids
    assert set(listed(client, agent, assignee_id="me")) >= {first["id"], undated["id"]}
    assert late["id"] not in listed(client, agent, assignee_id="me")
    assert late["id"] in listed(client, sess.tokens["manager"], assignee_id="me")
    assert listed(client, agent, assignee_id=manager, per_page=100).count(late["id"]) == 1
    assert listed(client, agent, contact_id=c) == [first["id"]]
    assert late["id"] in listed(client, agent, overdue="true", per_page=100)
    assert first["id"] not in listed(client, agent, overdue="true", per_page=100)
    assert first["id"] in listed(client, agent, overdue="false", per_page=100)
    assert late["id"] in listed(client, agent, due_before=at(0), per_page=100)
    assert first["id"] not in listed(client, agent, due_before=at(0), per_page=100)
    # Done: completed_at is set, it leaves the open list; reopened, it is cleared.
    done = crm.assert_json_response(client.patch(task_url(first["id"]), {"status": "done"},
                                                 token=agent), 200)
    assert done["status"] == "done" and done["completed_at"] is not None, done
    assert done["updated_at"] > first["updated_at"], done
    assert first["id"] not in listed(client, agent, status="open", contact_id=c)
    assert listed(client, agent, status="done", contact_id=c) == [first["id"]]
    reopened = crm.assert_json_response(client.patch(task_url(first["id"]), {
        "status": "open", "due_at": None, "contact_id": None}, token=agent), 200)
    assert (reopened["completed_at"], reopened["due_at"], reopened["contact_id"]) == (
        None, None, None), reopened
    page = crm.assert_json_response(client.get(crm.with_query(TASKS, {
        "assignee_id": "me", "page": 2, "per_page": 1}), token=agent), 200)
    crm.assert_page(page, page=2, per_page=1)
    crm.assert_no_content(client.delete(task_url(undated["id"]), token=agent))
    crm.assert_error(client.get(task_url(undated["id"]), token=agent), 404, "NOT_FOUND")


def test_the_assignee_the_creator_or_a_manager_changes_a_task(client, sess):
    agent = sess.tokens["agent"]
    _, email, password = crm.create_user(client, sess.admin, "agent")
    other = crm.login(client, email, password)["access_token"]
    assignee_user, a_email, a_password = crm.create_user(client, sess.admin, "agent")
    assignee = crm.login(client, a_email, a_password)["access_token"]
    task = create(client, agent, assignee_id=assignee_user["id"])
    crm.assert_error(client.post(TASKS, {"title": "no"}, token=sess.tokens["viewer"]), 403,
                     "INSUFFICIENT_PERMISSIONS")
    # Another agent may neither change nor delete it, and nothing changes.
    crm.assert_error(client.patch(task_url(task["id"]), {"status": "done"}, token=other), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.delete(task_url(task["id"]), token=other), 403,
                     "INSUFFICIENT_PERMISSIONS")
    assert crm.assert_json_response(client.get(task_url(task["id"]), token=other), 200) == task
    # The assignee changes it but may not delete it; the creator and a manager may.
    crm.assert_json_response(client.patch(task_url(task["id"]), {"priority": "low"},
                                          token=assignee), 200)
    crm.assert_error(client.delete(task_url(task["id"]), token=assignee), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_json_response(client.patch(task_url(task["id"]), {"title": "Call at 10"},
                                          token=sess.tokens["manager"]), 200)
    got = crm.assert_json_response(client.get(task_url(task["id"]), token=agent), 200)
    assert (got["priority"], got["title"], got["created_by"]) == (
        "low", "Call at 10", sess.users["agent"]["id"]), got
    crm.assert_no_content(client.delete(task_url(task["id"]), token=agent))


def test_bad_input_and_records_not_held_change_nothing(client, sess, sess_b, database):
    t = sess.tokens["agent"]
    tenant = sess.tenant.tenant_id
    count = f"SELECT count(*) FROM tasks WHERE tenant_id = {tenant}"
    before = database.query(count).strip()
    bad = [({"title": ""}, ("body", "title")),
           ({"title": "x" * 201}, ("body", "title")),
           ({}, ("body", "title")),
           ({"title": "x", "priority": "urgent"}, ("body", "priority")),
           ({"title": "x", "status": "later"}, ("body", "status")),
           ({"title": "x", "due_at": "tomorrow"}, ("body", "due_at")),
           ({"title": "x", "contact_id": 0}, ("body", "contact_id")),
           ({"title": "x", "assignee_id": "me"}, ("body", "assignee_id")),
           ({"title": "x", "owner": 1}, ("body", "owner"))]
    for body, loc in bad:
        crm.assert_validation_locs(client.post(TASKS, body, token=t), loc)
    # Links the tenant does not hold: another tenant's contact, deal, user; no appointment.
    theirs = crm.create_contact(client, sess_b.admin)["id"]
    their_deal = crm.create_deal(client, sess_b.admin)["id"]
    their_user = crm.create_user(client, sess_b.admin, "agent")[0]["id"]
    for body, loc in [({"contact_id": theirs}, ("body", "contact_id")),
                      ({"deal_id": their_deal}, ("body", "deal_id")),
                      ({"appointment_id": 987654321}, ("body", "appointment_id")),
                      ({"assignee_id": 987654321}, ("body", "assignee_id"))]:
        crm.assert_validation_locs(client.post(TASKS, {"title": "x", **body}, token=t), loc)
    crm.assert_validation_locs(client.post(TASKS, {"title": "x", "assignee_id": their_user},
                                           token=t), ("body", "assignee_id"))
    # A deactivated user takes no tasks.
    gone_id = crm.create_user(client, sess.admin, "agent")[0]["id"]
    crm.assert_json_response(client.patch(f"/api/v1/users/{gone_id}", {"is_active": False},
                                          token=sess.admin), 200)
    crm.assert_validation_locs(client.post(TASKS, {"title": "x", "assignee_id": gone_id},
                                           token=t), ("body", "assignee_id"))
    for params, loc in [({"status": "later"}, ("query", "status")),
                        ({"assignee_id": "you"}, ("query", "assignee_id")),
                        ({"contact_id": "-1"}, ("query", "contact_id")),
                        ({"overdue": "maybe"}, ("query", "overdue")),
                        ({"due_before": "soon"}, ("query", "due_before")),
                        ({"per_page": 101}, ("query", "per_page"))]:
        crm.assert_validation_locs(client.get(crm.with_query(TASKS, params), token=t), loc)
    assert database.query(count).strip() == before
    # Another tenant's task: 403 to read or change, and it stays as it was.
    their_task = create(client, sess_b.admin, "theirs")
    crm.assert_error(client.get(task_url(their_task["id"]), token=t), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.patch(task_url(their_task["id"]), {"title": "mine"},
                                  token=sess.admin), 403, "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.delete(task_url(their_task["id"]), token=sess.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.get(task_url(987654321), token=t), 404, "NOT_FOUND")
    assert crm.assert_json_response(client.get(task_url(their_task["id"]),
                                               token=sess_b.admin), 200)["title"] == "theirs"
    # A bad link in a change leaves the task as it was.
    mine = create(client, t, "mine")
    crm.assert_validation_locs(client.patch(task_url(mine["id"]), {
        "title": "changed", "contact_id": theirs}, token=t), ("body", "contact_id"))
    assert crm.assert_json_response(client.get(task_url(mine["id"]), token=t), 200) == mine


def test_a_task_about_an_appointment_is_about_its_patient(client, sess):
    t = sess.admin
    cal = crm.create_calendar(client, t)
    svc = crm.create_service(client, t, [cal["id"]])
    patient = crm.create_contact(client, t)["id"]
    appt = crm.booked(client, t, patient, svc["id"], cal["id"], "2030-01-07T08:00:00.000000Z")
    task = create(client, t, "Send the fasting instructions", appointment_id=appt["id"])
    assert (task["appointment_id"], task["contact_id"]) == (appt["id"], patient), task
    other = crm.create_contact(client, t)["id"]
    crm.assert_validation_locs(client.post(TASKS, {
        "title": "x", "appointment_id": appt["id"], "contact_id": other}, token=t),
        ("body", "contact_id"))
    assert listed(client, t, contact_id=patient) == [task["id"]]


def test_tasks_go_with_their_contact_and_a_deleted_deal_leaves_them_unlinked(client, sess,
                                                                             database):
    t = sess.admin
    c = crm.create_contact(client, t)["id"]
    about = create(client, t, contact_id=c, due_at=at(-5))
    # The patient's export lists their tasks.
    export = crm.assert_json_response(client.get(f"{crm.contact_url(c)}/export", token=t), 200)
    assert [(x["id"], x["title"], x["status"]) for x in export["tasks"]] == [
        (about["id"], about["title"], "open")], export["tasks"]
    deal = crm.create_deal(client, t)["id"]
    on_deal = create(client, t, "Chase the quote", deal_id=deal)
    crm.assert_no_content(client.delete(crm.contact_url(c), token=t))
    crm.assert_error(client.get(task_url(about["id"]), token=t), 404, "NOT_FOUND")
    assert about["id"] not in listed(client, t, per_page=100)
    crm.assert_no_content(client.delete(crm.deal_url(deal), token=t))
    got = crm.assert_json_response(client.get(task_url(on_deal["id"]), token=t), 200)
    assert got["deal_id"] is None and got["title"] == "Chase the quote", got
    assert database.query(f"SELECT count(*) FROM tasks WHERE id = {about['id']}").strip() == "0"


def test_reads_and_changes_of_a_patients_task_are_audited_on_their_record(client, sess):
    c = crm.create_contact(client, sess.admin)["id"]
    t = sess.tokens["agent"]
    task = create(client, t, "Lab result: call the patient", contact_id=c)
    client.get(task_url(task["id"]), token=t)
    crm.assert_json_response(client.get(crm.with_query(TASKS, {"contact_id": c}), token=t), 200)
    crm.assert_json_response(client.patch(task_url(task["id"]), {"status": "done"}, token=t), 200)
    crm.assert_no_content(client.delete(task_url(task["id"]), token=t))

    def rows():  # a list names the contacts of its items (ids), a read or change the contact
        return [r for r in crm.audit_rows(client, sess.admin, resource="contact", limit=100)
                if "task" in r["action"] and (r["resource_id"] == c or c in (r.get("ids") or []))]

    assert crm.eventually(lambda: len(rows()) == 5, timeout=5), rows()
    by_action = {r["action"]: r for r in rows()}
    assert set(by_action) == {"create_task", "read_task", "list_tasks", "update_task",
                              "delete_task"}, rows()
    assert by_action["create_task"]["fields"] == ["title", "contact_id"], by_action
    assert by_action["update_task"]["fields"] == ["status"], by_action
    for r in rows():
        assert r["user_id"] == sess.users["agent"]["id"] and r["outcome"] == "success", r
        assert "Lab result" not in str(r), r


def test_task_overdue_fires_once_per_due_time(client, cli_env):
    s = crm.tenant_session(client, cli_env)
    t = s.admin
    with crm.Receiver([200]) as rcv:
        crm.create_subscription(client, t, url=rcv.url(), events=["task.overdue"],
                                secret="s" * 24)
        soon = create(client, t, "Call back", due_at=at(1.5))
        finished = create(client, t, "Done in time", due_at=at(1.5))
        crm.assert_json_response(client.patch(task_url(finished["id"]), {"status": "done"},
                                              token=t), 200)
        got = rcv.wait_for(1, 15)
        time.sleep(2)  # nothing more: the done task never fires, the other fires once
        assert len(rcv.requests) == 1, [r.json for r in rcv.requests]
        body = got[0].json
        assert body["type"] == "task.overdue", body
        data = body["data"]
        assert (data["task_id"], data["task"]["id"], data["task"]["overdue"],
                data["tenant_id"]) == (soon["id"], soon["id"], True, s.tenant.tenant_id), data
        assert crm.assert_json_response(client.get(task_url(soon["id"]), token=t), 200)[
            "overdue"] is True
        # A new due time is a new deadline: it fires once more when that passes.
        crm.assert_json_response(client.patch(task_url(soon["id"]), {"due_at": at(1)},
                                              token=t), 200)
        rcv.wait_for(2, 15)
        time.sleep(1.5)
        assert len(rcv.requests) == 2, [r.json for r in rcv.requests]


def test_a_workflow_makes_a_task_once_per_step_about_the_triggers_contact(client, cli_env):
    s = crm.tenant_session(client, cli_env, ("agent",))
    t = s.admin
    nurse = s.users["agent"]["id"]
    params = {"title": "Call {{contact.first_name}} with the lab result", "due_in_days": 2,
              "priority": "high", "assignee_id": nurse}
    wf = crm.create_workflow(client, t, trigger_type="contact.created",
                             actions=[{"type": "create_task", "params": params}])
    c = crm.create_contact(client, t, first_name="Ana")["id"]
    run = crm.wait_run(client, t, crm.wait_runs(client, t, wf["id"], 1)[0]["id"])
    assert run["status"] == "succeeded", run
    step = run["steps"][0]
    tasks = crm.assert_json_response(client.get(crm.with_query(TASKS, {"contact_id": c}),
                                                token=t), 200)["items"]
    assert len(tasks) == 1, tasks
    task = tasks[0]
    assert step["result"]["task_id"] == task["id"], step
    assert (task["title"], task["priority"], task["workflow_run_id"], task["created_by"],
            task["contact_id"]) == ("Call Ana with the lab result", "high", run["id"], None, c), \
        task
    assert task["assignee_id"] == nurse, task
    due = datetime.datetime.fromisoformat(task["due_at"].replace("Z", "+00:00"))
    created = datetime.datetime.fromisoformat(task["created_at"].replace("Z", "+00:00"))
    assert abs((due - created) - datetime.timedelta(days=2)) < datetime.timedelta(minutes=1), task
    # A step whose params render into something that breaks a rule fails the step, no task.
    bad = crm.create_workflow(client, t, trigger_type="contact.created", actions=[
        {"type": "create_task", "params": {"title": "x", "priority": "{{contact.first_name}}"}}])
    c2 = crm.create_contact(client, t, first_name="Bia")["id"]
    failed = crm.wait_run(client, t, crm.wait_runs(client, t, bad["id"], 1)[0]["id"])
    crm.wait_runs(client, t, wf["id"], 2)
    assert failed["status"] == "failed" and "priority" in failed["steps"][0]["error"], failed
    assert [x["title"] for x in crm.assert_json_response(client.get(crm.with_query(
        TASKS, {"contact_id": c2}), token=t), 200)["items"]] == ["Call Bia with the lab result"]


def test_a_task_about_nobody_is_audited_as_a_task(client, sess):
    t = sess.tokens["agent"]
    task = create(client, t, "Order gloves for the lab")
    crm.assert_json_response(client.patch(task_url(task["id"]), {"status": "done"}, token=t), 200)

    def rows():
        return [r for r in crm.audit_rows(client, sess.admin, resource="task",
                                          resource_id=task["id"])
                if r["action"] in ("create_task", "update_task")] or None
    found = crm.eventually(rows, timeout=5)
    assert found and {r["action"] for r in found} == {"create_task", "update_task"}, found
    for r in found:
        assert (r["user_id"], r["outcome"]) == (sess.users["agent"]["id"], "success"), r
        assert "gloves" not in str(r), r
