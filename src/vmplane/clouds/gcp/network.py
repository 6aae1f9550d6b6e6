"""stepCreateNetwork: a custom-mode VPC network, one regional private subnetwork (Private Google Access on,
no flow logs), and a Cloud Router with one Cloud NAT for egress; or an existing network, recorded only.

Every resource has a deterministic name (naming.py): its name is recorded (`ctx.save()`) before the
insert, each ensure looks it up first and reconciles what drifted (a router whose NAT was removed gets
it back), so a crash at any point converges on re-run. Teardown deletes only what `NetworkCreated` says
vmplane made, found by name and checked to be this job's.

Subnetwork range: GCP subnetworks are regional (one spans every zone), so one is enough. It takes the
first /20 of `network.cidr` (4094 VMs), leaving the rest of the range free for later subnetworks; a
spec range smaller than /20 (/21 to /24) is used whole.
"""

from __future__ import annotations

import ipaddress
from functools import partial
from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, InvalidRequestError
from vmplane.clouds.gcp import naming, ownership
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.operations import create, find, last_segment, remove, run
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients, new_request_id

SUBNET_PREFIX = 20
NAT_LOG_FILTER = "ERRORS_ONLY"


def subnet_cidr(cidr: str) -> str:
    """The subnetwork's range: the first /20 of the network's, or all of it when smaller."""
    net = ipaddress.ip_network(cidr)
    if net.prefixlen >= SUBNET_PREFIX:
        return str(net)
    return str(next(net.subnets(new_prefix=SUBNET_PREFIX)))


def network_ref(project: str, name: str) -> str:
    return f"projects/{project}/global/networks/{name}"


def subnetwork_ref(project: str, region: str, name: str) -> str:
    return f"projects/{project}/regions/{region}/subnetworks/{name}"


def region_zones(gcp: GcpClients, region: str) -> list[str]:
    """The region's zones that are UP, sorted (zones.list filtered by region)."""
    client = gcp.compute("Zones")
    flt = f"region eq .*/regions/{region}"
    zones = gcp.call(
        "compute.zones.list",
        lambda: list(client.list(request={"project": gcp.project, "filter": flt}, timeout=CALL_TIMEOUT)),
    )
    return sorted(z.name for z in zones if z.status == "UP" and last_segment(z.region) == region)


def pick_zones(gcp: GcpClients, region: str, want: int) -> list[str]:
    """The first `want` zones of the region that are UP (stepValidate records them; the network re-reads)."""
    zones = region_zones(gcp, region)
    if len(zones) < want:
        raise InvalidRequestError(f"{region} has {len(zones)} zones up, network.zones asks for {want}")
    return zones[:want]


def _check_ours(resource: Any, ctx: Context, kind: str) -> None:
    if not ownership.owned_by(resource, ctx.tagger):
        raise ConflictError(
            f"{kind} {resource.name} already exists and belongs to {ownership.owner_of(resource, ctx.tagger)}; "
            "destroy that environment or change `name`",
            code="AlreadyExists",
        )


def ensure_network(gcp: GcpClients, ctx: Context) -> None:
    from google.cloud import compute_v1

    spec, infra, ids = ctx.spec, ctx.infra, gcp_ids(ctx.infra)
    infra.Region = spec.provider.region
    infra.Zones = pick_zones(gcp, spec.provider.region, spec.network.zones)
    ids.Project = gcp.project
    if spec.network.existing_vpc_id:
        _adopt_existing(gcp, ctx)
        return

    t, project = ctx.tagger, gcp.project
    name = naming.network(spec)
    networks = gcp.compute("Networks")
    infra.NetworkID, infra.NetworkCreated, ids.NetworkCidr = name, True, spec.network.cidr
    ids.VpcSourceRanges = [spec.network.cidr]
    ctx.save()  # intent: teardown deletes this name even if we crash right after the insert
    found = find(gcp, "compute.networks.get", lambda: networks.get(project=project, network=name, timeout=CALL_TIMEOUT))
    if found is not None:
        _check_ours(found, ctx, "network")
    else:
        body = compute_v1.Network(
            name=name,
            auto_create_subnetworks=False,
            routing_config=compute_v1.NetworkRoutingConfig(routing_mode="REGIONAL"),
            description=ownership.description(t, "network"),
        )
        create(
            gcp,
            "compute.networks.insert",
            lambda rid: networks.insert_unary(
                request={"project": project, "network_resource": body, "request_id": rid}, timeout=CALL_TIMEOUT
            ),
            what=f"network {name}",
        )
        ctx.log(f"network {name} (custom mode)")

    sub = naming.subnetwork(spec)
    infra.VMSubnetIDs = [sub]
    ctx.save()
    _ensure_subnetwork(gcp, ctx, sub, subnet_cidr(spec.network.cidr))

    ids.RouterName, ids.NatName = naming.router(spec), naming.nat(spec)
    ctx.save()
    _ensure_router(gcp, ctx, ids.RouterName, ids.NatName)
    ctx.log(f"subnetwork {sub} ({subnet_cidr(spec.network.cidr)}), router {ids.RouterName} + NAT {ids.NatName}")


def _ensure_subnetwork(gcp: GcpClients, ctx: Context, name: str, cidr: str) -> None:
    from google.cloud import compute_v1

    project, region = gcp.project, ctx.spec.provider.region
    subs = gcp.compute("Subnetworks")
    found = find(
        gcp,
        "compute.subnetworks.get",
        lambda: subs.get(project=project, region=region, subnetwork=name, timeout=CALL_TIMEOUT),
    )
    if found is None:
        body = compute_v1.Subnetwork(
            name=name,
            network=network_ref(project, str(ctx.infra.NetworkID)),
            region=region,
            ip_cidr_range=cidr,
            private_ip_google_access=True,
            log_config=compute_v1.SubnetworkLogConfig(enable=False),
            description=ownership.description(ctx.tagger, "subnet-private"),
        )
        create(
            gcp,
            "compute.subnetworks.insert",
            lambda rid: subs.insert_unary(
                request={"project": project, "region": region, "subnetwork_resource": body, "request_id": rid},
                timeout=CALL_TIMEOUT,
            ),
            what=f"subnetwork {name}",
        )
        return
    _check_ours(found, ctx, "subnetwork")
    if found.ip_cidr_range != cidr:
        raise InvalidRequestError(
            f"subnetwork {name} has range {found.ip_cidr_range}, network.cidr asks for {cidr}: a subnetwork's "
            "range cannot shrink or move in place; destroy and re-apply to change network.cidr"
        )
    if not found.private_ip_google_access:  # drifted: VMs without external IPs need it to reach Google APIs
        body = compute_v1.SubnetworksSetPrivateIpGoogleAccessRequest(private_ip_google_access=True)
        rid = new_request_id()  # once per call: a transient retry of it sends the same id
        run(
            gcp,
            "compute.subnetworks.setPrivateIpGoogleAccess",
            lambda: subs.set_private_ip_google_access_unary(
                request={
                    "project": project,
                    "region": region,
                    "subnetwork": name,
                    "subnetworks_set_private_ip_google_access_request_resource": body,
                    "request_id": rid,
                },
                timeout=CALL_TIMEOUT,
            ),
            what=f"private Google access on {name}",
        )


def desired_nat(name: str) -> Any:
    from google.cloud import compute_v1

    return compute_v1.RouterNat(
        name=name,
        nat_ip_allocate_option="AUTO_ONLY",
        source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
        log_config=compute_v1.RouterNatLogConfig(enable=True, filter=NAT_LOG_FILTER),
    )


def nat_ok(nat: Any) -> bool:
    """True if a router's NAT has the settings vmplane gives it."""
    return (
        nat.nat_ip_allocate_option == "AUTO_ONLY"
        and nat.source_subnetwork_ip_ranges_to_nat == "ALL_SUBNETWORKS_ALL_IP_RANGES"
        and bool(nat.log_config and nat.log_config.enable)
        and nat.log_config.filter == NAT_LOG_FILTER
    )


def _ensure_router(gcp: GcpClients, ctx: Context, name: str, nat_name: str) -> None:
    from google.cloud import compute_v1

    project, region = gcp.project, ctx.spec.provider.region
    routers = gcp.compute("Routers")
    found = find(
        gcp,
        "compute.routers.get",
        lambda: routers.get(project=project, region=region, router=name, timeout=CALL_TIMEOUT),
    )
    if found is None:
        body = compute_v1.Router(
            name=name,
            network=network_ref(project, str(ctx.infra.NetworkID)),
            region=region,
            description=ownership.description(ctx.tagger, "router"),
            nats=[desired_nat(nat_name)],
        )
        create(
            gcp,
            "compute.routers.insert",
            lambda rid: routers.insert_unary(
                request={"project": project, "region": region, "router_resource": body, "request_id": rid},
                timeout=CALL_TIMEOUT,
            ),
            what=f"router {name}",
        )
        return
    _check_ours(found, ctx, "router")
    nats = list(found.nats)
    if any(n.name == nat_name and nat_ok(n) for n in nats):
        return
    # The NAT is missing or was changed by hand: put ours back, keeping any other NAT on the router.
    # The network goes along unchanged: it is required on the resource, and PATCH validates the whole of it.
    kept = [*(n for n in nats if n.name != nat_name), desired_nat(nat_name)]
    patch = compute_v1.Router(name=name, network=found.network, nats=kept)
    rid = new_request_id()  # once per call: a transient retry of it sends the same id
    run(
        gcp,
        "compute.routers.patch",
        lambda: routers.patch_unary(
            request={
                "project": project,
                "region": region,
                "router": name,
                "router_resource": patch,
                "request_id": rid,
            },
            timeout=CALL_TIMEOUT,
        ),
        what=f"NAT {nat_name} on {name}",
    )
    ctx.log(f"router {name}: NAT {nat_name} restored")


def _adopt_existing(gcp: GcpClients, ctx: Context) -> None:
    """Record an existing network and its subnetworks; vmplane never modifies or deletes them."""
    net, infra, ids = ctx.spec.network, ctx.infra, gcp_ids(ctx.infra)
    project, region = gcp.project, ctx.spec.provider.region
    name = last_segment(str(net.existing_vpc_id))
    networks, subs = gcp.compute("Networks"), gcp.compute("Subnetworks")
    found = gcp.call("compute.networks.get", lambda: networks.get(project=project, network=name, timeout=CALL_TIMEOUT))
    if not net.existing_private_subnet_ids:
        raise InvalidRequestError("network.existingPrivateSubnetIds: name the subnetwork(s) of the existing network")
    cidrs: list[str] = []
    names: list[str] = []
    for ref in net.existing_private_subnet_ids:
        sub_name = last_segment(ref)
        sub = gcp.call(
            "compute.subnetworks.get",
            partial(subs.get, project=project, region=region, subnetwork=sub_name, timeout=CALL_TIMEOUT),
        )
        if last_segment(sub.network) != found.name:
            raise InvalidRequestError(f"subnetwork {sub_name} is not in network {found.name}")
        cidrs.append(sub.ip_cidr_range)
        names.append(sub_name)
    infra.NetworkID, infra.NetworkCreated, infra.VMSubnetIDs = found.name, False, names
    ids.NetworkCidr, ids.VpcSourceRanges = cidrs[0], cidrs
    ctx.save()
    ctx.log(f"using existing network {found.name} (not managed by vmplane): {', '.join(names)}")


# ---- teardown -------------------------------------------------------------------------------------


def delete_network(gcp: GcpClients, ctx: Context) -> None:
    """Router (its NAT goes with it), subnetwork, network: only what vmplane created, found by name."""
    spec, infra, ids = ctx.spec, ctx.infra, gcp_ids(ctx.infra)
    if infra.NetworkID and not infra.NetworkCreated:
        ctx.log(f"leaving existing network {infra.NetworkID} untouched")
        return
    project, region = gcp.project, spec.provider.region
    routers, subs, networks = gcp.compute("Routers"), gcp.compute("Subnetworks"), gcp.compute("Networks")

    router = ids.RouterName or naming.router(spec)
    get: Any = partial(routers.get, project=project, region=region, router=router, timeout=CALL_TIMEOUT)
    if _ours(gcp, ctx, "compute.routers.get", get):
        remove(
            gcp,
            "compute.routers.delete",
            lambda: routers.delete_unary(project=project, region=region, router=router, timeout=CALL_TIMEOUT),
            what=f"delete router {router}",
        )
    ids.RouterName = ids.NatName = None
    ctx.save()

    for sub in infra.VMSubnetIDs or [naming.subnetwork(spec)]:
        get = partial(subs.get, project=project, region=region, subnetwork=sub, timeout=CALL_TIMEOUT)
        if _ours(gcp, ctx, "compute.subnetworks.get", get):
            # In use while the VMs' interfaces linger: retried to the teardown deadline.
            delete = partial(subs.delete_unary, project=project, region=region, subnetwork=sub, timeout=CALL_TIMEOUT)
            remove(gcp, "compute.subnetworks.delete", delete, what=f"delete {sub}")
    infra.VMSubnetIDs = []
    ctx.save()

    name = infra.NetworkID or naming.network(spec)
    if _ours(
        gcp, ctx, "compute.networks.get", partial(networks.get, project=project, network=name, timeout=CALL_TIMEOUT)
    ):
        # In use while firewall rules or routes of it remain (the firewall step runs first).
        remove(
            gcp,
            "compute.networks.delete",
            lambda: networks.delete_unary(project=project, network=name, timeout=CALL_TIMEOUT),
            what=f"delete network {name}",
        )
    infra.NetworkID, infra.NetworkCreated, ids.NetworkCidr, ids.VpcSourceRanges = None, False, None, []
    ctx.save()
    ctx.log(f"deleted router, subnetwork and network {name}")


def _ours(gcp: GcpClients, ctx: Context, method: str, get: Any) -> bool:
    """True if the resource exists and is this job's; one that is someone else's is left alone."""
    found = find(gcp, method, get)
    if found is None:
        return False
    if not ownership.owned_by(found, ctx.tagger):
        ctx.log(f"{found.name} belongs to {ownership.owner_of(found, ctx.tagger)}: left alone")
        return False
    return True


def network_link(gcp: GcpClients, ctx: Context) -> str:
    """The network's URL for references (firewall rules, templates)."""
    return network_ref(gcp.project, ctx.infra.NetworkID or naming.network(ctx.spec))
