"""Schedules in the generated GCP stack: a resource policy per scheduled Fixed pool that its instances
follow, the autoscaler's scaling schedule (min 0 outside), nothing of it without a schedule, a schedule
edit confined to the infra inputs, and the crons the HCL computes equal to envspec/schedule.py's
(evaluated with `terraform console`: locals only, no provider needed)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from vmplane.clouds.gcp.schedule_policy import window_seconds
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec, spec_json
from vmplane.envspec.schedule import Schedule
from vmplane.tf.gcp.schedules import schedule_locals
from vmplane.tf.generate import GenerateError, generate, write
from vmplane.tf.hcl import Attr, Block, Expr, render
from vmplane.tf.stacks import STACKS

CASES = Path(__file__).resolve().parent / "cases"
OFFICE = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "19:00"}
SCHEDULES = [
    OFFICE,
    {"timezone": "Asia/Tokyo", "days": "Fri-Mon,Wed", "start": "22:00", "stop": "06:30"},
    {"timezone": "America/New_York", "days": "Sun", "start": "00:05", "stop": "23:55"},
    {"timezone": "UTC", "days": "Tue,Thu,Sat-Sun", "start": "23:30", "stop": "00:15"},
]


def scheduled(web: dict[str, str] | None = OFFICE, admin: dict[str, str] | None = OFFICE) -> EnvSpec:
    """gcp-web's auto-scaled `web` and Fixed `admin` pools, with these schedules."""
    doc = spec_json(load_spec(CASES / "gcp-web.jsonc"))
    for pool, schedule in (("web", web), ("admin", admin)):
        if schedule is not None:
            doc["pools"][pool]["schedule"] = schedule
    return EnvSpec.model_validate(doc)


def blocks(spec: EnvSpec) -> dict[tuple[str, ...], Block]:
    out = {}
    for items in STACKS[spec.provider.cloud].structure(spec).values():
        for b in items:
            if isinstance(b, Block) and b.type == "resource":
                out[tuple(b.labels)] = b
    return out


def attrs(block: Block) -> dict[str, object]:
    return {i.name: i.value for i in block.body if isinstance(i, Attr)}


def child(block: Block, type_: str, *labels: str) -> Block | None:
    return next((b for b in block.body if isinstance(b, Block) and b.type == type_ and b.labels == list(labels)), None)


def test_without_a_schedule_the_stack_has_none_of_it() -> None:
    spec = scheduled(None, None)
    text = generate(spec)["vmplane.env.main.tf"]
    assert "resource_policy" not in text and "scaling_schedules" not in text and "schedule_cron" not in text
    scaler = blocks(spec)[("google_compute_region_autoscaler", "pool")]
    policy = child(scaler, "autoscaling_policy")
    assert policy is not None and attrs(policy)["min_replicas"] == Expr("each.value.min")


def test_scheduled_pools_get_the_policy_and_the_scaling_schedule() -> None:
    spec = scheduled()
    found = blocks(spec)
    policy = found[("google_compute_resource_policy", "schedule")]
    assert "create_before_destroy" in render([policy])
    instance = found[("google_compute_instance", "vm")]
    assert "google_compute_resource_policy.schedule[each.value.pool].self_link" in str(
        attrs(instance)["resource_policies"]
    )
    auto = child(found[("google_compute_region_autoscaler", "pool")], "autoscaling_policy")
    assert auto is not None and "0" in str(attrs(auto)["min_replicas"])
    dyn = child(auto, "dynamic", "scaling_schedules")
    assert dyn is not None
    content = child(dyn, "content")
    assert content is not None and attrs(content)["min_required_replicas"] == Expr("max(each.value.min, 1)")


@pytest.mark.parametrize("pool", ["web", "admin"])
def test_a_schedule_edit_changes_only_the_infra_inputs(pool: str) -> None:
    later = {**OFFICE, "stop": "20:30", "days": "Mon-Sat"}
    before = generate(scheduled())
    after = generate(scheduled(**{pool: later}))  # type: ignore[arg-type]
    assert {n for n in before if before[n] != after[n]} == {"vmplane.env.inputs.infra.tf"}


def test_what_google_cannot_run_is_refused_naming_the_field() -> None:
    with pytest.raises(GenerateError, match=r"pools\.web\.schedule: .*at least 5"):
        generate(scheduled(web={**OFFICE, "start": "08:00", "stop": "08:02"}))
    doc = spec_json(scheduled())
    doc["pools"]["web"].pop("targetCpuPercent", None)
    generate(EnvSpec.model_validate(doc))  # the stack's autoscaler follows CPU (60 %) anyway


def terraform() -> str:
    found = shutil.which("terraform") or shutil.which("tofu")
    if not found:
        pytest.skip("neither terraform nor tofu is on PATH")
    return found


def test_the_hcl_crons_are_envspec_schedules_crons(tmp_path: Path) -> None:
    exe = terraform()
    doc = spec_json(load_spec(CASES / "gcp-fixed.jsonc"))
    base = doc["pools"]["web"]
    doc["pools"] = {f"p{i}": {**base, "schedule": s} for i, s in enumerate(SCHEDULES)}
    spec = EnvSpec.model_validate(doc)
    files = generate(spec)
    (tmp_path / "inputs.tf").write_text(files["vmplane.env.inputs.infra.tf"])
    (tmp_path / "schedules.tf").write_text(render([schedule_locals()]))
    proc = subprocess.run(
        [exe, "console"],
        cwd=tmp_path,
        input="jsonencode(local.schedule_cron)\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "CHECKPOINT_DISABLE": "1", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    got: dict[str, Any] = json.loads(json.loads(proc.stdout.strip().splitlines()[-1]))
    for i, raw in enumerate(SCHEDULES):
        s = Schedule.model_validate(raw)
        want = {
            "timeZone": s.timezone,
            "start": s.cron("start", "unix"),
            "stop": s.cron("stop", "unix"),
            "durationSec": window_seconds(s),
        }
        assert got[f"p{i}"] == want, raw
    write(files, tmp_path / "stack")
    fmt = subprocess.run([exe, "fmt", "-check", "-diff"], cwd=tmp_path / "stack", capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
