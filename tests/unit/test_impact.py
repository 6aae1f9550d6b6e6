"""envspec/impact.py: every field of the spec has an impact class, and diffs are classified by full path."""

from __future__ import annotations

import types
import typing

from pydantic import BaseModel
from tests.unit.support import variant

from vmplane.clouds.specs import SPECS
from vmplane.envspec.cloudspec import ProviderBase
from vmplane.envspec.impact import Impact, classify, diff
from vmplane.envspec.models import EnvSpec
from vmplane.jobs.service import spec_json


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, ProviderBase):
        return [s.provider for s in SPECS.values()]  # `provider` is validated by the shape its cloud names
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out.extend(_models_in(arg))
    return out


def _paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every path a diff can report, with `*` for user-chosen keys (pool names, tags, files): leaves,
    entries of user-keyed objects, and optional objects (added or removed whole). Objects that are always
    present (defaults included) are never reported themselves, only their leaves."""
    out: list[str] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        annotation = field.annotation
        models = _models_in(annotation)
        if typing.get_origin(annotation) is dict:
            out.append(f"{path}.*")
            for sub in _models_in(typing.get_args(annotation)[1]):
                out.extend(_paths(sub, f"{path}.*."))
            continue
        if not models or types.NoneType in typing.get_args(annotation):
            out.append(path)
        for sub in models:
            out.extend(_paths(sub, f"{path}."))
    return sorted(set(out))


def test_every_field_of_the_spec_has_an_impact_class():
    paths = _paths(EnvSpec)
    # The walk reaches every level: user-keyed maps, optional blocks and their nested objects.
    assert {"pools.*.image", "pools.*.min", "tags.*", "loadBalancer", "loadBalancer.healthCheck.path"} <= set(paths)
    # Every cloud's provider fields and the Proxmox pool fields are reached through the unions.
    assert {"provider.project", "provider.endpoint", "provider.nodes", "pools.*.proxmox.template"} <= set(paths)
    missing = [p for p in paths if classify(p) is None]
    assert missing == [], f"add these to envspec/impact.py RULES: {missing}"


def test_the_class_follows_where_the_value_ends_up():
    assert classify("pools.web.image") is Impact.vm
    assert classify("bootstrap.mode") is Impact.vm  # rendered into user-data
    assert classify("bootstrap.timeoutSeconds") is Impact.cloud  # only how long vmplane waits
    assert classify("network.ingressPorts") is Impact.cloud
    assert classify("runtime.env.LOG_LEVEL") is Impact.runtime
    assert classify("network.cidr") is Impact.identity
    assert classify("provider.region") is Impact.identity
    assert classify("pools.web.mode") is Impact.identity


def test_per_cloud_fields_have_their_class():
    for path in ("provider.project", "provider.endpoint", "provider.node", "provider.verifyTls", "provider.caFile"):
        assert classify(path) is Impact.identity, path
    for path in ("pools.web.proxmox.template", "pools.web.proxmox.cores", "pools.web.proxmox.memoryMb"):
        assert classify(path) is Impact.vm, path
    assert classify("loadBalancer.gcp.dnsZone") is Impact.cloud
    assert classify("loadBalancer.aws.hostedZoneId") is Impact.cloud
    assert classify("exec.gcp.interactive") is Impact.cloud
    assert classify("network.existingNetwork") is Impact.identity


def test_diff_lists_each_changed_leaf_with_its_class(spec):
    edited = variant(
        spec,
        pools={"web": {"image": "debian-12", "size": 3}},
        network={"ingressPorts": [80, 443]},
        runtime={"env": {"LOG_LEVEL": "debug"}},
        tags={"owner": "ops"},
    )
    changes = {c.path: c.impact for c in diff(spec_json(spec), spec_json(edited))}
    assert changes == {
        "pools.web.image": Impact.vm,
        "pools.web.size": Impact.cloud,
        "network.ingressPorts": Impact.cloud,
        "runtime.env.LOG_LEVEL": Impact.runtime,
        "tags.owner": Impact.cloud,
    }


def test_a_pool_or_load_balancer_added_whole_is_one_change(spec):
    edited = variant(spec, pools={"api": {"mode": "fixed", "size": 1}}, loadBalancer={"domain": "a.example.test"})
    changes = diff(spec_json(spec), spec_json(edited))
    assert [(c.path, c.impact) for c in changes] == [("loadBalancer", Impact.cloud), ("pools.api", Impact.cloud)]
    assert changes[1].old is None and changes[1].new["size"] == 1


def test_no_change_no_diff(spec):
    assert diff(spec_json(spec), spec_json(spec)) == []


def test_user_chosen_keys_are_matched_whole_and_shown_in_brackets(spec):
    edited = variant(spec, runtime={"files": {"/etc/app.d/x.conf": "a"}}, tags={"cost.center": "1"})
    changes = {c.path: c.impact for c in diff(spec_json(spec), spec_json(edited))}
    assert changes == {'runtime.files["/etc/app.d/x.conf"]': Impact.runtime, 'tags["cost.center"]': Impact.cloud}
