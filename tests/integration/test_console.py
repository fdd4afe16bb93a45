"""The operator console (issue 37, docs/operations.md "Console"): GET /console on the metrics
listener, one page that signs in with the operator token (kept for the tab, sent in a header)
and polls GET /console/data every second. Without the token the page and its data answer 401;
a foreign Host is refused as on every operator route. In headless Chromium: the page signs in,
shows a tenant once a request reached it, and shows its contacts actor's restart after the
page's own `fail` drill; a screenshot is left in build/console.png for people to look at."""
import os
import pathlib
import shutil
import tempfile
import time

import crm


def test_the_page_and_its_data_need_the_operator_token(server):
    signed_out = server.metrics_client(token="")
    page = signed_out.get("/console")
    assert page.status == 401, page.describe()
    assert page.header("Content-Type").startswith("text/html"), page.describe()
    assert page.header("WWW-Authenticate", ).startswith("Bearer"), page.describe()
    assert b'id="signin-form"' in page.body
    policy = page.header("Content-Security-Policy")
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, policy
    crm.assert_error(signed_out.get("/console/data"), 401, "INVALID_CREDENTIALS")
    wrong = server.metrics_client(token="not-the-token")
    assert wrong.get("/console").status == 401
    crm.assert_error(wrong.get("/console/data"), 401, "INVALID_CREDENTIALS")

    metrics = server.metrics_client()
    signed_in = metrics.get("/console")
    assert signed_in.status == 200 and signed_in.body == page.body, signed_in.describe()
    data = crm.assert_json_response(metrics.get("/console/data"), 200)
    assert set(data) == {"at", "actors", "cluster", "metrics", "incidents"}, data.keys()
    assert data["cluster"] is None  # one node
    assert "carecrm_http_requests_total" in data["metrics"], sorted(data["metrics"])
    crm.assert_validation_locs(metrics.get("/console/data?limit=0"), ("query", "limit"))
    crm.assert_validation_locs(metrics.get("/console/data?search=" + "1" * 21),
                               ("query", "search"))
    # The script and the styles hold no data: anyone may load them.
    for path, kind in (("/console/console.js", "application/javascript"),
                       ("/console/uplot.js", "application/javascript"),
                       ("/console/console.css", "text/css"), ("/console/uplot.css", "text/css")):
        resp = signed_out.get(path)
        assert resp.status == 200 and resp.header("Content-Type").startswith(kind), path
    # A DNS-rebinding page names its own host: refused before any token is looked at.
    for path in ("/console", "/console/data"):
        crm.assert_error(metrics.get(path, headers={"Host": "evil.example"}), 403,
                         "INSUFFICIENT_PERMISSIONS")


def test_the_data_shows_a_tenants_children_and_their_restarts(server, client, cli_env):
    s = crm.tenant_session(client, cli_env)
    crm.create_contact(client, s.admin, first_name="Counted")
    metrics = server.metrics_client()
    tid = s.tenant.tenant_id

    def tenant():
        data = crm.assert_json_response(metrics.get(f"/console/data?search={tid}"), 200)
        return next((t for t in data["actors"]["tenants"] if t["tenant_id"] == tid), None)
    contacts = next(c for c in tenant()["children"] if c["name"] == "contacts")
    assert contacts["messages"] >= 1 and contacts["restarts"] == 0, contacts
    # Each message it handled is in one bucket of its times (bounds in µs, and one above).
    bounds = crm.assert_json_response(metrics.get("/console/data"), 200)["actors"][
        "busy_bounds_us"]
    assert bounds == sorted(bounds) and len(contacts["busy_times"]) == len(bounds) + 1

    def counted():  # read while no message is half counted
        c = next(c for c in tenant()["children"] if c["name"] == "contacts")
        return sum(c["busy_times"]) == c["messages"]
    assert crm.eventually(counted, 5.0), contacts
    crm.assert_json_response(metrics.post(f"/actors/{tid}/contacts/fail"), 202)

    def restarted():
        c = next((c for c in tenant()["children"] if c["name"] == "contacts"), None)
        return c if c and c["restarts"] == 1 else None
    assert crm.eventually(restarted, 5.0)
    data = crm.assert_json_response(metrics.get("/console/data"), 200)
    assert any(i["tenant_id"] == tid and i["child"] == "contacts" for i in data["incidents"]), \
        data["incidents"]
    # A tenant passivated by the operator leaves the live tenants, and is counted.
    def passivated():
        data = crm.assert_json_response(metrics.get("/console/data"), 200)
        return sum(s["value"] for s in data["metrics"]["carecrm_tenants_passivated_total"])
    before = passivated()
    crm.assert_json_response(metrics.post(f"/actors/{tid}/passivate"), 202)
    assert crm.eventually(lambda: tenant() is None, 10.0), tenant()
    assert crm.eventually(lambda: passivated() >= before + 1, 5.0)
    # The contact's commit and the audit rows' were timed (the page's p99 cards).
    figures = crm.assert_json_response(metrics.get("/console/data"), 200)["metrics"]
    for family in ("carecrm_group_commit_seconds", "carecrm_audit_flush_seconds"):
        count = sum(s["value"] for s in figures[family + "_count"])
        buckets = [s for s in figures[family + "_bucket"] if s["labels"]["le"] == "+Inf"]
        assert count >= 1 and buckets[0]["value"] == count, (family, count, buckets)
    crm.assert_error(metrics.post(f"/actors/{crm.NOWHERE_ID}/passivate"), 404, "NOT_FOUND")
    crm.assert_error(server.metrics_client(token="").post(f"/actors/{tid}/passivate"), 401,
                     "INVALID_CREDENTIALS")
    # Both drills are in the tenant's audit trail, as the operator's (newest first).
    rows = crm.audit_rows(client, s.admin, resource="actor")
    assert [(r["actor_type"], r["action"], r["fields"], r["status"]) for r in rows] == \
        [("operator", "passivate", [], 202), ("operator", "fail", ["contacts"], 202)], rows


# ---- in Chromium -------------------------------------------------------------------------

def test_the_console_in_chromium(server, client, cli_env, tmp_path):
    from selenium.webdriver.common.by import By
    assert shutil.which("chromedriver"), "scripts/lib.sh installs Debian's chromium-driver"
    driver = crm.chromium_driver(tmp_path)
    try:
        driver.get(f"{server.metrics_url}/console")
        form = crm.wait_in_page(driver, lambda d: d.find_element(By.ID, "signin-form"))
        assert form.is_displayed()
        driver.find_element(By.ID, "token").send_keys(crm.METRICS_TOKEN)
        driver.find_element(By.CSS_SELECTOR, "#signin-form button").click()
        crm.wait_in_page(driver, lambda d: d.find_element(By.ID, "console").is_displayed())
        assert "token" not in driver.current_url  # never in a URL

        # A request reaches a new tenant: its row appears.
        s = crm.tenant_session(client, cli_env)
        crm.create_contact(client, s.admin, first_name="Shown")
        tid = s.tenant.tenant_id
        driver.find_element(By.ID, "search").send_keys(str(tid))
        row = f'#tenants tr[data-tenant="{tid}"]'
        crm.wait_in_page(driver, lambda d: d.find_element(By.CSS_SELECTOR, row))
        chip = f'{row} [data-child="contacts"]'
        assert crm.wait_in_page(driver, lambda d: d.find_element(By.CSS_SELECTOR, chip)).is_displayed()
        assert crm.wait_in_page(driver, lambda d: "p99 ≤" in d.find_element(
            By.CSS_SELECTOR, f"{chip} .times").text)

        # The page's drill fails the contacts actor (after a confirmation): its restart shows.
        crm.click_in_page(driver, f"{chip} button")
        crm.wait_in_page(driver, lambda d: d.switch_to.alert).accept()
        crm.wait_in_page(driver, lambda d: d.find_element(By.CSS_SELECTOR,
                                              f"{chip} .restarts").text == "1")
        crm.wait_in_page(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#incidents li"))
        assert crm.wait_in_page(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#charts .uplot"))
        # Charts need a few seconds of history to be worth a look.
        polls = int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-polls") or 0)
        crm.wait_in_page(driver, lambda d: int(d.find_element(By.TAG_NAME, "body")
                                   .get_attribute("data-polls") or 0) >= polls + 3)
        driver.find_element(By.ID, "search").clear()
        time.sleep(1.5)
        shot = driver.get_screenshot_as_png()
        assert len(shot) > 20_000
        out = pathlib.Path(os.environ.get("CRM_SCREENSHOT_DIR",
                                          pathlib.Path(__file__).parents[2] / "build"))
        out.mkdir(parents=True, exist_ok=True)
        (out / "console.png").write_bytes(shot)
        (pathlib.Path(tempfile.gettempdir()) / "carecrm-console.png").write_bytes(shot)

        # The page's other drill: the tenant, passivated, leaves the table.
        driver.find_element(By.ID, "search").send_keys(str(tid))
        crm.click_in_page(driver, f"{row} button.passivate")
        crm.wait_in_page(driver, lambda d: d.switch_to.alert).accept()
        crm.wait_in_page(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, row))
    finally:
        driver.quit()
