"""Cloud DNS for the load balancer: the managed zone of the domain, the A record (one change that
deletes the exact old record set and adds the new one), and exact-match deletion.

Record sets carry no labels, so "ours" is what `GcpInfra.DnsRecords` lists: each record is listed
there before the change that writes it (intent), and a record of the same name that is not listed is
someone else's and refused.
"""

from __future__ import annotations

from typing import Any

from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, InvalidRequestError, NotFoundError
from vmplane.clouds.gcp.ids import DnsRecordSet, gcp_ids
from vmplane.clouds.gcp.session import GcpClients
from vmplane.clouds.gcp.spec import GcpLoadBalancer
from vmplane.clouds.waits import poll
from vmplane.envspec.models import LoadBalancer

TTL = 300
CHANGE_TIMEOUT = 300.0


def fqdn(domain: str) -> str:
    return domain.rstrip(".") + "."


def resolve_zone(gcp: GcpClients, lb: LoadBalancer) -> str:
    """The managed zone for the record: `loadBalancer.gcp.dnsZone`, else the project's public zone whose
    DNS name is the longest suffix of the domain."""
    name = fqdn(lb.domain)
    given = lb.options(GcpLoadBalancer)
    dns_zone = given.dns_zone if given is not None else None
    if dns_zone:
        wanted = dns_zone  # narrowed to str here, not inside the lambda
        try:
            zone = gcp.call(
                "dns.managedZones.get",
                lambda: gcp.dns.managedZones().get(project=gcp.project, managedZone=wanted).execute(),
            )
        except NotFoundError:
            raise InvalidRequestError(
                f"loadBalancer.gcp.dnsZone: no managed zone {dns_zone} in {gcp.project}"
            ) from None
        if not _holds(zone["dnsName"], name):
            raise InvalidRequestError(
                f"loadBalancer.gcp.dnsZone: zone {dns_zone} ({zone['dnsName']}) cannot hold {name}"
            )
        return str(dns_zone)
    best: tuple[int, str] | None = None
    for zone in _zones(gcp):
        if zone.get("visibility", "public") != "public" or not _holds(zone["dnsName"], name):
            continue
        if best is None or len(zone["dnsName"]) > best[0]:
            best = (len(zone["dnsName"]), str(zone["name"]))
    if best is None:
        raise InvalidRequestError(
            f"loadBalancer.domain: no public Cloud DNS managed zone in project {gcp.project} holds {lb.domain}; "
            "create one or set loadBalancer.gcp.dnsZone"
        )
    return best[1]


def _holds(zone_dns: str, name: str) -> bool:
    zone_dns = fqdn(zone_dns)
    return name == zone_dns or name.endswith("." + zone_dns)


def _zones(gcp: GcpClients) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = gcp.call(
            "dns.managedZones.list",
            lambda t=token: gcp.dns.managedZones().list(project=gcp.project, pageToken=t).execute(),  # type: ignore[misc]
        )
        out += page.get("managedZones", [])
        token = page.get("nextPageToken")
        if not token:
            return out


def find_record(gcp: GcpClients, zone: str, name: str, rtype: str) -> dict[str, Any] | None:
    """The record set as it is now, or None (also when the zone itself is gone)."""
    try:
        page = gcp.call(
            "dns.resourceRecordSets.list",
            lambda: (
                gcp.dns.resourceRecordSets()
                .list(project=gcp.project, managedZone=zone, name=name, type=rtype)
                .execute()
            ),
        )
    except NotFoundError:
        return None
    return next((r for r in page.get("rrsets", []) if r["name"] == name and r["type"] == rtype), None)


def _ours(ctx: Context, zone: str, name: str, rtype: str) -> bool:
    return any((r.Zone, r.Name, r.Type) == (zone, name, rtype) for r in gcp_ids(ctx.infra).DnsRecords)


def upsert_a(gcp: GcpClients, ctx: Context, zone: str, domain: str, ip: str) -> bool:
    """Point `domain` at `ip`; True if a change was made (False: it already did)."""
    name = fqdn(domain)
    current = find_record(gcp, zone, name, "A")
    if current is not None and not _ours(ctx, zone, name, "A"):
        raise ConflictError(
            f"loadBalancer.domain: {name} already has an A record in zone {zone} that vmplane did not write "
            f"({', '.join(current.get('rrdatas', []))}); remove it or choose another domain"
        )
    if current is not None and current.get("rrdatas") == [ip] and int(current.get("ttl", 0)) == TTL:
        return False
    entry = DnsRecordSet(Zone=zone, Name=name, Type="A", Ttl=TTL, Rrdatas=[ip])
    ids = gcp_ids(ctx.infra)
    ids.DnsRecords = [*[r for r in ids.DnsRecords if (r.Zone, r.Name, r.Type) != (zone, name, "A")], entry]
    ctx.save()  # intent first: teardown deletes it even if we crash right after the change
    body: dict[str, Any] = {"additions": [{"name": name, "type": "A", "ttl": TTL, "rrdatas": [ip]}]}
    if current is not None:
        body["deletions"] = [current]  # the exact old record set, or Cloud DNS refuses the change
    _change(gcp, zone, body)
    return True


def delete_record(gcp: GcpClients, rec: DnsRecordSet) -> None:
    current = find_record(gcp, rec.Zone, rec.Name, rec.Type)
    if current is None:
        return
    try:
        _change(gcp, rec.Zone, {"deletions": [current]})
    except NotFoundError:  # deleted between our read and our change
        return


def _change(gcp: GcpClients, zone: str, body: dict[str, Any]) -> None:
    change = gcp.call(
        "dns.changes.create",
        lambda: gcp.dns.changes().create(project=gcp.project, managedZone=zone, body=body).execute(),
    )
    if change.get("status") == "done":
        return
    change_id = change["id"]

    def done() -> bool | None:
        got = gcp.call(
            "dns.changes.get",
            lambda: gcp.dns.changes().get(project=gcp.project, managedZone=zone, changeId=change_id).execute(),
        )
        return True if got.get("status") == "done" else None

    poll(done, what="the DNS change to be applied", timeout=CHANGE_TIMEOUT, first=0.05, cap=5)
