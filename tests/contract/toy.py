"""The toy cloud (tests/toycloud, a plugin) in the driver contract: its "emulator" is the JSON file that is
the cloud, one per run (so every run has the same environment name and the snapshots compare as they are),
with the log of the writes made to it (`<file>.writes`). Drift is made by editing the file by hand."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.contract.adapter import Adapter, RepairEnv
from tests.helpers import Cli
from tests.toycloud.cloud import writes_log
from tests.toycloud.test_toy_cli import plugin_env, toy_file

REPAIR_STEP = "stepRepairDrift"


@dataclass
class ToyCli(Cli):
    """The CLI with the toy plugin configured (VMPLANE_CLOUD_PLUGINS and the path it imports from)."""

    @property
    def env(self) -> dict[str, str]:
        return {**super().env, **plugin_env()}


def rows(state: Path) -> list[dict[str, Any]]:
    found = json.loads(state.read_text())["resources"].values() if state.exists() else []
    return sorted(found, key=lambda r: (r["kind"], r["name"]))


def edit(state: Path, change: Any) -> None:
    cloud = json.loads(state.read_text())
    change(cloud["resources"])
    state.write_text(json.dumps(cloud))


class ToyAdapter(Adapter):
    name = "toy"
    flags = ()  # the file is the cloud itself, not a sandbox target
    APPLY_OPS = ["toy.CreateFirewall", "toy.CreateNetwork", "toy.CreateTemplate", "toy.CreateVm"]
    LATER_CALLS = ["toy.CreateVm#2"]  # the second VM's create
    DESTROY_OPS = ["toy.Delete", "toy.Delete#3", "toy.Delete#4", "toy.Delete#5"]
    REPAIR_OPS = {"all": ["toy.Delete", "toy.Update"]}

    def case(self, op: str) -> str | None:
        return None if op.startswith(("toy.List", "toy.Get")) else op

    def sweep_emulator(self, request: pytest.FixtureRequest, tmp: Path) -> AbstractContextManager[Any]:
        return nullcontext(tmp / "cloud.json")

    def cli(self, tmp: Path, emu: Any) -> Cli:
        return ToyCli(home=tmp / "home", sandbox_port=1)

    def sweep_name(self, unique: str) -> str:
        return "toys"  # a file of its own per run

    def write_env(self, tmp: Path, name: str, emu: Any) -> Path:
        return toy_file(tmp, emu, name=name)

    def snapshot(self, emu: Any, env_file: Path, job_id: str) -> dict[str, Any]:
        """The whole file (its only tenant is this run's job), the job id replaced."""
        return {"resources": json.loads(json.dumps(rows(emu)).replace(job_id, "JOB"))}

    def check_reference(self, snap: dict[str, Any]) -> None:
        assert [r["kind"] for r in snap["resources"]] == ["firewall", "network", "template", "vm", "vm"], snap

    def writes_seen(self, emu: Any) -> list[str] | None:
        log = writes_log(emu)
        return log.read_text().splitlines() if log.exists() else []

    # ---- the repair sweep ----

    def repair_emulator(self, request: pytest.FixtureRequest, tmp: Path) -> AbstractContextManager[Any]:
        return nullcontext(tmp / "cloud.json")

    def repair_env(self, scenario: str, emu: Any, tmp: Path, name: str) -> RepairEnv:
        cli = self.cli(tmp, emu)
        env_file = toy_file(tmp, emu, name=name)
        job = cli.json("apply", "-f", str(env_file), "--yes")
        assert job["status"] == "succeeded", job["error"]
        env = RepairEnv(cli, env_file, name, str(job["id"]), emu)
        env.baseline = self._shape(env)
        return env

    def make_drift(self, scenario: str, env: RepairEnv) -> None:
        """A VM deleted, another stopped, a port opened on the firewall, a VM with the job's tags added."""
        base = f"acme-{env.name}"

        def change(resources: dict[str, Any]) -> None:
            named = {r["name"]: r for r in resources.values()}
            vm0, vm1, fw = named[f"{base}-web-0"], named[f"{base}-web-1"], named[f"{base}-fw"]
            del resources[vm0["id"]]
            vm1["attrs"]["power"] = "stopped"
            fw["attrs"]["ingressPorts"] = [22, *fw["attrs"]["ingressPorts"]]
            resources["toy-vm-stray"] = {**vm1, "id": "toy-vm-stray", "name": "stray"}

        edit(env.emu, change)

    def check_repaired(self, scenario: str, env: RepairEnv) -> None:
        got = self._shape(env)
        assert got == env.baseline, f"{got} != {env.baseline}"

    def _shape(self, env: RepairEnv) -> list[tuple[str, str, str]]:
        """The job's resources by kind, name and attributes (a VM made again has a new id): nothing twice."""
        return [
            (r["kind"], r["name"], json.dumps(r["attrs"], sort_keys=True))
            for r in rows(env.emu)
            if env.job_id in r["tags"].values()
        ]

    def repair_ops(self, job: dict[str, Any]) -> list[str]:
        step = next(s for s in job["config"]["operation"]["steps"] if s["name"] == REPAIR_STEP)
        return sorted(op for op in step["apiCalls"] if self.case(op))
