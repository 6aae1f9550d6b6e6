"""What applying or destroying a Proxmox environment does, named as the steps name it (pure: no API calls).

Types are the bpg/proxmox Terraform provider's, as the other clouds' plans use their providers' types,
each read from the kind's row in `resources.TABLE`.
A plan has no job id: the names derived from it (pool, SDN ids, firewall group) come from the record
when there is one, else show their pattern (`vz<job>`). VMIDs come from `cluster/nextid` at clone time,
so a planned ISO's name shows `<vmid>`.
"""

from __future__ import annotations

from vmplane.clouds.base import Action, PlannedResource
from vmplane.clouds.proxmox import naming
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.network import subnet_layout
from vmplane.clouds.proxmox.resources import TABLE
from vmplane.clouds.proxmox.spec import pool_options
from vmplane.envspec.models import EnvSpec, FixedPool
from vmplane.state import InfraConfig


def _nodes(spec: EnvSpec, infra: InfraConfig) -> list[str]:
    placement = getattr(spec.provider, "placement", None)
    if placement:
        return list(placement)
    return [n for n in (infra.Region or "").split(",") if n] or ["<node>"]


def provision_resources(spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
    ids = pve_ids(infra)
    out: list[PlannedResource] = []

    def plus(kind: str, name: str, step: str, detail: str = "") -> None:
        out.append(PlannedResource(Action.create, TABLE.tf_type(kind), name, step, detail))

    step, nodes = "stepCreateNetwork", _nodes(spec, infra)
    plus("pool", ids.Pool or f"vmplane-{spec.name}-<job>", step, "the environment's VMs; the tag set in its comment")
    net = spec.network
    if not net.existing_network:
        cidr, gateway, dhcp = subnet_layout(net.cidr)
        zone, vnet = ids.Zone or "vz<job>", ids.VNet or "vn<job>"
        plus("sdn-zone", zone, step, f"IPAM pve, DHCP dnsmasq, nodes {','.join(nodes)}")
        plus("sdn-vnet", vnet, step, f"in zone {zone}")
        plus(
            "sdn-subnet",
            ids.Subnet or f"{zone}-{cidr.replace('/', '-')}",
            step,
            f"{cidr}, gateway {gateway}, SNAT "
            f"through the node, DHCP {dhcp.replace('start-address=', '').replace(',end-address=', '-')}",
        )
        plus("sdn-applier", "cluster/sdn", step, "PUT /cluster/sdn (applies the pending SDN config)")
    sources = ", ".join(ids.SourceCidrs) or (
        "the existing network's range" if net.existing_network else str(subnet_layout(net.cidr)[0])
    )
    ports = ",".join(map(str, net.ingress_ports)) or "none"
    plus(
        "security-group",
        ids.SecurityGroup or "vmplane-<job>",
        step,
        f"tcp/{ports} from {sources} only; nothing on 22",
    )

    step = "stepCreateVMs"
    bridge = infra.NetworkID or net.existing_network or ids.VNet or "vn<job>"
    for pool_name, pool in spec.pools.items():
        if not isinstance(pool, FixedPool):
            continue
        options = pool_options(pool)
        cores, memory = options.cores, options.memory_mb
        for i in range(pool.size):
            name = naming.vm_name(spec, pool_name, i)
            plus(
                "vm",
                name,
                step,
                f"full clone of template {options.template} on {nodes[i % len(nodes)]}, {cores} cores, {memory} MiB, "
                f"{pool.disk_gb} GB, net0 on {bridge} (firewall, inbound DROP but the group), guest agent",
            )
            plus("iso", "vmplane-<vmid>-cidata.iso", step, f"NoCloud cloud-init ISO of {name} (naming.iso_name)")
    return out


def teardown_resources(infra: InfraConfig) -> list[PlannedResource]:
    ids = pve_ids(infra)
    out: list[PlannedResource] = []

    def minus(kind: str, name: str | None, step: str, detail: str = "") -> None:
        if name:
            out.append(PlannedResource(Action.destroy, TABLE.tf_type(kind), name, step, detail))

    step = "stepTerminateVMs"
    for vm in infra.VMs:
        minus("vm", vm.Name, step, f"VMID {vm.ID} on {vm.AZ}: stopped, destroyed with purge" if vm.ID else "")
    for vm_name, volume in sorted(ids.Isos.items()):
        minus("iso", volume, step, f"NoCloud ISO of {vm_name}")
    if ids.SecurityGroupCreated or infra.VMSecurityGroupID:
        minus("security-group", ids.SecurityGroup, "stepDeleteSecurityGroup", "its rules first")
    step = "stepDeleteNetwork"
    if ids.SubnetCreated:
        minus("sdn-subnet", ids.Subnet, step, ids.SubnetCidr or "")
    if ids.VNetCreated:
        minus("sdn-vnet", ids.VNet, step)
    if ids.ZoneCreated:
        minus("sdn-zone", ids.Zone, step)
    if ids.SubnetCreated or ids.VNetCreated or ids.ZoneCreated or ids.SdnPending:
        minus("sdn-applier", "cluster/sdn", step, "PUT /cluster/sdn (applies the deletes)")
    if ids.PoolCreated:
        minus("pool", ids.Pool, step, "once its VMs are gone")
    return out
