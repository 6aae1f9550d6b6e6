"""The VMs' network: an SDN simple zone, VNet and subnet with SNAT (egress NATed through the node) and
DHCP (dnsmasq, IPAM `pve`), applied with `PUT /cluster/sdn`; or an existing bridge or VNet, recorded with
`NetworkCreated` False and never touched in teardown.

SDN objects take no tags: their ids derive from the job id (naming.zone_id / vnet_id), intent is recorded
before each create, and an object with our id counts as ours only when the record says we meant to make
it (preflight refuses an unrecorded one). Finds list the collection and match the exact id, never a
single-object GET: a made-up answer (fakepve's) then never passes for ours.

With an existing network, "inside the network" (the firewall group's sources) is its IPv4 range read
from the cluster: the VNet's subnets, or the bridge's address on each node; when the cluster has none
(a bridge the nodes hold no address on), an explicit `network.cidr` says it, else preflight refuses.
"""

from __future__ import annotations

import contextlib
import ipaddress
from functools import partial
from typing import Any

from vmplane.clouds import deletes
from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, InvalidRequestError, NotFoundError
from vmplane.clouds.proxmox import naming
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve
from vmplane.envspec.models import EnvSpec

DHCP_FIRST_HOST = 10  # hosts below this stay out of the DHCP range (the gateway is the first)
BRIDGE_TYPES = ("bridge", "OVSBridge")


def subnet_layout(cidr: str) -> tuple[str, str, str]:
    """`10.40.0.0/16` -> (network, gateway = first host, dnsmasq range `start-address=..,end-address=..`)."""
    net = ipaddress.ip_network(cidr, strict=False)
    if net.version != 4 or net.num_addresses < 4 * DHCP_FIRST_HOST:
        raise InvalidRequestError(f"network.cidr: {cidr} must be an IPv4 range of at least /26 on Proxmox")
    first = net.network_address + DHCP_FIRST_HOST
    last = net.broadcast_address - 1
    return str(net), str(net.network_address + 1), f"start-address={first},end-address={last}"


def subnet_id(zone: str, cidr: str) -> str:
    """PVE's id of a subnet: `<zone>-<network address>-<prefix length>`."""
    net = ipaddress.ip_network(cidr, strict=False)
    return f"{zone}-{net.network_address}-{net.prefixlen}"


def vnet_alias(job_id: str) -> str:
    return f"vmplane {job_id}"[:256]


def listed(pve: Pve, path: str, key: str, wanted: str) -> dict[str, Any] | None:
    """The entry of a collection whose `key` is exactly `wanted`; a collection that is gone is empty."""
    try:
        entries = pve.get(path) or []
    except NotFoundError:
        return None
    return next((e for e in entries if isinstance(e, dict) and e.get(key) == wanted), None)


def _unrecorded(found: dict[str, Any] | None, recorded: str | None, what: str) -> None:
    """An object with our id that the record does not say we meant to make is someone else's."""
    if found is not None and recorded is None:
        raise ConflictError(f"{what} already exists and vmplane did not make it for this job", code="AlreadyExists")


def _create(pve: Pve, path: str, **params: Any) -> None:
    """A create whose object a killed run may already have made (intent was recorded before it)."""
    with contextlib.suppress(ConflictError):
        pve.post(path, **params)


def apply_sdn(pve: Pve, ctx: Context) -> None:
    """`PUT /cluster/sdn`: the pending SDN config goes live on every node (a task, waited for)."""
    upid = pve.put("cluster/sdn")
    if isinstance(upid, str) and upid.startswith("UPID:"):
        pve.wait_task(upid.split(":")[1], upid, what="apply SDN")
    pve_ids(ctx.infra).SdnPending = False
    ctx.save()


# ---- an existing network -------------------------------------------------------------------------


def existing_sources(pve: Pve, spec: EnvSpec, nodes: tuple[str, ...]) -> list[str]:
    """The IPv4 ranges of an existing VNet or bridge (see the module docstring); refuses naming the field."""
    name = str(spec.network.existing_network)
    cidrs: list[str] = []
    if listed(pve, "cluster/sdn/vnets", "vnet", name) is not None:
        try:
            subnets = pve.get(f"cluster/sdn/vnets/{name}/subnets") or []
        except NotFoundError:
            subnets = []
        cidrs = [str(s["cidr"]) for s in subnets if isinstance(s, dict) and s.get("cidr")]
    else:
        for node in nodes:
            iface = next(
                (i for i in pve.get(f"nodes/{node}/network") or [] if i.get("iface") == name),
                None,
            )
            if iface is None or iface.get("type") not in BRIDGE_TYPES:
                raise InvalidRequestError(
                    f"network.existingNetwork: {name} is neither an SDN VNet nor a bridge on node {node}"
                )
            if iface.get("cidr"):
                cidrs.append(str(ipaddress.ip_interface(str(iface["cidr"])).network))
    cidrs = [c for c in cidrs if ipaddress.ip_network(c, strict=False).version == 4]
    if not cidrs and "cidr" in spec.network.model_fields_set:
        cidrs = [str(ipaddress.ip_network(spec.network.cidr, strict=False))]
    if not cidrs:
        raise InvalidRequestError(
            f"network.existingNetwork: {name} has no IPv4 range the cluster knows (no subnet, no address on the "
            "nodes), so vmplane cannot tell which sources are inside it; set network.cidr to the range its VMs "
            "get addresses from (ingressPorts are opened to that range only)"
        )
    return sorted(set(cidrs))


# ---- provisioning --------------------------------------------------------------------------------


def ensure_network(pve: Pve, ctx: Context) -> None:
    spec, infra = ctx.spec, ctx.infra
    ids = pve_ids(infra)
    if spec.network.existing_network:
        ids.SourceCidrs = existing_sources(pve, spec, pve.nodes)
        infra.NetworkID, infra.NetworkCreated, infra.VMSubnetIDs = spec.network.existing_network, False, []
        ctx.save()
        ctx.log(f"existing network {infra.NetworkID} ({', '.join(ids.SourceCidrs)}): used as is, never modified")
        return
    zone, vnet = naming.zone_id(ctx.job_id), naming.vnet_id(ctx.job_id)
    cidr, gateway, dhcp_range = subnet_layout(spec.network.cidr)
    sid = subnet_id(zone, cidr)

    found = listed(pve, "cluster/sdn/zones", "zone", zone)
    _unrecorded(found, ids.Zone, f"SDN zone {zone}")
    if found is None:
        ids.Zone, ids.SdnPending = zone, True
        ctx.save()
        _create(
            pve, "cluster/sdn/zones", zone=zone, type="simple", ipam="pve", dhcp="dnsmasq", nodes=",".join(pve.nodes)
        )
    ids.Zone, ids.ZoneCreated = zone, True
    ctx.save()

    found = listed(pve, "cluster/sdn/vnets", "vnet", vnet)
    _unrecorded(found, ids.VNet, f"SDN VNet {vnet}")
    if found is not None and found.get("zone") != zone:
        raise ConflictError(f"SDN VNet {vnet} exists in zone {found.get('zone')}, not {zone}", code="AlreadyExists")
    if found is None:
        ids.VNet, ids.SdnPending = vnet, True
        ctx.save()
        _create(pve, "cluster/sdn/vnets", vnet=vnet, zone=zone, alias=vnet_alias(ctx.job_id))
    ids.VNet, ids.VNetCreated = vnet, True
    infra.NetworkID, infra.NetworkCreated = vnet, True
    ctx.save()

    if listed(pve, f"cluster/sdn/vnets/{vnet}/subnets", "subnet", sid) is None:
        ids.Subnet, ids.SubnetCidr, ids.Gateway, ids.SdnPending = sid, cidr, gateway, True
        ctx.save()
        _create(
            pve,
            f"cluster/sdn/vnets/{vnet}/subnets",
            subnet=cidr,
            type="subnet",
            gateway=gateway,
            snat=1,
            **{"dhcp-range": [dhcp_range]},
        )
    ids.Subnet, ids.SubnetCidr, ids.Gateway, ids.SubnetCreated = sid, cidr, gateway, True
    infra.VMSubnetIDs, ids.SourceCidrs = [sid], [cidr]
    ctx.save()
    if ids.SdnPending:
        apply_sdn(pve, ctx)
    ctx.log(f"SDN zone {zone}, VNet {vnet}, subnet {cidr} (gateway {gateway}, SNAT, DHCP {dhcp_range})")


# ---- teardown ------------------------------------------------------------------------------------


def delete_network(pve: Pve, ctx: Context, timeout: float = deletes.TEARDOWN_TIMEOUT) -> None:
    """Only what vmplane created, in order (subnet, VNet, zone), then apply; gone is done. A VNet still
    used by a VM's NIC is retried until `timeout` (the VMs go first in teardown)."""
    infra = ctx.infra
    ids = pve_ids(infra)
    if not infra.NetworkCreated and not (ids.ZoneCreated or ids.VNetCreated or ids.SubnetCreated):
        ctx.log(f"network {infra.NetworkID or '-'} is not vmplane's: left as it is")
        return
    steps: list[tuple[str, str, str]] = []  # (flag, path, what)
    if ids.SubnetCreated and ids.VNet and ids.Subnet:
        steps.append(("SubnetCreated", f"cluster/sdn/vnets/{ids.VNet}/subnets/{ids.Subnet}", f"subnet {ids.Subnet}"))
    if ids.VNetCreated and ids.VNet:
        steps.append(("VNetCreated", f"cluster/sdn/vnets/{ids.VNet}", f"VNet {ids.VNet}"))
    if ids.ZoneCreated and ids.Zone:
        steps.append(("ZoneCreated", f"cluster/sdn/zones/{ids.Zone}", f"zone {ids.Zone}"))
    for flag, path, what in steps:
        ids.SdnPending = True
        ctx.save()
        deletes.delete(partial(pve.delete, path), what=f"delete SDN {what}", timeout=timeout)
        setattr(ids, flag, False)
        ctx.save()
    if ids.SdnPending:
        apply_sdn(pve, ctx)
    infra.NetworkCreated, infra.VMSubnetIDs = False, []
    ctx.save()
    ctx.log("SDN objects deleted and applied: " + (", ".join(w for _, _, w in steps) or "none were left"))
