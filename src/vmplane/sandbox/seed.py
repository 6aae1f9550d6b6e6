"""What the sandbox account holds from the start, like a real account that owns a domain: one public
Route53 hosted zone, so load balancer examples get their alias and certificate validation records."""

from __future__ import annotations

SANDBOX_ZONE = "sandbox.vmplane.test"


def seed(endpoint: str) -> str:
    """Create the sandbox's hosted zone unless it exists; returns its id."""
    import boto3
    from botocore.config import Config

    from vmplane.clouds.aws.session import SANDBOX_CREDENTIALS
    from vmplane.sandbox.faults import NO_FAULTS_AGENT

    session = boto3.session.Session(region_name="us-east-1", **SANDBOX_CREDENTIALS)
    # The sandbox's own set-up: never met by a fault profile.
    r53 = session.client("route53", endpoint_url=endpoint, config=Config(user_agent_extra=NO_FAULTS_AGENT))
    for zone in r53.list_hosted_zones_by_name(DNSName=SANDBOX_ZONE)["HostedZones"]:
        if zone["Name"].rstrip(".") == SANDBOX_ZONE:
            return str(zone["Id"]).rsplit("/", 1)[-1]
    created = r53.create_hosted_zone(
        Name=SANDBOX_ZONE,
        CallerReference="vmplane-sandbox-zone",
        HostedZoneConfig={"Comment": "the sandbox account's domain", "PrivateZone": False},
    )
    return str(created["HostedZone"]["Id"]).rsplit("/", 1)[-1]
