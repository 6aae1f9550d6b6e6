"""A size change reads as what it does, on the sandbox through the real CLI: examples/fixed.jsonc applied,
`scale --desired 3` warns that the file still says 2, `plan` of the file shows the VM that goes as a `-`
line counted in "to destroy" (exit 0), and the apply removes exactly that VM; a bigger size shows `+` lines."""

from __future__ import annotations

import json

import pytest
from tests.helpers import Cli, Sandbox, write_env

NAME = "itest-sizes"


def _live(sandbox: Sandbox, job_id: str) -> dict[str, str]:
    """The job's running instances, Name tag -> instance id, read from the sandbox with boto3."""
    ec2 = sandbox.client("ec2")
    filters = [
        {"Name": "tag:zop:jobId", "Values": [job_id]},
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
    ]
    out = {}
    for r in ec2.describe_instances(Filters=filters)["Reservations"]:
        for i in r["Instances"]:
            out[next(t["Value"] for t in i["Tags"] if t["Key"] == "Name")] = i["InstanceId"]
    return out


@pytest.mark.sandbox
def test_scale_warns_plan_shows_the_vm_that_goes_and_apply_removes_it(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, NAME)  # examples/fixed.jsonc: a Fixed pool of size 2
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    try:
        assert sorted(_live(sandbox, job["id"])) == [f"{NAME}-web-0", f"{NAME}-web-1"]

        # The scale's own plan shows the VM it adds; the file still says 2, which stderr and the JSON say.
        proc = cli.run("scale", job["id"], "web", "--desired", "3", "--yes", "--output", "json")
        assert proc.returncode == 0, proc.stderr
        assert "warning:" in proc.stderr
        assert "says pools.web.size 2: set pools.web.size to 3 in the file" in proc.stderr
        assert "`vmplane apply` of the unchanged file undoes it" in proc.stderr
        assert f"+ aws_instance.{NAME}-web-2" in proc.stderr  # the plan goes to stderr with -o json
        scaled = json.loads(proc.stdout)
        assert scaled["status"] == "succeeded"
        assert scaled["fileDrift"] == [{"path": "pools.web.size", "file": 2, "scaled": 3}]
        live = _live(sandbox, job["id"])
        assert sorted(live) == [f"{NAME}-web-0", f"{NAME}-web-1", f"{NAME}-web-2"]
        gone_id = live[f"{NAME}-web-2"]

        # plan of the unchanged file: the size change, and the VM it destroys by name and id.
        text = cli.run("plan", "-f", str(env_file), "--sandbox")
        assert text.returncode == 0, text.stderr
        assert "~ pools.web.size: 3 -> 2" in text.stdout
        assert f"- aws_instance.{NAME}-web-2  {gone_id}: terminated" in text.stdout
        assert "Plan: 0 to add, 1 to change, 1 to destroy." in text.stdout
        assert "`vmplane scale`" in text.stdout and "sets them back (pools.web.size 3 -> 2)" in text.stdout
        plan = cli.json("plan", "-f", str(env_file), "--sandbox")
        assert plan["decision"] == "update"
        assert plan["counts"] == {"add": 0, "change": 1, "destroy": 1}
        assert [(r["action"], r["type"], r["name"]) for r in plan["resources"]] == [
            ("-", "aws_instance", f"{NAME}-web-2")
        ]
        assert plan["resources"][0]["detail"].startswith(gone_id)
        assert plan["summary"].endswith("Plan: 0 to add, 1 to change, 1 to destroy.")

        # The apply does what the plan said: that VM, and only it, goes.
        applied = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
        assert applied["status"] == "succeeded", applied["error"]
        live = _live(sandbox, job["id"])
        assert sorted(live) == [f"{NAME}-web-0", f"{NAME}-web-1"] and gone_id not in live.values()

        # A bigger size in the file: `+` lines for the VMs it launches, counted in "to add".
        spec = json.loads(env_file.read_text())
        spec["pools"]["web"]["size"] = 4
        bigger = tmp_path / "bigger.jsonc"
        bigger.write_text(json.dumps(spec))
        grow = cli.json("plan", "-f", str(bigger), "--sandbox")
        assert [(r["action"], r["name"]) for r in grow["resources"]] == [("+", f"{NAME}-web-2"), ("+", f"{NAME}-web-3")]
        assert grow["counts"] == {"add": 2, "change": 1, "destroy": 0}
        assert "Plan: 2 to add, 1 to change, 0 to destroy." in cli.run("plan", "-f", str(bigger), "--sandbox").stdout
        # Scaling to what the file says warns about nothing.
        back = cli.run("scale", job["id"], "web", "--desired", "2", "--yes")
        assert back.returncode == 0 and "warning:" not in back.stderr
        # -f compares with that file itself (here one that says 4), not with what was last applied.
        against = cli.run("scale", job["id"], "web", "--desired", "2", "-f", str(bigger), "--yes")
        assert against.returncode == 0, against.stderr
        assert f"{bigger} says pools.web.size 4: set pools.web.size to 2 in the file" in against.stderr
    finally:
        assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes")["status"] == "deleted"


@pytest.mark.sandbox
def test_an_asg_below_its_instances_counts_those_the_cloud_terminates(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    """examples/web.jsonc (an ASG, desired 2): after `scale --desired 4` the file's plan has two `-` lines for
    the group, listing the four candidates (the group's termination policy picks, not vmplane)."""
    name = "itest-sizes-asg"
    env_file = write_env(tmp_path, name, example="web.jsonc")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    try:
        group = job["config"]["infra"]["ScalingGroupID"]["web"]
        proc = cli.run("scale", job["id"], "web", "--desired", "4", "--yes", "--output", "json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["fileDrift"] == [{"path": "pools.web.desired", "file": 2, "scaled": 4}]
        assert "set pools.web.desired to 4 in the file" in proc.stderr
        asg = sandbox.client("autoscaling")
        held = [
            i["InstanceId"]
            for i in asg.describe_auto_scaling_groups(AutoScalingGroupNames=[group])["AutoScalingGroups"][0][
                "Instances"
            ]
        ]
        assert len(held) == 4

        plan = cli.json("plan", "-f", str(env_file), "--sandbox")
        assert plan["counts"] == {"add": 0, "change": 1, "destroy": 2}
        assert [(r["action"], r["type"], r["name"]) for r in plan["resources"]] == [
            ("-", "aws_instance", f"{group}[-1]"),
            ("-", "aws_instance", f"{group}[-2]"),
        ]
        detail = plan["resources"][0]["detail"]
        assert all(i in detail for i in held) and "the group's termination policy picks which" in detail

        assert cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")["status"] == "succeeded"
        left = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[group])["AutoScalingGroups"][0]["Instances"]
        assert len(left) == 2 and {i["InstanceId"] for i in left} <= set(held)
    finally:
        assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes")["status"] == "deleted"
