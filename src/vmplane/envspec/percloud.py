"""What differs per cloud, read from the registered specs: defaults filled in before validation, settings
moved under a cloud's key, and the checks that need the cloud.

Defaults are written into the input (not computed on read) so attributes stay plain `str` and the
recorded spec shows the value used. The checks run after the models validated (they need the whole
spec) and report at the field's own path, e.g. `loadBalancer.certSource`, like any field error.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError
from pydantic_core import InitErrorDetails

from vmplane.envspec.cloudspec import CloudOptions, CloudSpec, has, missing, snake, spec_error
from vmplane.envspec.provider import SPECS, spec_for
from vmplane.envspec.secrets import STORE_NAMES, Secret, plain_secret_warnings

if TYPE_CHECKING:
    from vmplane.envspec.models import EnvSpec

# A section's path in the file, and the keys the raw input may give it under.
_SECTION_KEYS = {"exec": ("exec", "exec_"), "loadBalancer": ("loadBalancer", "load_balancer")}


def option_model(spec: CloudSpec, section: str) -> type[CloudOptions] | None:
    return {"pool": spec.pool_options, "exec": spec.exec_options, "loadBalancer": spec.lb_options}[section]


def option_fields(section: str) -> dict[str, Any]:
    """`create_model` fields for a section: one optional key per cloud that has options there."""
    out: dict[str, Any] = {}
    for spec in SPECS.values():
        if (model := option_model(spec, section)) is not None:
            out[spec.name] = (model | None, Field(default=None, alias=spec.name, description=f"{spec.label} only."))
    return out


@dataclass(frozen=True)
class MovedSetting:
    old: tuple[str, ...]  # where the file wrote it
    new: tuple[str, ...]  # where it lives now
    owner: str  # the cloud whose setting it is

    def warning(self) -> str:
        return f"{'.'.join(self.old)}: moved to {'.'.join(self.new)} (this place is still read, for now)"


# The settings each validated spec read from an old place, for its warnings: kept beside the spec (not in
# it) so a spec read from an old-shape record equals the same spec read from a new one.
_MOVED: dict[int, tuple[MovedSetting, ...]] = {}


@dataclass(frozen=True)
class Prepared:
    data: Any  # the input, ready for the models
    moved: tuple[MovedSetting, ...] = ()
    # Another cloud's options, taken out before validation (so their own errors do not hide the refusal), and
    # settings given at both places with two values.
    foreign: tuple[InitErrorDetails, ...] = ()


def prepare(data: Any) -> Prepared:
    """The raw spec with old settings moved under their cloud's key, other clouds' keys taken out (refused by
    `check`) and the cloud's defaults filled in."""
    if not isinstance(data, dict):
        return Prepared(data)
    data, moved, twice = _move(dict(data))
    if (cloud := spec_for(data.get("provider"))) is None:
        return Prepared(data, moved, twice)
    foreign = (*twice, *_take_foreign(data, cloud, moved))
    if isinstance(pools := data.get("pools"), dict):
        data["pools"] = {name: cloud.fill_pool(p) if isinstance(p, dict) else p for name, p in pools.items()}
    for key in _SECTION_KEYS["loadBalancer"]:
        lb = data.get(key)
        if isinstance(lb, dict) and not has(lb, "certSource") and cloud.cert_source is not None:
            data[key] = {**lb, "certSource": cloud.cert_source}
    return Prepared(data, moved, foreign)


def _raw_sections(data: dict[str, Any]) -> list[tuple[tuple[str, ...], str, dict[str, Any], str]]:
    """(path, section kind, the raw section, the key it sits under in its parent) for every option section."""
    out: list[tuple[tuple[str, ...], str, dict[str, Any], str]] = []
    if isinstance(pools := data.get("pools"), dict):
        out += [(("pools", str(n)), "pool", p, str(n)) for n, p in pools.items() if isinstance(p, dict)]
    for section, keys in _SECTION_KEYS.items():
        out += [((section,), section, data[k], k) for k in keys if isinstance(data.get(k), dict)]
    return out


def _take_foreign(
    data: dict[str, Any], cloud: CloudSpec, moved: tuple[MovedSetting, ...]
) -> tuple[InitErrorDetails, ...]:
    """A key of another cloud is refused at its field; a setting moved there, at the place the file wrote."""
    out: list[InitErrorDetails] = []
    runs = f"this environment runs on {cloud.name}"
    for path, kind, section, key in _raw_sections(data):
        others = [s.name for s in SPECS.values() if s.name != cloud.name and option_model(s, kind) is not None]
        kept = dict(section)
        for owner in (o for o in others if o in section):
            value = kept.pop(owner)
            if value is None:  # a dump that keeps unset fields writes `"gcp": null`: nothing given
                continue
            from_old = [m for m in moved if m.new[:-1] == (*path, owner)]
            for m in from_old:
                given = value.get(m.new[-1]) if isinstance(value, dict) else None
                out.append(spec_error(m.old, given, f"a {owner} setting (now {'.'.join(m.new)}); {runs}"))
            if not from_old:
                out.append(spec_error((*path, owner), value, runs))
        if len(kept) != len(section):
            if kind == "pool":
                data["pools"] = {**data["pools"], key: kept}
            else:
                data[key] = kept
    return tuple(out)


def _move(data: dict[str, Any]) -> tuple[dict[str, Any], tuple[MovedSetting, ...], tuple[InitErrorDetails, ...]]:
    """Old settings moved under their cloud's key; one given at both places with two values is refused."""
    moved: list[MovedSetting] = []
    twice: list[InitErrorDetails] = []

    def move(section: dict[str, Any], path: tuple[str, ...], kind: str) -> dict[str, Any]:
        out = dict(section)
        for spec in SPECS.values():
            for m in (m for m in spec.moved if m.section == kind):
                old = m.key if m.key in out else snake(m.key) if snake(m.key) in out else None
                own = out.get(spec.name) or {}  # `null` (a dump keeping unset fields) is none given
                if old is None or not isinstance(own, dict):
                    continue
                value, new = out.pop(old), (*path, spec.name, m.key)
                if value is None:  # an old record dumped with its unset fields (`"template": null`)
                    continue
                if has(own, m.key) and own.get(m.key, own.get(snake(m.key))) != value:
                    twice.append(spec_error((*path, m.key), value, f"also given at {'.'.join(new)}: keep that one"))
                    continue
                out[spec.name] = {**own, m.key: value}
                moved.append(MovedSetting((*path, m.key), new, spec.name))
        return out

    if isinstance(pools := data.get("pools"), dict):
        data["pools"] = {
            name: move(p, ("pools", str(name)), "pool") if isinstance(p, dict) else p for name, p in pools.items()
        }
    for section, keys in _SECTION_KEYS.items():
        for key in keys:
            if isinstance(value := data.get(key), dict):
                data[key] = move(value, (section,), section)
    return data, tuple(moved), tuple(twice)


def current_shape(doc: dict[str, Any]) -> dict[str, Any]:
    """A recorded spec document with its old-place settings moved under their cloud's key, as the models read
    it: what a job recorded before the move compares equal to the same spec recorded now."""
    return _move(dict(doc))[0]


def remember(spec: EnvSpec, moved: tuple[MovedSetting, ...]) -> None:
    if moved:
        _MOVED[id(spec)] = moved
        weakref.finalize(spec, _MOVED.pop, id(spec), None)


def check(spec: EnvSpec, foreign: tuple[InitErrorDetails, ...] = ()) -> None:
    """Raise a ValidationError listing every setting that does not belong to the spec's cloud."""
    cloud = spec_for(spec.provider)
    if cloud is None:
        return
    errors = [
        *foreign,
        *_exec(spec, cloud),
        *_network(spec, cloud),
        *_pools(spec, cloud),
        *_load_balancer(spec, cloud),
        *_secrets(spec, cloud),
    ]
    for rule in cloud.checks:
        errors.extend(rule(spec))
    if errors:
        raise ValidationError.from_exception_data("EnvSpec", errors)


def _exec(spec: EnvSpec, cloud: CloudSpec) -> list[InitErrorDetails]:
    mode = spec.exec_.mode
    if mode is None or mode is cloud.exec_mode:
        return []
    owner = next((s.name for s in SPECS.values() if s.exec_mode is mode), "another cloud")
    msg = f"{mode.value} is the {owner} exec channel; {cloud.name} uses {cloud.exec_mode.value}"
    return [spec_error(("exec", "mode"), mode.value, msg)]


def _network(spec: EnvSpec, cloud: CloudSpec) -> list[InitErrorDetails]:
    net, name = spec.network, cloud.name
    out: list[InitErrorDetails] = []
    if net.existing_vpc_id is not None and not re.fullmatch(cloud.network_id.pattern, net.existing_vpc_id):
        out.append(
            spec_error(("network", "existingVpcId"), net.existing_vpc_id, f"must be {cloud.network_id.what} on {name}")
        )
    subnet = cloud.subnet_id
    if subnet is None:
        if net.existing_private_subnet_ids:
            msg = f"not used on {name}: VMs attach to existingNetwork directly"
            out.append(spec_error(("network", "existingPrivateSubnetIds"), net.existing_private_subnet_ids, msg))
        return out
    for i, sid in enumerate(net.existing_private_subnet_ids):
        if not re.fullmatch(subnet.pattern, sid):
            out.append(spec_error(("network", "existingPrivateSubnetIds", i), sid, f"must be {subnet.what} on {name}"))
    if net.existing_vpc_id and not net.existing_private_subnet_ids:
        out.append(spec_error(("network",), None, "existingPrivateSubnetIds is required when existingVpcId is set"))
    if net.existing_private_subnet_ids and not net.existing_vpc_id:
        out.append(spec_error(("network",), None, "existingPrivateSubnetIds needs existingVpcId"))
    return out


def _pools(spec: EnvSpec, cloud: CloudSpec) -> list[InitErrorDetails]:
    """A cloud whose pools need options (Proxmox's template) gets them in every pool."""
    if cloud.pool_options is None:
        return []
    return [
        missing(("pools", name, cloud.name), None)
        for name, pool in spec.pools.items()
        if pool.cloud_options(cloud.name) is None
    ]


def _load_balancer(spec: EnvSpec, cloud: CloudSpec) -> list[InitErrorDetails]:
    lb = spec.load_balancer
    if lb is None:
        return []
    if cloud.cert_source is None:
        return [
            spec_error(("loadBalancer",), None, f"{cloud.name} has no managed load balancer; leave loadBalancer out")
        ]
    if lb.cert_source is cloud.cert_source:
        return []
    msg = f"{lb.cert_source.value} is not available on {cloud.name}; use {cloud.cert_source.value}"
    return [spec_error(("loadBalancer", "certSource"), lb.cert_source.value, msg)]


def _secrets(spec: EnvSpec, cloud: CloudSpec) -> list[InitErrorDetails]:
    allowed = cloud.secret_stores
    use = " or ".join(f"{s.value}: ({STORE_NAMES[s]})" for s in allowed) or "no secret store: plain values only"
    out: list[InitErrorDetails] = []
    for kind, values in (("env", spec.runtime.env), ("files", spec.runtime.files)):
        for key, value in values.items():
            if isinstance(value, Secret) and value.ref.store not in allowed:
                msg = f"{value.ref.store.value}: is not a secret store on {cloud.name}; use {use}"
                out.append(spec_error(("runtime", kind, key, "secret"), value.secret, msg))
    return out


def secret_warnings(spec: EnvSpec) -> list[str]:
    """validate's warnings for plain values named like secrets, each pointing at this cloud's store."""
    cloud = spec_for(spec.provider)
    stores = cloud.secret_stores if cloud is not None else ()
    return plain_secret_warnings(spec, stores[0] if stores else None)


def moved_warnings(spec: EnvSpec) -> list[str]:
    """A warning for each setting the file gave at its old place, naming the new one."""
    return [m.warning() for m in _MOVED.get(id(spec), ())]


def spec_warnings(spec: EnvSpec) -> list[str]:
    """Everything `vmplane validate` warns about (positioned by the caller, `path: message`)."""
    return [*moved_warnings(spec), *secret_warnings(spec)]
