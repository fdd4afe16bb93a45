"""The contact search (contract §11, docs/design.md "Contact search"): POST /contacts/search with
HubSpot's filter_groups (groups OR-ed, the filters of a group AND-ed) over the list's fields,
tag, owner_id and cf.<key>, sorted and paged like the list. A filter on an unknown field, with
an operator its type does not take, or with a value it cannot hold is a 422; only the tenant's
contacts are ever found; each search is audited like a list."""
import crm

SEARCH = "/api/v1/contacts/search"


def found(client, token, body) -> list[int]:
    page = crm.assert_json_response(client.post(SEARCH, body, token=token), 200)
    return [c["id"] for c in page["items"]]


def test_groups_are_or_ed_and_filters_and_ed(client, cli_env):
    s = crm.tenant_session(client, cli_env, ("agent", "viewer"))
    t = s.admin
    owner = s.users["agent"]["id"]
    crm.create_field(client, t, name="plan", field_type="select", options=["gold", "silver"])
    crm.create_field(client, t, name="age", field_type="integer")

    def make(first, **fields):
        return crm.assert_json_response(client.post(crm.CONTACTS, {"first_name": first, **fields},
                                                    token=t), 201)["id"]

    ana = make("Ana", tags=["diabetes"], status="active", custom_fields={"age": 71})
    bia = make("Bia", tags=["diabetes"], status="inactive", custom_fields={"plan": "gold"})
    caio = make("Caio", owner_id=owner, custom_fields={"plan": "silver", "age": 30})
    duda = make("Duda", status="qualified")
    # (active AND diabetes) OR (plan gold) OR (owned by the agent AND younger than 40)
    body = {"filter_groups": [
        {"filters": [{"field": "status", "op": "eq", "value": "active"},
                     {"field": "tag", "op": "eq", "value": "Diabetes"}]},
        {"filters": [{"field": "cf.plan", "op": "eq", "value": "gold"}]},
        {"filters": [{"field": "owner_id", "op": "eq", "value": owner},
                     {"field": "cf.age", "op": "lt", "value": 40}]}]}
    assert found(client, s.tokens["viewer"], body) == [ana, bia, caio]
    # Sorted and paged like the list.
    page = crm.assert_json_response(client.post(SEARCH, {
        **body, "sort": {"field": "first_name", "order": "desc"}, "page": 2, "per_page": 2},
        token=t), 200)
    crm.assert_page(page, total=3, page=2, per_page=2)
    assert [c["first_name"] for c in page["items"]] == ["Ana"], page
    assert set(page["items"][0]) == crm.CONTACT_ITEM_KEYS, page
    # More operators: in, contains, exists, ranges on dates.
    assert found(client, t, {"filter_groups": [{"filters": [
        {"field": "first_name", "op": "in", "value": ["ana", "DUDA"]}]}]}) == [ana, duda]
    assert found(client, t, {"filter_groups": [{"filters": [
        {"field": "cf.age", "op": "exists"}, {"field": "first_name", "op": "contains",
                                               "value": "a"}]}]}) == [ana, caio]
    caio_at = crm.get_contact(client, t, caio)["created_at"]
    assert found(client, t, {"filter_groups": [{"filters": [
        {"field": "created_at", "op": "gte", "value": caio_at}]}]}) == [caio, duda]
    # No group: every contact, as the list gives them.
    assert found(client, t, {}) == [ana, bia, caio, duda]


def test_filters_that_break_a_rule_are_422(client, sess):
    t = sess.admin
    crm.create_field(client, t, name="score", field_type="number")
    at = ("body", "filter_groups", 0, "filters", 0)
    cases = [
        ({"field": "shoe_size", "op": "eq", "value": 1}, at + ("field",)),
        ({"field": "cf.nothing_here", "op": "eq", "value": 1}, at + ("field",)),
        ({"field": "status", "op": "gt", "value": "active"}, at + ("op",)),
        ({"field": "status", "op": "eq", "value": "archived"}, at + ("value",)),
        ({"field": "cf.score", "op": "contains", "value": "9"}, at + ("op",)),
        ({"field": "cf.score", "op": "gt", "value": "high"}, at + ("value",)),
        ({"field": "created_at", "op": "lt", "value": "yesterday"}, at + ("value",)),
        ({"field": "tag", "op": "in", "value": []}, at + ("value",)),
        ({"field": "email", "op": "like", "value": "x"}, at + ("op",)),
        ({"field": "email", "op": "exists", "value": True}, at + ("value",)),
    ]
    for f, loc in cases:
        crm.assert_validation_locs(client.post(SEARCH, {"filter_groups": [{"filters": [f]}]},
                                               token=t), loc)
    for body, loc in [({"filter_groups": [{"filters": []}]},
                       ("body", "filter_groups", 0, "filters")),
                      ({"filter_groups": [{"filters": [{"field": "id", "op": "eq", "value": 1}]}]
                        * 11}, ("body", "filter_groups")),
                      ({"query": "x"}, ("body", "query")),
                      ({"per_page": 101}, ("body", "per_page")),
                      ({"sort": {"field": "owner"}}, ("body", "sort"))]:
        crm.assert_validation_locs(client.post(SEARCH, body, token=t), loc)
    resp = client.request("POST", SEARCH, raw=b"{not json", token=t,
                          headers={"Content-Type": "application/json"})
    assert resp.status == 422, resp.describe()


def test_only_the_tenants_contacts_are_found_and_each_search_is_audited(client, sess, sess_b):
    theirs = crm.create_contact(client, sess_b.admin, first_name="Zeca")["id"]
    mine = crm.create_contact(client, sess.admin, first_name="Zeca")["id"]
    body = {"filter_groups": [{"filters": [{"field": "first_name", "op": "eq",
                                            "value": "zeca"}]}]}
    assert found(client, sess.tokens["agent"], body) == [mine]
    assert theirs not in found(client, sess.tokens["agent"], {"filter_groups": [{"filters": [
        {"field": "id", "op": "eq", "value": theirs}]}]})

    def rows():
        return [r for r in crm.audit_rows(client, sess.admin, resource="contact", action="search",
                                          limit=100) if mine in (r.get("ids") or [])]

    assert crm.eventually(lambda: len(rows()) >= 1, timeout=5), rows()
    assert rows()[0]["user_id"] == sess.users["agent"]["id"], rows()
