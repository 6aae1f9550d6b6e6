"""What a driver can do, readable with no SDK import (`vmplane validate`), and the check of a spec against it.

Each refusal is built from the capability it lacks and names the field; a cloud says why in its own words
through `pool_mode_refusals`, never by rewriting these messages afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vmplane.bootstrap.cloudinit import check_user_data_size, render_user_data
from vmplane.bootstrap.runtime import render_push_script
from vmplane.envspec.models import CertSource, Cloud, EnvSpec, ExecMode


@dataclass(frozen=True)
class TagRules:
    """How a cloud stores vmplane's tag set: `key_value` (AWS tags, GCP labels) or `tokens` (Proxmox)."""

    style: str  # "key_value" | "tokens"
    key_pattern: str  # what an encoded key (or token) must match
    max_key: int
    max_value: int


@dataclass(frozen=True)
class Capabilities:
    """What a driver can do; stepValidate refuses a spec that asks for more, before anything is created."""

    pool_modes: frozenset[str]  # "fixed", "asg"
    load_balancers: bool
    cert_sources: frozenset[CertSource]
    instance_refresh: bool  # a rolling replacement of a scaling group by the cloud itself
    exec_modes: frozenset[ExecMode]
    exec_payload_bytes: int  # the largest script one exec-channel command can carry
    user_data_bytes: int  # the largest bootstrap (cloud-init user-data) a VM can be given
    tags: TagRules
    schedules: bool = False  # runs a pool's `schedule` on the cloud's own scheduler
    drift: bool = False  # reads its resources back and repairs them (`drift`, `repair_drift`)
    # Why a pool mode this cloud lacks cannot run there, in the cloud's words (mode -> reason and way out);
    # a mode not listed gets the neutral refusal.
    pool_mode_refusals: Mapping[str, str] = field(default_factory=dict)


def capability_problems(spec: EnvSpec, caps: Capabilities, cloud: Cloud) -> list[str]:
    """What `spec` asks of a driver that it cannot do, each naming the field (empty: all supported)."""
    out = []
    for name, pool in spec.pools.items():
        if pool.mode not in caps.pool_modes:
            why = caps.pool_mode_refusals.get(pool.mode, f"{pool.mode!r} pools are not supported on {cloud.value}")
            out.append(f"pools.{name}.mode: {why}")
        if pool.schedule is not None and not caps.schedules:
            out.append(
                f"pools.{name}.schedule: the {cloud.value} driver does not run schedules yet; nothing would stop "
                "the pool (`vmplane cost` prices the schedule)"
            )
    lb = spec.load_balancer
    if lb is not None:
        if not caps.load_balancers:
            out.append(f"loadBalancer: {cloud.value} has no load balancer vmplane can create")
        elif lb.cert_source not in caps.cert_sources:
            out.append(f"loadBalancer.certSource: {lb.cert_source.value} is not available on {cloud.value}")
    if spec.exec_mode not in caps.exec_modes:
        out.append(f"exec.mode: {spec.exec_mode.value} is not an exec channel of {cloud.value}")
    if problem := runtime_script_problem(spec, caps.exec_payload_bytes):
        out.append(problem)
    for name in spec.pools:
        try:
            check_user_data_size(render_user_data(spec, name), caps.user_data_bytes)
        except ValueError as err:
            out.append(f"pools.{name}: {err}")
    return out


def runtime_script_problem(spec: EnvSpec, limit: int) -> str | None:
    """Why the runtime settings cannot go through an exec channel carrying `limit` bytes, or None."""
    size = len(render_push_script(spec).encode())
    if size <= limit:
        return None
    return (
        f"runtime: the settings make a {size // 1024} KB script, more than the exec channel's {limit // 1024} KB; "
        "ship large files in the image or fetch them at boot"
    )
