"""README's five-minute tour (issue "The API described exactly, and carecrm installed like a real
service", item 4) runs as written against a fresh server: every curl in it must succeed (-f), and
what it shows must be what it says."""
import pathlib
import re
import shutil
import subprocess

import pytest

import crm

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEMO_EMAIL = "admin@demo.carecrm.test"


def tour_script() -> str:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- tour:begin -->\s*```sh\n(.*?)```\s*<!-- tour:end -->", readme, re.S)
    assert block, "README.md has the tour between <!-- tour:begin --> and <!-- tour:end -->"
    return block.group(1)


def test_the_readme_tour_runs_as_written(server, cli_env):
    assert shutil.which("jq"), "scripts/lib.sh installs jq"
    password = "tour-" + crm.unique("pw")
    crm.run_cli(["tenant", "create", "--name", "Demo Clinic", "--admin-email", DEMO_EMAIL,
                 "--admin-password", password], cli_env)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", tour_script()], env={
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "API": f"http://{server.host}:{server.port}/api/v1", "PASSWORD": password},
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    out = r.stdout
    # What each step shows: the workflow, the subscription's secret (shown once), the contact
    # tagged by the workflow and found by search, the message's conversation, the booking and
    # the calendar feed, and the reads of the record in the audit trail.
    assert '"trigger_type": "contact.created"' in out, out
    assert re.search(r'"secret": "whsec_[A-Za-z0-9+/=]+"', out), out
    assert re.search(r'"tags": \[\s*"patient",\s*"welcome"\s*\]', out), out
    assert re.search(r'"total": 1,', out), out
    assert '"status": "open"' in out, out
    # The booking into the first free slot, and the calendar feed showing it without a name.
    assert '"status": "booked"' in out, out
    assert "BEGIN:VEVENT" in out and "SUMMARY:Check-up" in out and "Bruno" not in out, out
    assert '"action": "read"' in out, out
