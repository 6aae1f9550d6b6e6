"""Every name the toy cloud gives a resource (the plan, the steps, the teardown and drift call these)."""

from __future__ import annotations

from vmplane.clouds.naming import fit
from vmplane.envspec.models import EnvSpec

LIMIT = 63  # the toy's name limit, a DNS label's


def base(spec: EnvSpec) -> str:
    return f"{spec.org}-{spec.name}"


def network(spec: EnvSpec) -> str:
    return fit(f"{base(spec)}-net", LIMIT)


def firewall(spec: EnvSpec) -> str:
    return fit(f"{base(spec)}-fw", LIMIT)


def template(spec: EnvSpec, pool: str) -> str:
    return fit(f"{base(spec)}-{pool}", LIMIT)


def vm(spec: EnvSpec, pool: str, index: int) -> str:
    return fit(f"{base(spec)}-{pool}-{index}", LIMIT)


# kind -> the plan's (Terraform-like) resource type
TYPES = {"network": "toy_network", "firewall": "toy_firewall", "template": "toy_template", "vm": "toy_vm"}
