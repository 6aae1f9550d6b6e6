"""Drift on the toy cloud: the file read back against the spec and the record (vmplane.clouds.drift), and
its repair: extras deleted, fields set back, what is missing dropped from the record so the provisioning
steps that follow create it again under its name."""

from __future__ import annotations

from tests.toycloud import naming
from tests.toycloud.cloud import ToyCloud
from tests.toycloud.parts import firewall_attrs, job_tag

from vmplane.clouds.context import Context
from vmplane.clouds.drift import Drift, DriftChange, Expected, Observed, compare


def _address(kind: str, name: str) -> str:
    return f"{naming.TYPES[kind]}.{name}"


def expected(ctx: Context) -> list[Expected]:
    spec, infra, out = ctx.spec, ctx.infra, []
    if infra.NetworkCreated:
        name = naming.network(spec)
        out.append(Expected(_address("network", name), "network", infra.NetworkID, name))
    if infra.VMSecurityGroupID:
        name = naming.firewall(spec)
        out.append(Expected(_address("firewall", name), "firewall", infra.VMSecurityGroupID, name, firewall_attrs(ctx)))
    for vm in infra.VMs:
        power = "stopped" if vm.Pool in infra.StoppedPools else "running"
        out.append(Expected(_address("vm", vm.Name), "vm", vm.ID, vm.Name, {"power": power}))
    return out


def observed(cloud: ToyCloud, ctx: Context) -> list[Observed]:
    return [
        Observed(kind, r["id"], r["name"], r["tags"], r["attrs"])
        for kind in ("network", "firewall", "vm")
        for r in cloud.list(kind, job_tag(ctx))
    ]


def drift(cloud: ToyCloud, ctx: Context) -> list[Drift]:
    return compare(expected(ctx), observed(cloud, ctx), extra_kinds=("firewall", "vm"), address=_address)


def repair(cloud: ToyCloud, ctx: Context) -> None:
    infra = ctx.infra
    for d in drift(cloud, ctx):
        if not d.repairable:
            continue
        if d.change is DriftChange.extra and d.id:
            cloud.delete(d.id)
        elif d.change is DriftChange.changed and d.id:
            cloud.update(d.id, attrs={f.field: f.wanted for f in d.fields if not f.field.startswith("tags.")})
        elif d.change is DriftChange.missing:  # made again by the steps that follow
            if d.kind == "vm":
                infra.VMs = [v for v in infra.VMs if d.id != v.ID]
            elif d.kind == "firewall":
                infra.VMSecurityGroupID = None
            elif d.kind == "network":
                infra.NetworkID = None
        ctx.log(f"repaired: {d.describe()}")
    ctx.save()
