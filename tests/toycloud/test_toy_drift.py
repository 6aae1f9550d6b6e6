"""The toy driver in-process: what someone changed in the file is drift, found and repaired; a re-run of
every provisioning part writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.toycloud.driver import ToyDriver
from tests.toycloud.test_toy_cli import toy_file

from vmplane.clouds.context import Context, Tagger
from vmplane.envspec.load import load_spec
from vmplane.state import InfraConfig
from vmplane.target import Target


def provisioned(tmp_path: Path) -> tuple[ToyDriver, Context, Path]:
    state = tmp_path / "cloud.json"
    spec = load_spec(toy_file(tmp_path, state))
    driver = ToyDriver(Target.for_spec(spec, None))
    ctx = Context(job_id="job-1", spec=spec, infra=InfraConfig(), tagger=Tagger.for_spec(spec, "job-1"))
    provision(driver, ctx)
    return driver, ctx, state


def provision(driver: ToyDriver, ctx: Context) -> None:
    driver.network.ensure(ctx)
    driver.pools.ensure_templates(ctx)
    driver.pools.ensure_vms(ctx)


def test_a_rerun_writes_nothing(tmp_path: Path) -> None:
    driver, ctx, state = provisioned(tmp_path)
    before = state.read_text()
    provision(driver, ctx)
    driver.inventory.retag(ctx)
    assert state.read_text() == before
    assert driver.inventory.drift(ctx) == []


def test_drift_in_the_file_is_found_and_repaired(tmp_path: Path) -> None:
    driver, ctx, state = provisioned(tmp_path)
    cloud = json.loads(state.read_text())
    rows = cloud["resources"]
    vm0, vm1 = sorted((r for r in rows.values() if r["kind"] == "vm"), key=lambda r: r["name"])
    del rows[vm0["id"]]  # deleted behind vmplane's back
    vm1["attrs"]["power"] = "stopped"  # stopped by hand
    fw = next(r for r in rows.values() if r["kind"] == "firewall")
    fw["attrs"]["ingressPorts"] = [22, 80]  # a port opened by hand
    rows["toy-vm-99"] = {**vm1, "id": "toy-vm-99", "name": "stray"}  # the job's tags, not asked for
    state.write_text(json.dumps(cloud))

    found = {(d.resource, d.change.value) for d in driver.inventory.drift(ctx)}
    assert found == {
        ("toy_vm.acme-toy-env-web-0", "missing"),
        ("toy_vm.acme-toy-env-web-1", "changed"),
        ("toy_firewall.acme-toy-env-fw", "changed"),
        ("toy_vm.stray", "extra"),
    }
    driver.inventory.repair_drift(ctx)
    provision(driver, ctx)  # the steps after the repair make what was missing again
    assert driver.inventory.drift(ctx) == []
    names = sorted(r["name"] for r in json.loads(state.read_text())["resources"].values() if r["kind"] == "vm")
    assert names == ["acme-toy-env-web-0", "acme-toy-env-web-1"]


def test_destroy_leaves_nothing_and_deleting_what_is_gone_is_done(tmp_path: Path) -> None:
    driver, ctx, _ = provisioned(tmp_path)
    for _ in range(2):  # the second time every delete finds its resource gone
        driver.pools.delete_vms(ctx)
        driver.pools.delete_templates(ctx)
        driver.network.delete_firewall(ctx)
        driver.network.delete(ctx)
    assert driver.inventory.leftovers(ctx) == []
