"""What each cloud would refuse in a valid-looking file, refused by `vmplane validate` instead.

The models check shapes; these checks need the cloud and what vmplane adds to the file on its way to
the API: its own tags (five `<tagPrefix>` keys and `Name`), the names it derives, the label and token
folding (`tagforms`). Each rule names the cloud's answer and its source, so a message says what the
cloud would have said, at the file's line, before anything was created. Names vmplane derives by
hashing (GCP resource names, AWS target groups and schedules) always fit: nothing is refused for them.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_core import InitErrorDetails, PydanticCustomError

from vmplane.envspec.base import Cloud
from vmplane.envspec.tagforms import PROXMOX_TAG, gcp_label_key, gcp_label_uncut, gcp_labels, proxmox_tags

if TYPE_CHECKING:
    from vmplane.envspec.models import EnvSpec

# The tag keys vmplane adds to every resource after `tagPrefix` (clouds/base.Tagger.tags), and `Name`.
VMPLANE_TAG_NAMES = ("orgId", "jobId", "role", "managedBy", "env")
_SAMPLE_JOB = "job-20260101-0a1b2c3d"  # jobs/service.new_job_id's shape: the value only matters for folding
_PVE_TAG_RE = re.compile(PROXMOX_TAG)


@dataclass(frozen=True)
class Rule:
    """One refusal: who answers (the service), what it answers (its error code), where that is documented."""

    who: str
    answer: str
    source: str


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
GCS_BUCKET_NAME = Rule(
    "Cloud Storage", "400 invalid (bucket name)", "https://cloud.google.com/storage/docs/naming-buckets"
)
GCP_LABELS = Rule(
    "Google Cloud", "400 invalid (labels)", "https://cloud.google.com/compute/docs/labeling-resources#requirements"
)
PVE_TAG = Rule(
    "Proxmox VE",
    "400 value does not match the regex pattern (format pve-tag)",
    # PVE_TAG_RE there: [a-z0-9_][a-z0-9_\-\+\.]* (case-insensitive), the format of a VM's `tags`.
    "https://git.proxmox.com/?p=pve-common.git;a=blob;f=src/PVE/JSONSchema.pm",
)

AWS_MAX_HEALTH_PATH = 1024  # botocore's elbv2 CreateTargetGroup.HealthCheckPath max
AWS_MAX_TAGS = 50  # user tags + vmplane's; aws: tags AWS adds itself do not count (same source)
GCP_MAX_LABELS = 64
GCP_MAX_LABEL = 63
# botocore's ELBv2/ACM/IAM TagKey and TagValue pattern `[\p{L}\p{Z}\p{N}_.:/=+\-@]*`: EC2 alone allows
# any character, but the same tag set goes on load balancers, certificates and IAM roles.
_AWS_TAG_PUNCT = frozenset("_.:/=+-@")
_S3_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_S3_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_GOOGLE_LIKE = re.compile(r"g[o0][o0]gle")


def check(spec: EnvSpec) -> list[InitErrorDetails]:
    """Every refusal for the spec's cloud, each at the field that causes it."""
    cloud = spec.provider.cloud
    if cloud is Cloud.aws:
        return [*_aws_tags(spec), *_aws_names(spec), *_bucket(spec, _s3_bucket, S3_BUCKET_NAME)]
    if cloud is Cloud.gcp:
        return [*_gcp_labels(spec), *_bucket(spec, _gcs_bucket, GCS_BUCKET_NAME)]
    if cloud is Cloud.proxmox:
        return _pve_tags(spec)
    return []


def _error(loc: tuple[str | int, ...], value: Any, message: str, rule: Rule) -> InitErrorDetails:
    # `{...}` in a custom error's message is a template slot: the literal text must not hold braces.
    text = f"{message}; {rule.who} answers {rule.answer}".replace("{", "(").replace("}", ")")
    return InitErrorDetails(type=PydanticCustomError("cloud_refuses", text), loc=loc, input=value)


def vmplane_tag_keys(spec: EnvSpec) -> set[str]:
    return {f"{spec.tag_prefix}{name}" for name in VMPLANE_TAG_NAMES} | {"Name"}


def _logical_tags(spec: EnvSpec) -> dict[str, str]:
    """The tag set a resource gets (Tagger.tags): the user's, then vmplane's over them."""
    p = spec.tag_prefix
    own = {f"{p}orgId": spec.org, f"{p}jobId": _SAMPLE_JOB, f"{p}role": "vm", f"{p}managedBy": "vmplane"}
    return {**spec.tags, **own, f"{p}env": spec.name}


# -- AWS -------------------------------------------------------------------------------------------


def aws_tag_text_ok(text: str) -> bool:
    """AWS's tag pattern: letters, separators (spaces) and numbers of any script, and `_.:/=+-@`."""
    return all(unicodedata.category(c)[0] in "LZN" or c in _AWS_TAG_PUNCT for c in text)


def _aws_tags(spec: EnvSpec) -> list[InitErrorDetails]:
    out: list[InitErrorDetails] = []
    if spec.tag_prefix.lower().startswith("aws:"):
        msg = f"every key vmplane adds would start {spec.tag_prefix[:4]!r}, which AWS reserves"
        out.append(_error(("tagPrefix",), spec.tag_prefix, msg, AWS_RESERVED_PREFIX))
    for key, value in spec.tags.items():
        if not aws_tag_text_ok(key):
            msg = f"tag key {key!r} has characters AWS refuses (letters, digits, spaces and _.:/=+-@ only)"
            out.append(_error(("tags", key), key, msg, AWS_TAG_CHARS))
        if not aws_tag_text_ok(value):
            msg = f"tag {key!r}: the value has characters AWS refuses (letters, digits, spaces and _.:/=+-@ only)"
            out.append(_error(("tags", key), value, msg, AWS_TAG_CHARS))
    total = len(set(spec.tags) | vmplane_tag_keys(spec))
    if total > AWS_MAX_TAGS:
        msg = (
            f"{total} tags per resource with vmplane's {len(vmplane_tag_keys(spec))} "
            f"({', '.join(sorted(vmplane_tag_keys(spec)))}); AWS allows {AWS_MAX_TAGS}"
        )
        out.append(_error(("tags",), len(spec.tags), msg, AWS_TAG_COUNT))
    return out


def alb_name_head(env: str) -> str:
    """The head of the ALB and target-group names (clouds/aws/naming.lb_base_name: head-digest)."""
    return f"{env[:19].rstrip('-')}-"


def _aws_names(spec: EnvSpec) -> list[InitErrorDetails]:
    lb = spec.load_balancer
    if lb is None:
        return []
    out: list[InitErrorDetails] = []
    if alb_name_head(spec.name).startswith("internal-"):
        msg = f"the load balancer's name would start {alb_name_head(spec.name)!r}: choose another environment name"
        out.append(_error(("name",), spec.name, msg, AWS_ALB_NAME))
    if len(lb.health_check.path) > AWS_MAX_HEALTH_PATH:
        msg = f"a health-check path of {len(lb.health_check.path)} characters; AWS allows {AWS_MAX_HEALTH_PATH}"
        out.append(_error(("loadBalancer", "healthCheck", "path"), lb.health_check.path, msg, AWS_HEALTH_PATH))
    return out


def _ip_like(name: str) -> bool:
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        return False
    return True


def _s3_bucket(name: str) -> str | None:
    if ".." in name:
        return "two adjacent periods"
    if _ip_like(name):
        return "formatted as an IP address"
    if head := next((p for p in _S3_PREFIXES if name.startswith(p)), None):
        return f"the reserved prefix {head!r}"
    if tail := next((s for s in _S3_SUFFIXES if name.endswith(s)), None):
        return f"the reserved suffix {tail!r}"
    return None


def _gcs_bucket(name: str) -> str | None:
    if _ip_like(name):
        return "formatted as an IP address"
    if name.startswith("goog"):
        return "the prefix 'goog'"
    if _GOOGLE_LIKE.search(name):
        return "'google' or a misspelling of it"
    return None


def _bucket(spec: EnvSpec, why: Any, rule: Rule) -> list[InitErrorDetails]:
    if spec.state is None or (reason := why(spec.state.bucket)) is None:
        return []
    msg = f"a bucket name with {reason}"
    return [_error(("state", "bucket"), spec.state.bucket, msg, rule)]


# -- GCP -------------------------------------------------------------------------------------------


def _gcp_labels(spec: EnvSpec) -> list[InitErrorDetails]:
    """The labels gcp_labels folds the tag set into: at most 64, each key and value at most 63."""
    out: list[InitErrorDetails] = []
    seen: dict[str, str] = {}
    for key in sorted(spec.tags):
        if key == "Name":
            continue  # the resource's name, not a label
        label = gcp_label_key(key)
        if label in seen:
            msg = f"tags {seen[label]!r} and {key!r} are both the label {label!r} on Google Cloud: keep one"
            out.append(_error(("tags", key), key, msg, GCP_LABELS))
        seen.setdefault(label, key)
        # Folding cuts at 63 to keep the API from refusing; a cut would merge keys or lose the value.
        if len(long_key := gcp_label_uncut(key, key=True)) > GCP_MAX_LABEL:
            msg = f"tag key {key!r} is {len(long_key)} characters as a label; Google allows {GCP_MAX_LABEL}"
            out.append(_error(("tags", key), key, msg, GCP_LABELS))
        if len(folded := gcp_label_uncut(spec.tags[key], key=False)) > GCP_MAX_LABEL:
            msg = f"tag {key!r}: the value is {len(folded)} characters as a label; Google allows {GCP_MAX_LABEL}"
            out.append(_error(("tags", key), spec.tags[key], msg, GCP_LABELS))
    total = len(gcp_labels(_logical_tags(spec)))
    if total > GCP_MAX_LABELS:
        msg = f"{total} labels per resource with vmplane's {len(VMPLANE_TAG_NAMES)}; Google allows {GCP_MAX_LABELS}"
        out.append(_error(("tags",), len(spec.tags), msg, GCP_LABELS))
    return out


# -- Proxmox ---------------------------------------------------------------------------------------


def _pve_tags(spec: EnvSpec) -> list[InitErrorDetails]:
    """Each tag pair becomes one PVE tag token (proxmox_tags): PVE refuses a token not `pve-tag`."""
    out: list[InitErrorDetails] = []
    prefix_reported = False
    for key, value in _logical_tags(spec).items():
        if key == "Name":
            continue  # the VM's name, not a tag
        (token,) = proxmox_tags({key: value}) or [""]
        if _PVE_TAG_RE.fullmatch(token):
            continue
        msg = f"becomes the Proxmox tag {token!r}, which PVE refuses (it must start with a-z, 0-9 or _)"
        if key in spec.tags:
            out.append(_error(("tags", key), value, msg, PVE_TAG))
        elif not prefix_reported:  # one issue for the prefix, not one per key vmplane derives from it
            prefix_reported = True
            out.append(_error(("tagPrefix",), spec.tag_prefix, f"{key!r} {msg}", PVE_TAG))
    return out
