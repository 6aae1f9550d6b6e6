"""What a Proxmox file cannot ask for, refused through the real CLI before anything is made on the
cluster: an `asg` pool (Proxmox VE has no cloud autoscaler: the driver's capabilities refuse it in
`validate`, with no cluster or token, and before a job exists), a `loadBalancer` block (no load balancer
either; refused when the file loads, so the cluster is not even asked), a template the cluster does not
have (stepValidate's read-only check, run before the job exists), and a missing API token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.proxmox.fakecluster import TEMPLATE_NAME, TOKEN_SECRET, Serving, serve
from tests.proxmox.pve_cli import mutating, pve_cli, write_pve_env


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serve(tmp_path_factory.mktemp("pve-refusals")) as serving:
        yield serving


@pytest.fixture
def quiet(fake: Serving) -> Serving:
    """The module's fake with its request log emptied: each test sees only its own requests."""
    fake.run(fake.pve.requests.clear)
    return fake


def _apply(tmp_path: Path, env_file: Path, *, token: bool = True) -> tuple[int, str, str]:
    proc = pve_cli(tmp_path, token=token).run("apply", "-f", str(env_file), "--yes", "--output", "json")
    return proc.returncode, proc.stdout, proc.stderr


ASG = {"web": {"mode": "asg", "min": 1, "max": 3, "desired": 2, "template": TEMPLATE_NAME}}


def test_an_asg_pool_exits_2_naming_its_mode_before_any_job_or_request(quiet: Serving, tmp_path: Path) -> None:
    env_file = write_pve_env(tmp_path, quiet, "pvr-asg", pools=ASG)
    code, out, err = _apply(tmp_path, env_file)
    assert code == 2, f"exit {code}\n{out}\n{err}"
    assert "pools.web.mode" in err and "Proxmox VE has no cloud autoscaler" in err, err
    assert "nothing was created" in err
    assert quiet.run(lambda: list(quiet.pve.requests)) == []  # the cluster was not even asked
    listed = pve_cli(tmp_path).run("jobs", "--output", "json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["jobs"] == [], listed.stdout  # no job recorded
    plan = pve_cli(tmp_path).run("plan", "-f", str(env_file))
    assert plan.returncode == 2 and "pools.web.mode" in plan.stderr, plan.stderr
    assert "to add" not in plan.stdout, plan.stdout


def test_validate_refuses_an_asg_pool_at_its_line_with_no_token_or_cluster(quiet: Serving, tmp_path: Path) -> None:
    env_file = write_pve_env(tmp_path, quiet, "pvr-asg-validate", pools=ASG)
    proc = pve_cli(tmp_path, token=False).run("validate", "-f", str(env_file))
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    line = next(n for n, text in enumerate(env_file.read_text().splitlines(), 1) if '"mode": "asg"' in text)
    assert f"{env_file}:{line}:" in proc.stderr and "pools.web.mode: Proxmox VE has no cloud autoscaler" in proc.stderr
    assert "valid (" not in proc.stdout
    assert quiet.run(lambda: list(quiet.pve.requests)) == []  # validate never asks the cluster
    good = pve_cli(tmp_path, token=False).run("validate", "-f", str(write_pve_env(tmp_path, quiet, "pvr-ok")))
    assert good.returncode == 0 and "valid (pvr-ok, 1 pool)" in good.stdout, good.stderr


def test_a_missing_template_is_refused_by_plan_and_apply_before_any_job(quiet: Serving, tmp_path: Path) -> None:
    pools = {"web": {"mode": "fixed", "size": 1, "template": "no-such-template"}}
    env_file = write_pve_env(tmp_path, quiet, "pvr-tpl", pools=pools)
    cli = pve_cli(tmp_path)
    for args in (("plan", "-f", str(env_file)), ("apply", "-f", str(env_file), "--yes")):
        proc = cli.run(*args)
        assert proc.returncode == 2, f"{args[0]}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert "pools.web.proxmox.template: no VM no-such-template in the cluster" in proc.stderr, proc.stderr
        assert "nothing was recorded" in proc.stderr and "to add" not in proc.stdout
    assert json.loads(cli.run("jobs", "--output", "json").stdout)["jobs"] == []
    assert mutating(quiet) == []  # the check only read the cluster


def test_a_load_balancer_is_refused_when_the_file_loads(quiet: Serving, tmp_path: Path) -> None:
    lb = {"domain": "app.example.com"}
    env_file = write_pve_env(tmp_path, quiet, "pvr-lb", loadBalancer=lb)
    code, out, err = _apply(tmp_path, env_file)
    assert code == 2, f"exit {code}\n{out}\n{err}"
    assert "loadBalancer" in err and "proxmox has no managed load balancer" in err, err
    assert quiet.run(lambda: list(quiet.pve.requests)) == []  # refused before any request


def test_a_missing_token_names_the_variable_and_creates_nothing(quiet: Serving, tmp_path: Path) -> None:
    env_file = write_pve_env(tmp_path, quiet, "pvr-token")
    code, out, err = _apply(tmp_path, env_file, token=False)
    assert code != 0, f"exit {code}\n{out}\n{err}"
    said = out + err
    assert "PROXMOX_TOKEN_ID" in said and "PROXMOX_TOKEN_SECRET" in said, said
    assert mutating(quiet) == []
    # The read-only check runs before the job: a cluster vmplane cannot talk to leaves no record.
    assert out.strip() == "", out
    assert json.loads(pve_cli(tmp_path).run("jobs", "--output", "json").stdout)["jobs"] == []
    assert TOKEN_SECRET not in said
    gone = pve_cli(tmp_path).json("destroy", "-f", str(env_file), "--yes")
    assert gone["status"] == "absent", gone
    assert mutating(quiet) == []
