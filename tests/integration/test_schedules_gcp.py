"""Issue 11's schedules and stop/start on the GCP sandbox: one environment with a scheduled Fixed pool (an
instance schedule resource policy its VMs follow) and a scheduled MIG pool (the autoscaler's scaling
schedule), applied with the real CLI and read back with google-cloud-compute; a schedule change moves the
VMs to a new policy and patches the autoscaler; stop/start run through the runner's steps (in this
process: the `vmplane stop|start` commands are the lead's) and show as TERMINATED/RUNNING VMs and a MIG
at size 0 and back, and the VM step of an apply keeps a stopped pool stopped and records a VM its schedule
stopped; destroy leaves nothing. The sandbox fires no schedule: what is tested is what Google
is asked to run. stepValidate's check of Google's service agent runs in-process against the sandbox.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.gcp_inventory import Gcp, job_resources

from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.gcp import preflight
from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig

BERLIN = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "19:00"}
NEW_YORK = {"timezone": "America/New_York", "days": "Mon-Fri", "start": "07:30", "stop": "18:00"}
LATER = {"timezone": "Europe/Berlin", "days": "Mon-Sat", "start": "09:00", "stop": "20:30"}


def pools(web: dict[str, str], api: dict[str, str]) -> dict[str, Any]:
    return {
        "web": {"mode": "fixed", "size": 2, "schedule": web},
        "api": {"mode": "asg", "min": 1, "max": 3, "desired": 2, "targetCpuPercent": 60, "schedule": api},
    }


def grant_agent(gcp: Gcp) -> None:
    """What the README asks of a user once per project: Google's agent may start and stop VMs."""
    crm = gcp.api("cloudresourcemanager", "v1").projects()
    number = crm.get(projectId=gcp.project).execute()["projectNumber"]
    agent = f"serviceAccount:service-{number}@compute-system.iam.gserviceaccount.com"
    policy = crm.getIamPolicy(resource=gcp.project, body={}).execute()
    if not any(agent in b["members"] for b in policy["bindings"] if b["role"] == "roles/compute.instanceAdmin.v1"):
        policy["bindings"].append({"role": "roles/compute.instanceAdmin.v1", "members": [agent]})
        crm.setIamPolicy(resource=gcp.project, body={"policy": policy}).execute()


def in_process(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process reads the CLI's VMPLANE_HOME and sandbox ports (settings are cached: cleared)."""
    from vmplane.settings import get_settings

    for key, value in cli.env.items():
        if key.startswith("VMPLANE_"):
            monkeypatch.setenv(key, value)
    get_settings.cache_clear()


def run_operation(job_id: str, kind: str, step: str, params: dict[str, str]) -> None:
    """Record the operation and run its step as the workflow would (runner.start_job/run_step/finish_job)."""
    from vmplane.jobs import service
    from vmplane.pipeline import runner
    from vmplane.settings import get_settings
    from vmplane.store.db import transaction
    from vmplane.store.job_records import Phase

    with transaction(get_settings().db_url) as s:
        service.begin_operation(s, job_id, kind, params, [step])
    runner.start_job(job_id, Phase.operation)
    runner.run_step(job_id, step, Phase.operation)
    runner.finish_job(job_id, Phase.operation, None)


def infra_of(job_id: str) -> dict[str, Any]:
    from vmplane.settings import get_settings
    from vmplane.store import job_rows
    from vmplane.store.db import transaction

    with transaction(get_settings().db_url) as s:
        return job_rows.view(job_rows.get_row(s, job_id)).infra.model_dump(mode="json")


def policy_of(res: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    (policy,) = res["resource_policies"]
    return policy


def fixed_vms(res: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [v for v in res["instances"] if v["name"].startswith("gsched-web-")]


@pytest.mark.sandbox
@pytest.mark.slow
def test_scheduled_pools_apply_change_stop_start_destroy(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = Cli(home=tmp_path / "home", sandbox_port=sandbox.port, gcp_port=sandbox.gcp_port)
    gcp = Gcp(sandbox.gcp_endpoint)
    grant_agent(gcp)
    env_file = write_env(tmp_path, "gsched", example="gcp-fixed.jsonc", pools=pools(BERLIN, NEW_YORK))
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=300)
    assert job["status"] == "succeeded", job["error"]
    job_id = job["id"]

    res = job_resources(gcp, job_id)
    policy = policy_of(res)
    assert policy["instanceSchedulePolicy"] == {
        "timeZone": "Europe/Berlin",
        "vmStartSchedule": {"schedule": "0 8 * * 1,2,3,4,5"},
        "vmStopSchedule": {"schedule": "0 19 * * 1,2,3,4,5"},
    }
    assert sorted(v["name"] for v in fixed_vms(res)) == ["gsched-web-0", "gsched-web-1"]
    assert all(v["resourcePolicies"] == [policy["selfLink"]] for v in fixed_vms(res))
    assert not any(v.get("resourcePolicies") for v in res["instances"] if v not in fixed_vms(res))  # MIG VMs
    (autoscaler,) = res["autoscalers"]
    scaling = autoscaler["autoscalingPolicy"]
    assert scaling.get("minNumReplicas", 0) == 0 and scaling["maxNumReplicas"] == 3
    assert scaling["scalingSchedules"] == {
        "vmplane-running-hours": {
            "schedule": "30 7 * * 1,2,3,4,5",
            "durationSec": 37800,
            "minRequiredReplicas": 1,
            "timeZone": "America/New_York",
            "description": "vmplane: Mon-Fri 07:30-18:00 (America/New_York)",
        }
    }

    # A changed schedule: a new policy under a new name, the VMs moved to it, the old one gone; the
    # autoscaler's schedule patched in place.
    changed = write_env(tmp_path, "gsched", example="gcp-fixed.jsonc", pools=pools(LATER, LATER))
    updated = cli.json("apply", "-f", str(changed), "--sandbox", "--yes", timeout=300)
    assert updated["status"] == "succeeded", updated["error"]
    res = job_resources(gcp, job_id)
    new = policy_of(res)
    assert new["name"] != policy["name"]
    assert new["instanceSchedulePolicy"]["vmStopSchedule"] == {"schedule": "30 20 * * 1,2,3,4,5,6"}
    assert all(v["resourcePolicies"] == [new["selfLink"]] for v in fixed_vms(res))
    (patched,) = res["autoscalers"]
    assert patched["id"] == autoscaler["id"]
    assert patched["autoscalingPolicy"]["scalingSchedules"]["vmplane-running-hours"]["durationSec"] == 41400

    # The schedule stops web-0 at night (played here with the official client: the sandbox fires no
    # schedule); the VM step then records it stopped, neither recreated nor waited for.
    in_process(cli, monkeypatch)
    instances = gcp.compute("Instances")
    zone = next(v["zone"].rsplit("/", 1)[1] for v in fixed_vms(res) if v["name"] == "gsched-web-0")
    op = instances.stop_unary(project=gcp.project, zone=zone, instance="gsched-web-0")
    gcp.compute("ZoneOperations").wait(project=gcp.project, zone=zone, operation=op.name)
    run_operation(job_id, "update", "stepCreateVMs", {})
    assert {v["Name"]: v["State"] for v in infra_of(job_id)["VMs"] if v["Pool"] == "web"} == {
        "gsched-web-0": "stopped",
        "gsched-web-1": "ready",
    }
    after = {v["name"]: v for v in fixed_vms(job_resources(gcp, job_id))}
    assert after["gsched-web-0"]["status"] == "TERMINATED"
    assert {n: v["id"] for n, v in after.items()} == {v["name"]: v["id"] for v in fixed_vms(res)}

    # stop (every pool): the Fixed VMs TERMINATED and following no schedule, the MIG at 0 with its
    # autoscaler off; an apply's VM step keeps them so; start: RUNNING, the schedule back, MIG at desired.
    run_operation(job_id, "stop", "stepStopPools", {})
    run_operation(job_id, "update", "stepCreateVMs", {})
    res = job_resources(gcp, job_id)
    assert {v["name"]: v["status"] for v in res["instances"]} == dict.fromkeys(after, "TERMINATED")
    assert not any(v.get("resourcePolicies") for v in res["instances"]) and not res["resource_policies"]
    assert res["migs"][0]["targetSize"] == 0 and res["autoscalers"][0]["autoscalingPolicy"]["mode"] == "OFF"
    infra = infra_of(job_id)
    assert {v["Name"]: v["State"] for v in infra["VMs"]} == dict.fromkeys(after, "stopped")
    assert sorted(infra["StoppedPools"]) == ["api", "web"]

    run_operation(job_id, "start", "stepStartPools", {})
    res = job_resources(gcp, job_id)
    assert {v["status"] for v in res["instances"]} == {"RUNNING"} and len(res["instances"]) == 4
    assert res["migs"][0]["targetSize"] == 2 and res["autoscalers"][0]["autoscalingPolicy"]["mode"] == "ON"
    assert all(v["resourcePolicies"] == [policy_of(res)["selfLink"]] for v in fixed_vms(res))
    assert {v["State"] for v in infra_of(job_id)["VMs"]} == {"ready"} and not infra_of(job_id)["StoppedPools"]

    gone = cli.json("destroy", "--job", job_id, "--yes", "--sandbox", timeout=300)
    assert gone["status"] == "deleted", gone["error"]
    assert {k: v for k, v in job_resources(gcp, job_id).items() if v} == {}


@pytest.mark.sandbox
def test_validate_refuses_a_fixed_schedule_google_agent_cannot_run(sandbox: Sandbox) -> None:
    """A fresh project: the agent holds only its default role, which lacks start/stop; nothing is created."""
    project = f"sched-{uuid.uuid4().hex[:10]}"
    doc = {
        "name": "gsched-agent",
        "org": "acme",
        "provider": {"cloud": "gcp", "project": project, "region": "us-central1"},
        "network": {"cidr": "10.60.0.0/16", "zones": 2},
        "pools": {"web": {"mode": "fixed", "size": 1, "schedule": BERLIN}},
    }
    spec = EnvSpec.model_validate(doc)
    gcp = GcpClients(GcpTarget(project=project, region="us-central1", endpoint_url=sandbox.gcp_endpoint))
    ctx = Context(job_id="job-sched-1", spec=spec, infra=InfraConfig(), tagger=Tagger.for_spec(spec, "job-sched-1"))
    with pytest.raises(InvalidRequestError) as info:
        preflight.preflight(gcp, ctx)
    message = str(info.value)
    assert "pools.web.schedule" in message and "compute.instances.start/stop" in message
    assert "roles/compute.serviceAgent" in message and "add-iam-policy-binding" in message
