"""InfraConfig: what a job has built, kept in the job's `config.infra` JSON.

Field names follow the seed verbatim (`VMs`, `VMSecurityGroupID`, `LoadBalancerID`, `ScalingGroupID`,
`LaunchTemplateID`, `ExistingResourceGroup`, `BootstrapNginxReady`). vmplane supports several pools per
environment, so the per-pool ones (`ScalingGroupID`, `LaunchTemplateID`) map pool name -> id. Adding a
field is a model extension, not a migration: the whole object is one JSON column.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class VMState(StrEnum):
    pending = "pending"  # intent recorded, instance not confirmed running yet
    bootstrap = "bootstrap"  # running, sentinel not seen yet
    ready = "ready"  # sentinel seen through the exec channel
    failed = "failed"
    terminated = "terminated"


class StateModel(BaseModel):
    model_config = ConfigDict(extra="allow", validate_assignment=True)


class VMRecord(StateModel):
    Name: str
    Pool: str
    Index: int
    ID: str | None = None
    PrivateIP: str | None = None
    AZ: str | None = None
    SubnetID: str | None = None
    LaunchTemplateVersion: int | None = None
    State: VMState = VMState.pending
    RuntimeHash: str | None = None  # the runtime settings this VM was last given (bootstrap/runtime.py)
    # A rotation in flight: the replacement launched for this record (crash-safe intent).
    ReplacementID: str | None = None


class PoolImage(StateModel):
    ImageID: str
    RootDeviceName: str = "/dev/xvda"


class DnsRecord(StateModel):
    """A Route53 record vmplane wrote (records cannot carry tags, so teardown works from this list)."""

    ZoneID: str
    Name: str
    Type: str


class InfraConfig(StateModel):
    # Seed fields
    VMs: list[VMRecord] = Field(default_factory=list)
    VMSecurityGroupID: str | None = None
    LoadBalancerID: str | None = None
    ScalingGroupID: dict[str, str] = Field(default_factory=dict)
    LaunchTemplateID: dict[str, str] = Field(default_factory=dict)
    ExistingResourceGroup: str | None = None
    BootstrapNginxReady: bool = False
    # Where and how
    ExecMode: str | None = None
    AccountID: str | None = None
    Region: str | None = None
    Zones: list[str] = Field(default_factory=list)
    Images: dict[str, PoolImage] = Field(default_factory=dict)
    # Network
    VpcID: str | None = None
    VpcCidr: str | None = None
    VpcCreated: bool = False  # False for an existing VPC: teardown must never touch it
    InternetGatewayID: str | None = None
    NatGatewayIDs: list[str] = Field(default_factory=list)
    ElasticIPAllocationIDs: list[str] = Field(default_factory=list)
    PublicSubnetIDs: list[str] = Field(default_factory=list)
    PrivateSubnetIDs: list[str] = Field(default_factory=list)
    PublicRouteTableID: str | None = None
    PrivateRouteTableID: str | None = None
    # Identity
    RoleName: str | None = None
    InstanceProfileName: str | None = None
    InstanceProfileArn: str | None = None
    LaunchTemplateVersion: dict[str, int] = Field(default_factory=dict)
    # Load balancer (LoadBalancerID above is the ALB's ARN)
    LoadBalancerName: str | None = None
    LoadBalancerDNSName: str | None = None
    LoadBalancerZoneID: str | None = None  # the ALB's canonical hosted zone, for the alias record
    LoadBalancerSecurityGroupID: str | None = None
    TargetGroupArn: str | None = None
    ListenerArns: list[str] = Field(default_factory=list)
    CertificateArn: str | None = None
    CertificateRequested: bool = False  # True when vmplane requested it (and so deletes it)
    CertificateRequestToken: str | None = None  # ACM idempotency token of the request in flight
    HostedZoneID: str | None = None
    DNSRecords: list[DnsRecord] = Field(default_factory=list)

    def outdated_vms(self) -> list[VMRecord]:
        """Running VMs launched from an older launch template version than their pool's current one."""
        return [
            v
            for v in self.VMs
            if v.ID
            and v.State not in (VMState.terminated, VMState.failed)
            and v.LaunchTemplateVersion is not None
            and v.LaunchTemplateVersion < self.LaunchTemplateVersion.get(v.Pool, v.LaunchTemplateVersion)
        ]

    def vm(self, name: str) -> VMRecord | None:
        return next((v for v in self.VMs if v.Name == name), None)
