"""The Google Cloud driver's own part of InfraConfig (`InfraConfig.Cloud`).

Neutral fields carry the seed's meaning: `NetworkID` is the VPC network's name, `VMSubnetIDs` the
subnetwork, `VMSecurityGroupID` the VPC-ingress firewall rule, `LaunchTemplateID[pool]` the pool's
current instance template, `ScalingGroupID[pool]` its regional MIG, `LoadBalancerID` the HTTPS
forwarding rule and `LoadBalancerDNSName` the global address's IP. Everything else is here, by name:
every GCP resource vmplane makes has a deterministic name (naming.py), so these are records of what
was made, not the only way to find it.
"""

from __future__ import annotations

from pydantic import Field

from vmplane.state import CloudInfra, InfraConfig, StateModel


class DnsRecordSet(StateModel):
    """A Cloud DNS record vmplane wrote (record sets take no labels: teardown works from this list)."""

    Zone: str  # managed zone name
    Name: str  # fully qualified, with the trailing dot
    Type: str
    Ttl: int
    Rrdatas: list[str] = Field(default_factory=list)


class GcpInfra(CloudInfra):
    Kind: str = "gcp"
    Project: str | None = None
    Images: dict[str, str] = Field(default_factory=dict)  # pool -> image self-link resolved from the family
    # Network
    NetworkCidr: str | None = None
    RouterName: str | None = None
    NatName: str | None = None
    FirewallRules: dict[str, str] = Field(default_factory=dict)  # purpose (vpc, health, iap) -> rule name
    NetworkTag: str | None = None  # the network tag firewall rules target
    # Identity
    ServiceAccountEmail: str | None = None
    ServiceAccountRoles: list[str] = Field(default_factory=list)  # roles bound on the project
    # projects/P/secrets/S the account may hold secretAccessor on (secret_iam.py: intent, then the spec's)
    SecretBindings: list[str] = Field(default_factory=list)
    # Templates: pool -> every template name vmplane made for it (oldest first; teardown deletes all)
    Templates: dict[str, list[str]] = Field(default_factory=dict)
    # Fixed pools behind a load balancer: zone -> unmanaged instance group name
    InstanceGroups: dict[str, str] = Field(default_factory=dict)
    Autoscalers: dict[str, str] = Field(default_factory=dict)  # pool -> regional autoscaler name
    SchedulePolicies: dict[str, str] = Field(default_factory=dict)  # Fixed pool -> its instance schedule policy
    # Load balancer chain
    HealthCheck: str | None = None
    BackendService: str | None = None
    UrlMap: str | None = None
    RedirectUrlMap: str | None = None
    Certificate: str | None = None
    CertificateStatus: str | None = None  # last seen managed status (PROVISIONING, ACTIVE, ...)
    HttpsProxy: str | None = None
    HttpProxy: str | None = None
    Address: str | None = None
    HttpsForwardingRule: str | None = None
    HttpForwardingRule: str | None = None
    DnsZone: str | None = None
    DnsRecords: list[DnsRecordSet] = Field(default_factory=list)
    # ---- gcp-infra (network, firewall, identity) ----
    # What "inside the VPC" means for the firewall: network.cidr, or an existing network's subnetwork ranges
    VpcSourceRanges: list[str] = Field(default_factory=list)


def gcp_ids(infra: InfraConfig) -> GcpInfra:
    """The GCP ids of a job, upgraded in place from the neutral record on first use."""
    return infra.cloud_ids(GcpInfra)
