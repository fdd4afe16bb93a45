"""Saved views (contract §11, docs/design.md "Views"): a named contact search kept for one user or
shared with the tenant by a manager, run for a page of contacts or counted. Another user's own
view is not found; a shared one is a manager's to change; a filter that is no search is a 422."""
import crm

VIEWS = "/api/v1/views"
KEYS = {"id", "name", "shared", "owner_id", "filter", "created_at", "updated_at"}


def view_url(view_id, tail="") -> str:
    return f"{VIEWS}/{view_id}{tail}"


def save(client, token, name, filter_, **fields) -> dict:
    resp = client.post(VIEWS, {"name": name, "filter": filter_, **fields}, token=token)
    view = crm.assert_json_response(resp, 201)
    assert resp.header("Location") == view_url(view["id"]), resp.describe()
    assert set(view) == KEYS and view["name"] == name and view["filter"] == filter_, view
    return view


def tagged(tag) -> dict:
    return {"filter_groups": [{"filters": [{"field": "tag", "op": "eq", "value": tag}]}],
            "sort": {"field": "first_name", "order": "asc"}}


def test_a_view_finds_and_counts_its_contacts_as_they_change(client, cli_env):
    s = crm.tenant_session(client, cli_env, ("agent",))
    t = s.tokens["agent"]
    ids = [crm.create_contact(client, s.admin, first_name=n, tags=["diabetes"])["id"]
           for n in ("Caio", "Ana", "Bia")]
    crm.create_contact(client, s.admin, first_name="Duda", tags=["asthma"])
    view = save(client, t, "My diabetics", tagged("diabetes"))
    assert (view["shared"], view["owner_id"]) == (False, s.users["agent"]["id"]), view
    page = crm.assert_json_response(client.get(crm.with_query(view_url(view["id"], "/contacts"),
                                                              {"per_page": 2}), token=t), 200)
    crm.assert_page(page, total=3, page=1, per_page=2)
    assert [c["first_name"] for c in page["items"]] == ["Ana", "Bia"], page
    count = crm.assert_json_response(client.get(view_url(view["id"], "/count"), token=t), 200)
    assert count == {"count": 3}, count
    # The view is a search, not a snapshot: a new patient shows up, a removed tag drops one.
    crm.create_contact(client, s.admin, first_name="Eva", tags=["Diabetes"])
    crm.assert_no_content(client.delete(f"{crm.contact_url(ids[0])}/tags/diabetes",
                                        token=s.admin))
    assert crm.assert_json_response(client.get(view_url(view["id"], "/count"), token=t),
                                    200) == {"count": 3}
    # Renamed and refiltered; listed; deleted.
    changed = crm.assert_json_response(client.patch(view_url(view["id"]), {
        "name": "Asthma", "filter": tagged("asthma")}, token=t), 200)
    assert changed["name"] == "Asthma" and changed["updated_at"] > view["updated_at"], changed
    assert crm.assert_json_response(client.get(view_url(view["id"], "/count"), token=t),
                                    200) == {"count": 1}
    listed = crm.assert_json_response(client.get(VIEWS, token=t), 200)
    assert [v["id"] for v in listed["items"]] == [view["id"]], listed
    crm.assert_no_content(client.delete(view_url(view["id"]), token=t))
    crm.assert_error(client.get(view_url(view["id"]), token=t), 404, "NOT_FOUND")


def test_own_views_are_private_and_shared_ones_a_managers(client, sess, sess_b):
    agent, manager = sess.tokens["agent"], sess.tokens["manager"]
    mine = save(client, agent, "Mine", tagged("x"))
    # Another user never sees it (404), even a manager.
    for token in (manager, sess.tokens["viewer"]):
        crm.assert_error(client.get(view_url(mine["id"]), token=token), 404, "NOT_FOUND")
        crm.assert_error(client.get(view_url(mine["id"], "/count"), token=token), 404,
                         "NOT_FOUND")
        assert mine["id"] not in [v["id"] for v in crm.assert_json_response(
            client.get(crm.with_query(VIEWS, {"per_page": 100}), token=token), 200)["items"]]
    # Only a manager shares a view; everyone reads and runs it, only a manager changes it.
    crm.assert_error(client.post(VIEWS, {"name": "Team", "shared": True, "filter": tagged("x")},
                                 token=agent), 403, "INSUFFICIENT_PERMISSIONS")
    team = save(client, manager, "Team", tagged("x"), shared=True)
    assert team["owner_id"] is None and team["shared"] is True, team
    crm.assert_json_response(client.get(view_url(team["id"], "/contacts"),
                                        token=sess.tokens["viewer"]), 200)
    crm.assert_error(client.patch(view_url(team["id"]), {"name": "Mine now"}, token=agent), 403,
                     "INSUFFICIENT_PERMISSIONS")
    crm.assert_error(client.delete(view_url(team["id"]), token=agent), 403,
                     "INSUFFICIENT_PERMISSIONS")
    # Names are unique among one's own views, and among the shared ones.
    crm.assert_error(client.post(VIEWS, {"name": "Mine", "filter": tagged("y")}, token=agent),
                     409, "CONFLICT")
    save(client, manager, "Mine", tagged("y"))  # the manager's own "Mine"
    crm.assert_error(client.post(VIEWS, {"name": "Team", "shared": True, "filter": tagged("y")},
                                 token=sess.admin), 409, "CONFLICT")
    # Another tenant's view: 403.
    theirs = save(client, sess_b.admin, "Theirs", tagged("x"), shared=True)
    crm.assert_error(client.get(view_url(theirs["id"]), token=sess.admin), 403,
                     "INSUFFICIENT_PERMISSIONS")


def test_a_filter_that_is_no_search_is_422_and_saves_nothing(client, sess):
    t = sess.tokens["agent"]
    before = crm.assert_json_response(client.get(VIEWS, token=t), 200)["total"]
    bad = [({"name": "x", "filter": {"filter_groups": [{"filters": [
               {"field": "shoe", "op": "eq", "value": 1}]}]}},
            ("body", "filter", "filter_groups", 0, "filters", 0, "field")),
           ({"name": "x", "filter": {"per_page": 5}}, ("body", "filter", "per_page")),
           ({"name": "x", "filter": []}, ("body", "filter")),
           ({"name": "x"}, ("body", "filter")),
           ({"name": "", "filter": {}}, ("body", "name")),
           ({"name": "x" * 101, "filter": {}}, ("body", "name")),
           ({"name": "x", "filter": {}, "shared": "yes"}, ("body", "shared")),
           ({"name": "x", "filter": {}, "color": "red"}, ("body", "color"))]
    for body, loc in bad:
        crm.assert_validation_locs(client.post(VIEWS, body, token=t), loc)
    assert crm.assert_json_response(client.get(VIEWS, token=t), 200)["total"] == before
    # A view whose custom field was deleted since answers the search's 422 when it runs.
    field = crm.create_field(client, sess.admin, name="plan_v", field_type="text")
    view = save(client, t, "By plan", {"filter_groups": [{"filters": [
        {"field": "cf.plan_v", "op": "eq", "value": "gold"}]}]})
    assert crm.assert_json_response(client.get(view_url(view["id"], "/count"), token=t),
                                    200) == {"count": 0}
    crm.assert_json_response(client.delete(crm.field_url("contact", field["field_id"]),
                                           token=sess.admin), 200)
    crm.assert_validation_locs(client.get(view_url(view["id"], "/count"), token=t),
                               ("body", "filter_groups", 0, "filters", 0, "field"))
