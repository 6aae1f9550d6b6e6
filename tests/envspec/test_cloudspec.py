"""Each cloud's CloudSpec: options under the cloud's key, old places still read (with a warning), a key of
another cloud refused at its field, recorded old-shape specs, and a toy cloud added with `register`."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Literal

import pytest
from pydantic import Field
from tests.helpers import Cli

from vmplane.clouds import specs
from vmplane.clouds.gcp.spec import GcpExec, GcpLoadBalancer
from vmplane.clouds.proxmox.spec import pool_options
from vmplane.envspec import percloud
from vmplane.envspec.base import ExecMode
from vmplane.envspec.cloudspec import CloudOptions, CloudSpec, IdPattern, ProviderBase, plain_pool_defaults
from vmplane.envspec.impact import Impact, diff
from vmplane.envspec.load import SpecError, SpecIssue, parse_spec_text
from vmplane.envspec.models import EnvSpec, spec_json
from vmplane.jobs.precheck import issues_at

ENVSPEC = Path(__file__).resolve().parents[2] / "src" / "vmplane" / "envspec"
PVE = {"cloud": "proxmox", "endpoint": "https://pve.example:8006", "node": "pve1"}
GCP = {"cloud": "gcp", "project": "shop-prod-1", "region": "us-central1"}
AWS = {"cloud": "aws", "region": "us-east-1"}
LB = {"domain": "a.example.com"}


def text(provider: dict[str, object], pool: dict[str, object], **more: object) -> str:
    """One member per line, so an issue's or a warning's line names the member."""
    members = {"name": "demo", "org": "acme", "provider": provider, "pools": {"web": pool}, **more}
    return "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in members.items()) + "\n}\n"


def issues(doc: str) -> list[SpecIssue]:
    with pytest.raises(SpecError) as exc:
        parse_spec_text(doc, "env.jsonc")
    return exc.value.issues


# -- the new places, and the old ones ------------------------------------------------------------


def test_old_places_load_as_the_new_ones_with_a_positioned_warning_each() -> None:
    old = text(PVE, {"mode": "fixed", "size": 1, "template": 9000, "cores": 4}, exec={"mode": "QemuGuestAgent"})
    new = text(PVE, {"mode": "fixed", "size": 1, "proxmox": {"template": 9000, "cores": 4}})
    was, now = parse_spec_text(old, "old.jsonc"), parse_spec_text(new, "new.jsonc")
    assert spec_json(was)["pools"] == spec_json(now)["pools"]
    assert (pool_options(was.pools["web"]).template, pool_options(was.pools["web"]).cores) == (9000, 4)
    assert percloud.moved_warnings(now) == []
    warned = issues_at(old, percloud.spec_warnings(was))
    assert [(w.path, w.line) for w in warned] == [("pools.web.template", 5), ("pools.web.cores", 5)]
    assert warned[0].message == "moved to pools.web.proxmox.template (this place is still read, for now)"


def test_a_setting_at_both_places_is_read_once_or_refused_when_they_differ() -> None:
    same = {"mode": "fixed", "size": 1, "template": 9000, "proxmox": {"template": 9000}}
    assert pool_options(parse_spec_text(text(PVE, same), "same.jsonc").pools["web"]).template == 9000
    [issue] = issues(text(PVE, {**same, "template": 9001}))
    assert (issue.path, issue.message) == (
        "pools.web.template",
        "also given at pools.web.proxmox.template: keep that one",
    )


@pytest.mark.parametrize(
    ("provider", "section", "old", "new"),
    [
        (GCP, "exec", {"interactive": False}, {"gcp": {"interactive": False}}),
        (GCP, "loadBalancer", {**LB, "dnsZone": "z"}, {**LB, "gcp": {"dnsZone": "z"}}),
        (AWS, "loadBalancer", {**LB, "hostedZoneId": "Z1"}, {**LB, "aws": {"hostedZoneId": "Z1"}}),
    ],
)  # fmt: skip
def test_each_moved_setting_reads_the_same_at_both_places(provider, section, old, new) -> None:
    pool = {"mode": "fixed", "size": 1}
    was = parse_spec_text(text(provider, pool, **{section: old}), "old.jsonc")
    now = parse_spec_text(text(provider, pool, **{section: new}), "new.jsonc")
    assert was == now
    assert len(percloud.moved_warnings(was)) == 1 and percloud.moved_warnings(now) == []


def test_interactive_reads_from_the_gcp_key() -> None:
    pool = {"mode": "fixed", "size": 1}
    assert parse_spec_text(text(GCP, pool), "a.jsonc").exec_interactive is True
    closed = parse_spec_text(text(GCP, pool, exec={"gcp": {"interactive": False}}), "b.jsonc")
    assert closed.exec_interactive is False and closed.exec_.options(GcpExec) == GcpExec(interactive=False)


def test_a_key_of_another_cloud_is_refused_at_its_field() -> None:
    pool = {"mode": "fixed", "size": 1}
    [issue] = issues(text(AWS, pool, exec={"gcp": {"interactive": True}}))
    assert (issue.path, issue.message, issue.line) == ("exec.gcp", "this environment runs on aws", 6)
    # Even an incomplete one: the refusal, not the other cloud's own errors.
    [issue] = issues(text(GCP, {"mode": "fixed", "size": 1, "proxmox": {"cores": 2}}))
    assert (issue.path, issue.message) == ("pools.web.proxmox", "this environment runs on gcp")
    lb = {"domain": "a.example.com", "gcp": {"dnsZone": "z"}}
    assert [(i.path, i.message) for i in issues(text(AWS, pool, loadBalancer=lb))] == [
        ("loadBalancer.gcp", "this environment runs on aws")
    ]


def test_a_proxmox_pool_without_its_options_names_the_template() -> None:
    [issue] = issues(text(PVE, {"mode": "fixed", "size": 1}))
    assert (issue.path, issue.message) == ("pools.web", "missing required field 'template'")


def test_a_recorded_old_shape_spec_still_loads_and_records_the_new_shape() -> None:
    """Job configs in the database were written before the move: model_validate (not the file loader) reads them."""
    recorded = {
        "name": "demo", "org": "acme", "provider": PVE,
        "pools": {"web": {"mode": "fixed", "size": 2, "template": 9000, "cores": 2, "memoryMb": 2048,
                          "image": "9000", "instanceType": "2vcpu-2048mb"}},
        "exec": {"mode": "QemuGuestAgent"},
    }  # fmt: skip
    spec = EnvSpec.model_validate(recorded)
    assert spec_json(spec)["pools"]["web"]["proxmox"] == {"template": 9000, "cores": 2, "memoryMb": 2048}
    assert not {"template", "cores", "memoryMb"} & set(spec_json(spec)["pools"]["web"])
    assert EnvSpec.model_validate(spec_json(spec)) == spec
    gcp = EnvSpec.model_validate(
        {"name": "d", "org": "a", "provider": GCP, "pools": {"web": {"mode": "fixed", "size": 1}},
         "exec": {"interactive": False}, "loadBalancer": {"domain": "a.example.com", "dnsZone": "z"}}
    )  # fmt: skip
    assert gcp.exec_interactive is False
    assert gcp.load_balancer is not None and gcp.load_balancer.options(GcpLoadBalancer) == GcpLoadBalancer(dns_zone="z")


def test_a_recorded_old_shape_document_diffs_as_unchanged_against_the_same_spec_now() -> None:
    """jobs/apply.py compares the recorded document with the file's: an old-shape record is no change."""
    old = {"name": "d", "org": "a", "provider": PVE, "pools": {"web": {"mode": "fixed", "size": 1, "template": 9000}}}
    now = spec_json(EnvSpec.model_validate(old))
    recorded = spec_json(EnvSpec.model_validate(old))
    recorded["pools"]["web"] = {**recorded["pools"]["web"].pop("proxmox"), **recorded["pools"]["web"]}
    assert "template" in recorded["pools"]["web"]  # as written before the move
    assert percloud.current_shape(recorded) == now
    assert diff(percloud.current_shape(recorded), now) == []
    grown = spec_json(EnvSpec.model_validate({**old, "pools": {"web": {"mode": "fixed", "size": 1, "template": 9001}}}))
    changes = {c.path: c.impact for c in diff(percloud.current_shape(recorded), grown)}
    assert changes == {"pools.web.proxmox.template": Impact.vm, "pools.web.image": Impact.vm}  # image: its label


def test_validate_prints_the_moved_warnings_and_lists_them_in_json(tmp_path: Path) -> None:
    file = tmp_path / "env.jsonc"
    file.write_text(text(PVE, {"mode": "fixed", "size": 1, "template": 9000}))
    cli = Cli(home=tmp_path / "h", sandbox_port=1)
    proc = cli.run("validate", "-f", str(file), "--output", "json")
    assert proc.returncode == 0, proc.stderr
    [w] = json.loads(proc.stdout)["warnings"]
    assert (w["path"], w["line"]) == ("pools.web.template", 5)
    assert f"{file}:5:{w['col']}: warning: pools.web.template: moved to pools.web.proxmox.template" in proc.stderr


# -- a toy cloud, registered at run time ---------------------------------------------------------


class ToyProvider(ProviderBase):
    cloud: Literal["toy"] = Field(description="An in-memory cloud.")
    region: str = Field(pattern=r"^toy-[0-9]$")
    shelf: str | None = None


class ToyPool(CloudOptions):
    CLOUD: ClassVar[str] = "toy"


TOY = CloudSpec(
    name="toy",
    label="Toy",
    provider=ToyProvider,
    exec_mode=ExecMode.SSM,
    secret_stores=(),
    network_id=IdPattern(r"toynet-[0-9]+", "a toy network (toynet-N)"),
    subnet_id=None,
    fill_pool=plain_pool_defaults({"instanceType": "toy.small", "image": "toy-os"}),
)


@pytest.fixture
def toy() -> Iterator[CloudSpec]:
    specs.register(TOY)
    try:
        yield TOY
    finally:
        specs.unregister("toy")


def test_a_registered_toy_cloud_validates_with_its_own_defaults_and_errors(toy: CloudSpec) -> None:
    pool = {"mode": "fixed", "size": 1}
    spec = parse_spec_text(text({"cloud": "toy", "region": "toy-1"}, pool), "toy.jsonc")
    assert isinstance(spec.provider, ToyProvider) and spec.provider.region == "toy-1"
    assert (spec.pools["web"].instance_type, spec.pools["web"].image, spec.exec_mode) == ("toy.small", "toy-os", "SSM")
    assert EnvSpec.model_validate(spec_json(spec)) == spec
    # The member's errors sit under provider, as for the shipped clouds; unknown keys suggest the member's own.
    [issue] = issues(text({"cloud": "toy", "region": "eu-1"}, pool))
    assert (issue.path, issue.line) == ("provider.region", 4)
    [issue] = issues(text({"cloud": "toy", "region": "toy-1", "shelv": "a"}, pool))
    assert (issue.path, issue.message) == ("provider.shelv", "unknown field 'shelv'; did you mean 'shelf'?")
    [issue] = issues(text({"cloud": "toy", "region": "toy-1"}, pool, network={"existingNetwork": "vpc-1"}))
    assert (issue.path, issue.message) == ("network.existingNetwork", "must be a toy network (toynet-N) on toy")
    [issue] = issues(text({"cloud": "tyo", "region": "toy-1"}, pool))
    assert issue.path == "provider.cloud" and "'toy', got 'tyo'; did you mean 'toy'?" in issue.message


def test_an_unregistered_cloud_is_unknown() -> None:
    [issue] = issues(text({"cloud": "toy", "region": "toy-1"}, {"mode": "fixed", "size": 1}))
    assert issue.message == "must be one of 'aws', 'gcp', 'azure', 'proxmox', got 'toy'"
    with pytest.raises(ValueError, match="already registered"):
        specs.register(CloudSpec(**{**TOY.__dict__, "name": "aws"}))


# -- envspec names no cloud ----------------------------------------------------------------------


def test_envspec_names_no_cloud() -> None:
    """Outside base.py's enum, no `Cloud.<member>` and no cloud's name as a string in envspec's code."""
    names = {"aws", "gcp", "azure", "proxmox"}
    found = []
    for path in sorted(ENVSPEC.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Cloud":
                found.append(f"{path.name}:{node.lineno}: Cloud.{node.attr}")
            if isinstance(node, ast.Constant) and node.value in names and path.name != "base.py":
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert found == []


@pytest.mark.parametrize("example", sorted(p.name for p in (Path(__file__).parents[2] / "examples").glob("*.jsonc")))
def test_a_dump_that_keeps_unset_fields_validates_again(example: str) -> None:
    """Recorded configs are dumped with their unset fields (`"gcp": null`, and before the move `"template":
    null`): a null under another cloud's key, or at an old place, is nothing given, not a refusal (the cost
    ledger's re-read of a stopped pool failed on this)."""
    from vmplane.envspec.load import load_spec

    spec = load_spec(Path(__file__).parents[2] / "examples" / example)
    doc = spec.model_dump(mode="json", by_alias=True)
    assert EnvSpec.model_validate(doc) == spec
    old = json.loads(json.dumps(doc))
    for pool in old["pools"].values():
        pool.update({k: None for k in ("template", "cores", "memoryMb") if k not in pool})
    old["exec"].setdefault("interactive", None)
    assert EnvSpec.model_validate(old) == spec
