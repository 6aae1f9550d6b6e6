"""Route53 for the load balancer: the hosted zone of the domain, UPSERT of records with a wait for
INSYNC, and exact-match deletion. Records cannot carry tags, so each one vmplane writes is listed in
`InfraConfig.DNSRecords` (intent first) and removed from there."""

from __future__ import annotations

from typing import Any

from vmplane.clouds.aws.errors import aws_call, aws_errors
from vmplane.clouds.aws.ids import DnsRecord, aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.spec import AwsLoadBalancer
from vmplane.clouds.base import Context
from vmplane.clouds.errors import InvalidRequestError, NotFoundError
from vmplane.clouds.waits import poll
from vmplane.envspec.models import LoadBalancer

DNS_TIMEOUT = 300.0


def resolve_hosted_zone(aws: AwsClients, lb: LoadBalancer) -> str | None:
    """The zone for the alias and validation records: the given one, else the longest public suffix match."""
    given = lb.options(AwsLoadBalancer)
    if given is not None and given.hosted_zone_id:
        zone = aws_call(aws.route53.get_hosted_zone, Id=given.hosted_zone_id)["HostedZone"]
        name = zone["Name"].rstrip(".")
        if not (lb.domain == name or lb.domain.endswith("." + name)):
            raise InvalidRequestError(f"loadBalancer.aws.hostedZoneId: zone {name} cannot hold {lb.domain}")
        return str(zone["Id"]).rsplit("/", 1)[-1]
    best: tuple[int, str] | None = None
    with aws_errors():
        for page in aws.route53.get_paginator("list_hosted_zones").paginate():
            for zone in page["HostedZones"]:
                if zone.get("Config", {}).get("PrivateZone"):
                    continue
                name = zone["Name"].rstrip(".")
                if (lb.domain == name or lb.domain.endswith("." + name)) and (best is None or len(name) > best[0]):
                    best = (len(name), str(zone["Id"]).rsplit("/", 1)[-1])
    return best[1] if best else None


def upsert(aws: AwsClients, ctx: Context, zone: str, record: dict[str, Any], *, wait: bool = True) -> None:
    """Create or update `record`; with `wait`, until Route 53 reports it INSYNC (up to a minute)."""
    infra = ctx.infra
    entry = DnsRecord(ZoneID=zone, Name=record["Name"].rstrip("."), Type=record["Type"])
    if entry not in aws_ids(infra).DNSRecords:
        aws_ids(infra).DNSRecords = [*aws_ids(infra).DNSRecords, entry]
        ctx.save()  # intent first: teardown deletes it even if we crash right after the change
    change = aws_call(
        aws.route53.change_resource_record_sets,
        HostedZoneId=zone,
        ChangeBatch={
            "Comment": f"vmplane {ctx.job_id}",
            "Changes": [{"Action": "UPSERT", "ResourceRecordSet": record}],
        },
    )["ChangeInfo"]
    if wait:
        wait_insync(aws, change["Id"])


def wait_insync(aws: AwsClients, change_id: str) -> None:
    poll(
        lambda: True if aws_call(aws.route53.get_change, Id=change_id)["ChangeInfo"]["Status"] == "INSYNC" else None,
        what="the DNS change to propagate",
        timeout=DNS_TIMEOUT,
        first=0.05,
    )


def find_record(aws: AwsClients, rec: DnsRecord) -> dict[str, Any] | None:
    """The record set as it is now (Route53 deletes exact record sets only), or None."""
    try:
        sets = aws_call(
            aws.route53.list_resource_record_sets,
            HostedZoneId=rec.ZoneID,
            StartRecordName=rec.Name,
            StartRecordType=rec.Type,
            MaxItems="1",
        )["ResourceRecordSets"]
    except NotFoundError:
        return None  # the zone itself is gone
    return next((dict(s) for s in sets if s["Name"].rstrip(".") == rec.Name and s["Type"] == rec.Type), None)


def delete_record(aws: AwsClients, rec: DnsRecord) -> None:
    current = find_record(aws, rec)
    if current is None:
        return
    try:
        change = aws_call(
            aws.route53.change_resource_record_sets,
            HostedZoneId=rec.ZoneID,
            ChangeBatch={"Changes": [{"Action": "DELETE", "ResourceRecordSet": current}]},
        )["ChangeInfo"]
    except NotFoundError:  # deleted between our read and our change (translate classifies it)
        return
    wait_insync(aws, change["Id"])
