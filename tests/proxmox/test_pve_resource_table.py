"""One table for Proxmox VE (`clouds/proxmox/resources.py`), checked against what it is derived from and
what it must describe, for every Proxmox example: the types of the plan's "+" lines are the table's
direct types; what fakepve holds after the apply, read through `TABLE.observe`, is the plan's resources
address for address; and there is no generated stack (the table says so: no kind is `in_stack`, and
`tf generate` refuses Proxmox). Each disagreement is in a commented allow-list below."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers import EXAMPLES
from tests.proxmox.conftest import pve_for
from tests.proxmox.drift_kit import drift_cluster
from tests.proxmox.fakecluster import Serving, token_env
from tests.proxmox.guest import GuestPlayer
from tests.proxmox.pve_cli import pve_cli, write_pve_env

from vmplane.clouds.base import Action, Context, Tagger
from vmplane.clouds.proxmox import plan as pve_plan
from vmplane.clouds.proxmox.resources import TABLE, Reads
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import Cloud
from vmplane.jobs.listings import find_job
from vmplane.settings import Settings
from vmplane.tf.generate import GenerateError, generate

EXAMPLE_FILES = sorted(p.name for p in EXAMPLES.glob("*.jsonc") if load_spec(p).provider.cloud is Cloud.proxmox)
# Planned but never observed: PUT /cluster/sdn applies the pending SDN config; it is an action, no object.
PLANNED_NOT_HELD = {"proxmox_virtual_environment_sdn_applier"}
# A planned ISO is named `vmplane-<vmid>-cidata.iso`: VMIDs come from cluster/nextid at clone time, so
# the plan cannot know them. ISOs are compared by count.
PLACEHOLDER_NAMES = {"proxmox_virtual_environment_file"}


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[Serving, GuestPlayer]]:
    with drift_cluster(tmp_path / "pki") as served:
        yield served


def test_proxmox_has_examples_and_no_generated_stack() -> None:
    assert EXAMPLE_FILES == ["proxmox.jsonc"]
    assert TABLE.stack_types() == set() and all(k.note for k in TABLE.kinds)
    with pytest.raises(GenerateError, match="not proxmox"):
        generate(load_spec(EXAMPLES / "proxmox.jsonc"))


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLE_FILES)
def test_plan_cluster_and_table_agree(
    fake: tuple[Serving, GuestPlayer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example: str
) -> None:
    serving, _ = fake
    cli = pve_cli(tmp_path)
    env_file = write_pve_env(tmp_path, serving, "pvr", example=example)
    plan = cli.json("plan", "-f", str(env_file))
    planned_types = {r["type"] for r in plan["resources"] if r["action"] == "+"}
    assert planned_types == TABLE.direct_types(), planned_types ^ TABLE.direct_types()
    job = cli.json("apply", "-f", str(env_file), "--yes", timeout=300)
    assert job["status"] == "succeeded", job["error"]

    for key, value in token_env().items():
        monkeypatch.setenv(key, value)
    view = find_job(Settings(home=cli.home), "pvr")
    ctx = Context(view.id, view.spec, view.infra, Tagger.for_spec(view.spec, view.id))
    observed = TABLE.observe(Reads(pve_for(serving)), ctx)
    held = Counter(TABLE.kind(o.kind).address(str(o.name)) for o in observed)
    assert set(held.values()) == {1}, held  # one object per address
    # The plan of the record the apply left: the names the steps gave.
    recorded = [r for r in pve_plan.provision_resources(view.spec, view.infra) if r.action is Action.create]
    named = {f"{r.type}.{r.name}" for r in recorded if r.type not in PLANNED_NOT_HELD | PLACEHOLDER_NAMES}
    by_name = {a for a in held if a.split(".", 1)[0] not in PLACEHOLDER_NAMES}
    assert by_name == named, by_name ^ named
    for type_ in PLACEHOLDER_NAMES:
        planned = sum(1 for r in recorded if r.type == type_)
        got = sum(n for a, n in held.items() if a.split(".", 1)[0] == type_)
        assert planned == got == len(view.infra.VMs) > 0, (planned, got)
    # Every observed kind is declared, with the type the plan uses; nothing observed is someone else's.
    assert {TABLE.tf_type(o.kind) for o in observed} == TABLE.direct_types() - PLANNED_NOT_HELD
    assert {o.kind for o in observed} <= set(TABLE.observed_kinds())
