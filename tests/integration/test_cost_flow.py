"""Cost in the flow, on the sandbox: the job carries the estimate of what was created (`status -o json`
and `GET /provisioning-jobs/{id}`), the estimate's counts match what boto3 reads back, and `envs`
shows what the environment has cost so far from the job's own history, at a later time given with
`--as-of` (a clock, not a sleep). One apply of examples/fixed.jsonc, one scale, one destroy."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.test_apply_destroy import job_resources

from vmplane.cost.prices import AWS_US_EAST_1 as P

# examples/fixed.jsonc per hour, by hand: each t3.small VM with its 20 GB gp3 disk; the NAT gateway,
# its data (100 GB a month, the stated assumption, over 730 h) and its Elastic IP.
VM_HOUR = P.instance_hour["t3.small"] + 20 * P.disk_gb_month / 730
NETWORK_HOUR = P.nat_hour + 100 * P.nat_gb / 730 + P.public_ip_hour


def hours(a: str, b: str) -> float:
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds() / 3600


def get_job(cli: Cli, job_id: str) -> dict:
    """GET /provisioning-jobs/{id} of the API app over the CLI's database (no workflows run here)."""
    from fastapi.testclient import TestClient

    from vmplane.api.app import create_app
    from vmplane.jobs import tokens
    from vmplane.settings import Settings
    from vmplane.store.db import transaction

    settings = Settings(home=cli.home)
    with transaction(settings.db_url) as s:
        token, _ = tokens.create_token(s, "acme", tokens.Role.viewer)
    with TestClient(create_app(settings, run_workflows=False)) as client:
        r = client.get(f"/provisioning-jobs/{job_id}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    return dict(r.json())


@pytest.mark.sandbox
@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")  # starlette's, not ours
def test_the_job_carries_its_estimate_and_envs_its_cost_so_far(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "itest-cost")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    job_id = job["id"]
    assert job["status"] == "succeeded", job["error"]
    status = cli.json("status", job_id)
    estimate = status["costEstimate"]
    assert estimate == get_job(cli, job_id)["costEstimate"]
    assert estimate["monthly"]["total"] == 74.57 and estimate["complete"]  # test_cost.py's hand calculation

    # The estimate describes what exists: instances, their disks, the NAT gateway and its address.
    made = job_resources(sandbox, job_id)
    lines = {line["kind"]: line for line in estimate["lines"]}
    assert [i["InstanceType"] for i in made["instances"]] == ["t3.small"] * int(lines["instance"]["count"])
    # moto always adds a default 8 GB root of its own at /dev/sda1 beside the template's mapping for the
    # image's root device (on AWS that mapping is the root disk): count the disks on the image's root device.
    root = job["config"]["infra"]["Cloud"]["Images"]["web"]["RootDeviceName"]
    disks = [v["Size"] for v in made["volumes"] if any(a["Device"] == root for a in v["Attachments"])]
    assert sum(disks) == lines["disk"]["count"] == 2 * 20
    assert (len(made["nat"]), len(made["eips"])) == (lines["nat"]["count"], lines["publicIp"]["count"])

    scaled = cli.json("scale", job_id, "web", "--desired", "1", "--yes")
    assert scaled["status"] == "succeeded", scaled["error"]
    assert len(job_resources(sandbox, job_id)["instances"]) == 1
    ledger = scaled["config"]["costLedger"]["entries"]
    assert [e["event"] for e in ledger] == ["provisioned", "scale"]
    first_step = min(s["startedAt"] for s in status["steps"] if s["name"] != "stepValidate")
    assert datetime.fromisoformat(ledger[0]["at"]) == datetime.fromisoformat(first_step)

    later = (datetime.fromisoformat(ledger[1]["at"]) + timedelta(hours=10)).isoformat()
    (env,) = [e for e in cli.json("envs", "--as-of", later)["environments"] if e["job"] == job_id]
    so_far = env["costSoFar"]
    by_hand = (2 * VM_HOUR + NETWORK_HOUR) * hours(ledger[0]["at"], ledger[1]["at"]) + (VM_HOUR + NETWORK_HOUR) * 10
    assert so_far["amount"] > 0 and so_far["amount"] == pytest.approx(by_hand, abs=0.01)
    assert (so_far["since"], so_far["currency"], so_far["complete"]) == (ledger[0]["at"], "USD", True)
    assert any("first resource-creating step" in a for a in so_far["assumptions"])
    assert env["costEstimate"]["total"] == cli.json("status", job_id)["costEstimate"]["monthly"]["total"] < 74.57
    assert env["stoppedVms"] == 0

    gone = cli.json("destroy", "--job", job_id, "--sandbox", "--yes")
    assert gone["status"] == "deleted" and not any(job_resources(sandbox, job_id).values())
    assert gone["config"]["costLedger"]["entries"][-1]["ended"] is True
