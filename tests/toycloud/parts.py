"""The toy driver's parts (vmplane.clouds.interfaces): network, pools, exec and inventory. No identity, load
balancer or scheduler: the driver leaves them None and its capabilities say the same.

Each create is found first (by name and the job's tag), so a re-run writes nothing and a run killed after
any call converges; deletes of what is gone are done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.toycloud import naming
from tests.toycloud.cloud import Resource, ToyCloud

from vmplane.clouds.context import Context
from vmplane.clouds.drift import Drift
from vmplane.clouds.errors import ConflictError, NotFoundError
from vmplane.clouds.interfaces import ExecChannel, Inventory, Network, Pools
from vmplane.clouds.records import CommandResult, CommandStatus, Leftover, SessionHint
from vmplane.envspec.models import FixedPool
from vmplane.state import VMRecord, VMState


def job_tag(ctx: Context) -> dict[str, str]:
    return {ctx.tagger.job_key: ctx.tagger.job_id}


def ensure(cloud: ToyCloud, ctx: Context, kind: str, name: str, attrs: dict[str, Any]) -> Resource:
    """The job's `kind` named `name`, created when missing; `attrs` set back when they differ."""
    found = next((r for r in cloud.list(kind, job_tag(ctx)) if r["name"] == name), None)
    if found is None:
        if any(r["name"] == name for r in cloud.list(kind)):
            raise ConflictError(f"a toy {kind} named {name!r} belongs to another job")
        found = cloud.create(kind, name, ctx.tagger.tags(kind, name), attrs)
        ctx.log(f"created toy {kind} {name} ({found['id']})")
    elif any(found["attrs"].get(k) != v for k, v in attrs.items()):
        cloud.update(found["id"], attrs=attrs)
        found = {**found, "attrs": {**found["attrs"], **attrs}}
    return found


def delete_all(cloud: ToyCloud, ctx: Context, kind: str) -> int:
    gone = 0
    for r in cloud.list(kind, job_tag(ctx)):
        gone += cloud.delete(r["id"])
    return gone


def firewall_attrs(ctx: Context) -> dict[str, Any]:
    return {"ingressPorts": sorted(ctx.spec.network.ingress_ports)}


@dataclass
class ToyNetwork(Network):
    cloud: ToyCloud

    def ensure(self, ctx: Context) -> None:
        infra, net = ctx.infra, ctx.spec.network
        if net.existing_network:
            infra.NetworkID, infra.NetworkCreated = net.existing_network, False
        else:
            infra.NetworkID = ensure(self.cloud, ctx, "network", naming.network(ctx.spec), {"cidr": net.cidr})["id"]
            infra.NetworkCreated = True
        ctx.save()
        fw = ensure(self.cloud, ctx, "firewall", naming.firewall(ctx.spec), firewall_attrs(ctx))
        infra.VMSecurityGroupID = fw["id"]
        ctx.save()

    def delete_firewall(self, ctx: Context) -> None:
        delete_all(self.cloud, ctx, "firewall")
        ctx.infra.VMSecurityGroupID = None
        ctx.save()

    def delete(self, ctx: Context) -> None:
        if ctx.infra.NetworkCreated:  # an existing network is never touched
            delete_all(self.cloud, ctx, "network")
        ctx.infra.NetworkID, ctx.infra.NetworkCreated = None, False
        ctx.save()


def template_attrs(ctx: Context, pool_name: str) -> dict[str, Any]:
    pool = ctx.spec.pools[pool_name]
    return {"image": pool.image, "instanceType": pool.instance_type, "vmconfig": ctx.vmconfig.get(pool_name)}


@dataclass
class ToyPools(Pools):
    cloud: ToyCloud

    def ensure_templates(self, ctx: Context) -> None:
        infra = ctx.infra
        for pool_name in ctx.spec.pools:
            name, want = naming.template(ctx.spec, pool_name), template_attrs(ctx, pool_name)
            found = next((r for r in self.cloud.list("template", job_tag(ctx)) if r["name"] == name), None)
            if found is None:
                row = ensure(self.cloud, ctx, "template", name, {**want, "version": 1})
            elif {k: found["attrs"].get(k) for k in want} != want:  # what it renders changed: a new version
                version = int(found["attrs"].get("version", 1)) + 1
                self.cloud.update(found["id"], attrs={**want, "version": version})
                row = {**found, "attrs": {**found["attrs"], **want, "version": version}}
            else:
                row = found
            infra.LaunchTemplateID = {**infra.LaunchTemplateID, pool_name: row["id"]}
            infra.LaunchTemplateVersion = {**infra.LaunchTemplateVersion, pool_name: int(row["attrs"]["version"])}
            ctx.save()

    def ensure_vms(self, ctx: Context) -> None:
        for pool_name, pool in ctx.spec.pools.items():
            if isinstance(pool, FixedPool):
                for index in range(pool.size):
                    self._ensure_vm(ctx, pool_name, index)
                self._shrink(ctx, pool_name, pool.size)
        ctx.log(f"{len(ctx.infra.VMs)} toy VMs ready")

    def _ensure_vm(self, ctx: Context, pool_name: str, index: int) -> None:
        infra, name = ctx.infra, naming.vm(ctx.spec, pool_name, index)
        rec = infra.vm(name)
        if rec is None:
            rec = VMRecord(Name=name, Pool=pool_name, Index=index)
            infra.VMs = [*infra.VMs, rec]
            ctx.save()  # intent first: a crash after the create leaves a record to find it by
        version = infra.LaunchTemplateVersion[pool_name]
        stopped = pool_name in infra.StoppedPools
        found = next((r for r in self.cloud.list("vm", job_tag(ctx)) if r["name"] == name), None)
        if found is None:
            found = ensure(
                self.cloud, ctx, "vm", name, {"version": version, "power": "stopped" if stopped else "running"}
            )
        elif found["attrs"].get("power") != ("stopped" if stopped else "running"):
            self.cloud.update(found["id"], attrs={"power": "stopped" if stopped else "running"})
        rec.ID, rec.AZ, rec.PrivateIP = found["id"], ctx.spec.provider.region, f"10.0.{index // 250}.{index % 250 + 4}"
        rec.LaunchTemplateVersion = int(found["attrs"].get("version", version))
        rec.State = VMState.stopped if stopped else VMState.ready  # the toy's guest "boots" at once
        ctx.save()

    def _shrink(self, ctx: Context, pool_name: str, size: int) -> None:
        for rec in [v for v in ctx.infra.VMs if v.Pool == pool_name and v.Index >= size]:
            if rec.ID:
                self.cloud.delete(rec.ID)
            ctx.infra.VMs = [v for v in ctx.infra.VMs if v.Name != rec.Name]
            ctx.save()

    def delete_vms(self, ctx: Context) -> None:
        gone = delete_all(self.cloud, ctx, "vm")
        for vm in ctx.infra.VMs:
            vm.State = VMState.terminated
        ctx.infra.VMs = []
        ctx.save()
        ctx.log(f"deleted {gone} toy VMs")

    def delete_templates(self, ctx: Context) -> None:
        delete_all(self.cloud, ctx, "template")
        ctx.infra.LaunchTemplateID, ctx.infra.LaunchTemplateVersion = {}, {}
        ctx.save()

    def rotate(self, ctx: Context, pool_name: str) -> list[str]:
        """Outdated VMs replaced: deleted, then made again from the pool's current template version."""
        for rec in [v for v in ctx.infra.outdated_vms() if v.Pool == pool_name]:
            if rec.ID:
                self.cloud.delete(rec.ID)
            rec.ID, rec.LaunchTemplateVersion = None, None
            ctx.save()
            self._ensure_vm(ctx, pool_name, rec.Index)
        return []

    def stop(self, ctx: Context, pool_name: str) -> None:
        self._power(ctx, pool_name, "stopped")
        if pool_name not in ctx.infra.StoppedPools:
            ctx.infra.StoppedPools = [*ctx.infra.StoppedPools, pool_name]
        ctx.save()

    def start(self, ctx: Context, pool_name: str) -> None:
        ctx.infra.StoppedPools = [p for p in ctx.infra.StoppedPools if p != pool_name]
        self._power(ctx, pool_name, "running")
        ctx.save()

    def _power(self, ctx: Context, pool_name: str, power: str) -> None:
        for rec in [v for v in ctx.infra.VMs if v.Pool == pool_name and v.ID]:
            row = self.cloud.get(str(rec.ID))
            if row is not None and row["attrs"].get("power") != power:
                self.cloud.update(row["id"], attrs={"power": power})
            rec.State = VMState.stopped if power == "stopped" else VMState.ready


@dataclass
class ToyExec(ExecChannel):
    cloud: ToyCloud

    def run(
        self, instance_ids: list[str], commands: list[str], timeout: float, comment: str = "vmplane exec"
    ) -> list[CommandResult]:
        """The toy runs nothing: each VM that exists and runs answers success with empty output."""
        out = []
        for vid in instance_ids:
            row = self.cloud.get(vid)
            if row is None:
                raise NotFoundError(f"toy VM {vid} does not exist")
            ok = row["attrs"].get("power") == "running"
            status = CommandStatus.success if ok else CommandStatus.failed
            out.append(CommandResult(vid, status, 0 if ok else 1, "", "" if ok else "the VM is stopped"))
        return out

    def session_hint(self, vm_id: str) -> SessionHint:
        return SessionHint(argv=["echo", f"toy VM {vm_id} has no shell"])


@dataclass
class ToyInventory(Inventory):
    cloud: ToyCloud

    def leftovers(self, ctx: Context) -> list[Leftover]:
        return [Leftover(kind, r["id"]) for kind in naming.TYPES for r in self.cloud.list(kind, job_tag(ctx))]

    def retag(self, ctx: Context) -> None:
        for kind in naming.TYPES:
            for r in self.cloud.list(kind, job_tag(ctx)):
                want = ctx.tagger.tags(kind, r["name"])
                if r["tags"] != want:
                    self.cloud.update(r["id"], tags=want)

    def drift(self, ctx: Context) -> list[Drift]:
        from tests.toycloud import drift

        return drift.drift(self.cloud, ctx)

    def repair_drift(self, ctx: Context) -> None:
        from tests.toycloud import drift

        drift.repair(self.cloud, ctx)
