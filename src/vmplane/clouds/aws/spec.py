"""AWS as the spec file sees it: the provider shape, defaults, id patterns, options and limits.

Imports only pydantic and `vmplane.envspec`: `vmplane validate` loads it, and must start fast (no SDK).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field
from pydantic_core import InitErrorDetails

from vmplane.envspec import cloudlimits
from vmplane.envspec.base import CertSource, Cloud, ExecMode
from vmplane.envspec.cloudlimits import Rule, refusal
from vmplane.envspec.cloudspec import CloudOptions, CloudSpec, IdPattern, Moved, ProviderBase, Starter, spec_error
from vmplane.envspec.cloudspec import plain_pool_defaults as _plain
from vmplane.envspec.secrets import SecretStore

if TYPE_CHECKING:
    from vmplane.envspec.models import EnvSpec


class AwsProvider(ProviderBase):
    cloud: Literal[Cloud.aws] = Field(description="Amazon Web Services.")
    region: str = Field(min_length=1, description="AWS region, e.g. us-east-1.")
    profile: str | None = Field(default=None, description="Named AWS credentials profile. Never read in sandbox mode.")

    def target_fields(self, sandbox: bool) -> dict[str, Any]:
        # Sandbox credentials are fixed dummies: a named profile must not leak into them.
        return {"profile": None if sandbox else self.profile}


class AwsLoadBalancer(CloudOptions):
    CLOUD: ClassVar[str] = "aws"

    hosted_zone_id: str | None = Field(
        default=None,
        description="Route53 zone for the alias and the certificate's validation record; default: the "
        "account's public zone whose name is the longest suffix of domain.",
    )


AWS_TAG_CHARS = Rule(
    "AWS",
    "InvalidParameterValue / ValidationError",
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_Tag.html",
)
AWS_TAG_COUNT = Rule(
    "AWS",
    "TagLimitExceeded (EC2), TooManyTagsException (ELB, ACM)",
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions",
)
AWS_RESERVED_PREFIX = Rule(
    "AWS",
    "InvalidParameterValue (tag keys may not begin with aws:)",
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions",
)
AWS_ALB_NAME = Rule(
    "Elastic Load Balancing",
    "ValidationError (a load balancer name must not begin with internal-)",
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_CreateLoadBalancer.html",
)
AWS_HEALTH_PATH = Rule(
    "Elastic Load Balancing",
    "ValidationError (HealthCheckPath is 1 to 1024 characters)",
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_CreateTargetGroup.html",
)
S3_BUCKET_NAME = Rule(
    "S3", "InvalidBucketName", "https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html"
)
RULES = (AWS_TAG_CHARS, AWS_TAG_COUNT, AWS_RESERVED_PREFIX, AWS_ALB_NAME, AWS_HEALTH_PATH, S3_BUCKET_NAME)

AWS_MAX_HEALTH_PATH = 1024  # botocore's elbv2 CreateTargetGroup.HealthCheckPath max
AWS_MAX_TAGS = 50  # user tags + vmplane's; aws: tags AWS adds itself do not count (same source)
_S3_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_S3_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def _tags(spec: EnvSpec) -> list[InitErrorDetails]:
    out: list[InitErrorDetails] = []
    if spec.tag_prefix.lower().startswith("aws:"):
        msg = f"every key vmplane adds would start {spec.tag_prefix[:4]!r}, which AWS reserves"
        out.append(refusal(("tagPrefix",), spec.tag_prefix, msg, AWS_RESERVED_PREFIX))
    for key, value in spec.tags.items():
        if not cloudlimits.aws_tag_text_ok(key):
            msg = f"tag key {key!r} has characters AWS refuses (letters, digits, spaces and _.:/=+-@ only)"
            out.append(refusal(("tags", key), key, msg, AWS_TAG_CHARS))
        if not cloudlimits.aws_tag_text_ok(value):
            msg = f"tag {key!r}: the value has characters AWS refuses (letters, digits, spaces and _.:/=+-@ only)"
            out.append(refusal(("tags", key), value, msg, AWS_TAG_CHARS))
    own = cloudlimits.vmplane_tag_keys(spec)
    total = len(set(spec.tags) | own)
    if total > AWS_MAX_TAGS:
        msg = (
            f"{total} tags per resource with vmplane's {len(own)} ({', '.join(sorted(own))}); AWS allows {AWS_MAX_TAGS}"
        )
        out.append(refusal(("tags",), len(spec.tags), msg, AWS_TAG_COUNT))
    return out


def alb_name_head(env: str) -> str:
    """The head of the ALB and target-group names (clouds/aws/naming.lb_base_name: head-digest)."""
    return f"{env[:19].rstrip('-')}-"


def _names(spec: EnvSpec) -> list[InitErrorDetails]:
    lb = spec.load_balancer
    if lb is None:
        return []
    out: list[InitErrorDetails] = []
    if alb_name_head(spec.name).startswith("internal-"):
        msg = f"the load balancer's name would start {alb_name_head(spec.name)!r}: choose another environment name"
        out.append(refusal(("name",), spec.name, msg, AWS_ALB_NAME))
    if len(lb.health_check.path) > AWS_MAX_HEALTH_PATH:
        msg = f"a health-check path of {len(lb.health_check.path)} characters; AWS allows {AWS_MAX_HEALTH_PATH}"
        out.append(refusal(("loadBalancer", "healthCheck", "path"), lb.health_check.path, msg, AWS_HEALTH_PATH))
    return out


def s3_bucket_problem(name: str) -> str | None:
    if ".." in name:
        return "two adjacent periods"
    if cloudlimits.ip_like(name):
        return "formatted as an IP address"
    if head := next((p for p in _S3_PREFIXES if name.startswith(p)), None):
        return f"the reserved prefix {head!r}"
    if tail := next((s for s in _S3_SUFFIXES if name.endswith(s)), None):
        return f"the reserved suffix {tail!r}"
    return None


def _bucket(spec: EnvSpec) -> list[InitErrorDetails]:
    return cloudlimits.bucket(spec, s3_bucket_problem, S3_BUCKET_NAME)


def _certificate_arn(spec: EnvSpec) -> list[InitErrorDetails]:
    arn = spec.load_balancer.certificate_arn if spec.load_balancer else None
    if arn is None or arn.startswith("arn:"):
        return []
    return [spec_error(("loadBalancer", "certificateArn"), arn, "must be an ACM ARN (arn:...)")]


def _region_problem(region: str, project: str) -> str | None:
    return None if cloudlimits.region_like(region) else f"region {region!r} is not a region name like 'us-east-1'"


SPEC = CloudSpec(
    name="aws",
    label="AWS",
    provider=AwsProvider,
    exec_mode=ExecMode.SSM,
    cert_source=CertSource.AWSACM,
    secret_stores=(SecretStore.aws_sm, SecretStore.aws_ssm),
    network_id=IdPattern(r"vpc-[0-9a-f]+", "a VPC id (vpc-...)"),
    subnet_id=IdPattern(r"subnet-[0-9a-f]+", "a subnet id (subnet-...)"),
    fill_pool=_plain({"instanceType": "t3.small", "image": "al2023"}),
    lb_options=AwsLoadBalancer,
    moved=(Moved("loadBalancer", "hostedZoneId"),),
    checks=(_certificate_arn, _tags, _names, _bucket),
    starter=Starter(
        provider="""    "cloud": "aws",
    "region": __REGION__,
    // "profile": "default", // a named AWS credentials profile (never read in sandbox mode)""",
        network="A new private VPC with NAT egress: VMs get no public IPs, and port 22 is never opened.",
        machine="""      "instanceType": "t3.small",
      "image": "al2023", // an AMI id, an alias (al2023, ubuntu-24.04, debian-12) or ssm:/parameter/path""",
        secrets=("aws-sm:prod/db#password", "aws-ssm:/prod/app/api-key"),
        default_region="us-east-1",
        sandbox_hint=" Try it on the emulated AWS account with `vmplane apply --sandbox`.",
        check=_region_problem,
    ),
)
