"""The AWS driver's own part of InfraConfig (`InfraConfig.Cloud`): VPC parts, IAM, ALB, ACM, Route53,
schedules."""

from __future__ import annotations

from pydantic import Field

from vmplane.state import CloudInfra, InfraConfig, StateModel


class PoolImage(StateModel):
    ImageID: str
    RootDeviceName: str = "/dev/xvda"


class DnsRecord(StateModel):
    """A Route53 record vmplane wrote (records cannot carry tags, so teardown works from this list)."""

    ZoneID: str
    Name: str
    Type: str


class AwsInfra(CloudInfra):
    Kind: str = "aws"
    AccountID: str | None = None
    Images: dict[str, PoolImage] = Field(default_factory=dict)
    # Network (the VPC itself is InfraConfig.NetworkID, its private subnets InfraConfig.VMSubnetIDs)
    VpcCidr: str | None = None
    InternetGatewayID: str | None = None
    NatGatewayIDs: list[str] = Field(default_factory=list)
    # Bumped each time a gateway is forgotten (failed, deleted out of band): its ClientToken's attempt.
    NatAttempt: int = 0
    # pool -> how often its launch template was found deleted and forgotten: its ClientToken's attempt.
    LaunchTemplateAttempts: dict[str, int] = Field(default_factory=dict)
    ElasticIPAllocationIDs: list[str] = Field(default_factory=list)
    PublicSubnetIDs: list[str] = Field(default_factory=list)
    PublicRouteTableID: str | None = None
    PrivateRouteTableID: str | None = None
    # An existing VPC's default security group as it was when the job adopted the VPC (group id ->
    # {"ingress", "egress"} rules): the user's, so drift reports a change to it and never repairs it.
    UserGroupRules: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    # Identity
    RoleName: str | None = None
    InstanceProfileName: str | None = None
    InstanceProfileArn: str | None = None
    # The VM role's vmplane-secrets policy as last put, one "Action Resource" line per statement
    # (secret_policy.summary): drift compares the role's with it. Empty: no policy.
    SecretsPolicy: list[str] = Field(default_factory=list)
    # Load balancer (InfraConfig.LoadBalancerID is the ALB's ARN)
    LoadBalancerName: str | None = None
    LoadBalancerZoneID: str | None = None  # the ALB's canonical hosted zone, for the alias record
    LoadBalancerSecurityGroupID: str | None = None
    TargetGroupArn: str | None = None
    ListenerArns: list[str] = Field(default_factory=list)
    CertificateArn: str | None = None
    CertificateRequested: bool = False  # True when vmplane requested it (and so deletes it)
    CertificateRequestToken: str | None = None  # ACM idempotency token of the request in flight
    CertificateReady: bool = False  # requested (or given) and its validation record written: not redone
    HostedZoneID: str | None = None
    DNSRecords: list[DnsRecord] = Field(default_factory=list)
    # Schedules (for the record: teardown finds them by name and tag). ASG pools: pool -> scheduled
    # action names; Fixed pools: EventBridge schedule name -> ARN, in the environment's group, run as
    # the scheduler role.
    ScheduledActions: dict[str, list[str]] = Field(default_factory=dict)
    ScheduleGroupName: str | None = None
    Schedules: dict[str, str] = Field(default_factory=dict)
    SchedulerRoleName: str | None = None
    SchedulerRoleArn: str | None = None


def aws_ids(infra: InfraConfig) -> AwsInfra:
    """The AWS ids of a job, upgraded in place from the neutral record on first use.

    Records written before the sub-model existed kept these fields at the top level (as extras): they
    move into it here, so an environment applied by an older vmplane can still be torn down.
    """
    if isinstance(infra.Cloud, AwsInfra):
        return infra.Cloud
    legacy = {k: v for k, v in (infra.model_extra or {}).items() if k in AwsInfra.model_fields}
    ids = infra.cloud_ids(AwsInfra, legacy)
    for k in legacy:
        delattr(infra, k)
    return ids
