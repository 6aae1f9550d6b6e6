"""Google Cloud as the spec file sees it: the provider shape, defaults, id patterns, options and limits.

Imports only pydantic and `vmplane.envspec`: `vmplane validate` loads it, and must start fast (no SDK).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator
from pydantic_core import InitErrorDetails

from vmplane.envspec import cloudlimits
from vmplane.envspec.base import CertSource, Cloud, ExecMode
from vmplane.envspec.cloudlimits import VMPLANE_TAG_NAMES, Rule, refusal
from vmplane.envspec.cloudspec import CloudOptions, CloudSpec, IdPattern, Moved, ProviderBase, Starter
from vmplane.envspec.cloudspec import plain_pool_defaults as _plain
from vmplane.envspec.secrets import SecretStore
from vmplane.envspec.tagforms import gcp_label_key, gcp_label_uncut, gcp_labels

if TYPE_CHECKING:
    from vmplane.envspec.models import EnvSpec

GCP_PROJECT = r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$"
GCP_REGION = r"^[a-z]+(-[a-z]+)+[0-9]+$"
_GCP_PROJECT_RE = re.compile(GCP_PROJECT)
_GCP_REGION_RE = re.compile(GCP_REGION)
_GCP_NAME = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
_GCP_PREFIX = r"(https://www\.googleapis\.com/compute/v1/)?projects/[a-z][-a-z0-9]{4,28}[a-z0-9]"


class GcpProvider(ProviderBase):
    cloud: Literal[Cloud.gcp] = Field(description="Google Cloud.")
    # The patterns are what the validators below enforce, stated in the schema (JSON Schema and OpenAPI).
    project: str = Field(
        description="Google Cloud project id: 6-30 lowercase letters, digits or '-'.",
        json_schema_extra={"pattern": GCP_PROJECT},
    )
    region: str = Field(description="Google Cloud region, e.g. us-central1.", json_schema_extra={"pattern": GCP_REGION})

    @field_validator("project")
    @classmethod
    def _project(cls, v: str) -> str:
        if not _GCP_PROJECT_RE.fullmatch(v):
            raise ValueError(
                "must be a Google Cloud project id: 6-30 lowercase letters, digits or '-', "
                "starting with a letter and not ending with '-'"
            )
        return v

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not _GCP_REGION_RE.fullmatch(v):
            raise ValueError("must be a Google Cloud region like us-central1 (a region, not a zone like us-central1-a)")
        return v

    @property
    def profile(self) -> None:
        return None

    def target_fields(self, sandbox: bool) -> dict[str, Any]:
        return {"project": self.project}


class GcpExec(CloudOptions):
    CLOUD: ClassVar[str] = "gcp"

    # None (omitted) means true; kept None so recorded specs do not change.
    interactive: bool | None = Field(
        default=None,
        description="Allow interactive sessions (`gcloud compute ssh --tunnel-through-iap`), which opens TCP 22 "
        "to the VMs from IAP's range 35.235.240.0/20 and nowhere else; false leaves no port 22 open at all "
        "(commands still run through the metadata mailbox).",
    )


class GcpLoadBalancer(CloudOptions):
    CLOUD: ClassVar[str] = "gcp"

    dns_zone: str | None = Field(
        default=None,
        pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="The Cloud DNS managed zone for the record (default: found by domain suffix).",
    )


GCS_BUCKET_NAME = Rule(
    "Cloud Storage", "400 invalid (bucket name)", "https://cloud.google.com/storage/docs/naming-buckets"
)
GCP_LABELS = Rule(
    "Google Cloud", "400 invalid (labels)", "https://cloud.google.com/compute/docs/labeling-resources#requirements"
)
RULES = (GCS_BUCKET_NAME, GCP_LABELS)
GCP_MAX_LABELS = 64
GCP_MAX_LABEL = 63
_GOOGLE_LIKE = re.compile(r"g[o0][o0]gle")


def gcs_bucket_problem(name: str) -> str | None:
    if cloudlimits.ip_like(name):
        return "formatted as an IP address"
    if name.startswith("goog"):
        return "the prefix 'goog'"
    if _GOOGLE_LIKE.search(name):
        return "'google' or a misspelling of it"
    return None


def _bucket(spec: EnvSpec) -> list[InitErrorDetails]:
    return cloudlimits.bucket(spec, gcs_bucket_problem, GCS_BUCKET_NAME)


def _labels(spec: EnvSpec) -> list[InitErrorDetails]:
    """The labels gcp_labels folds the tag set into: at most 64, each key and value at most 63."""
    out: list[InitErrorDetails] = []
    seen: dict[str, str] = {}
    for key in sorted(spec.tags):
        if key == "Name":
            continue  # the resource's name, not a label
        label = gcp_label_key(key)
        if label in seen:
            msg = f"tags {seen[label]!r} and {key!r} are both the label {label!r} on Google Cloud: keep one"
            out.append(refusal(("tags", key), key, msg, GCP_LABELS))
        seen.setdefault(label, key)
        # Folding cuts at 63 to keep the API from refusing; a cut would merge keys or lose the value.
        if len(long_key := gcp_label_uncut(key, key=True)) > GCP_MAX_LABEL:
            msg = f"tag key {key!r} is {len(long_key)} characters as a label; Google allows {GCP_MAX_LABEL}"
            out.append(refusal(("tags", key), key, msg, GCP_LABELS))
        if len(folded := gcp_label_uncut(spec.tags[key], key=False)) > GCP_MAX_LABEL:
            msg = f"tag {key!r}: the value is {len(folded)} characters as a label; Google allows {GCP_MAX_LABEL}"
            out.append(refusal(("tags", key), spec.tags[key], msg, GCP_LABELS))
    total = len(gcp_labels(cloudlimits.logical_tags(spec)))
    if total > GCP_MAX_LABELS:
        msg = f"{total} labels per resource with vmplane's {len(VMPLANE_TAG_NAMES)}; Google allows {GCP_MAX_LABELS}"
        out.append(refusal(("tags",), len(spec.tags), msg, GCP_LABELS))
    return out


def _starter_problem(region: str, project: str) -> str | None:
    if not cloudlimits.region_like(region):
        return f"region {region!r} is not a region name like 'us-central1'"
    if not _GCP_PROJECT_RE.fullmatch(project):
        return f"project {project!r} is not a Google Cloud project id"
    return None


SPEC = CloudSpec(
    name="gcp",
    label="Google Cloud",
    provider=GcpProvider,
    exec_mode=ExecMode.OSConfig,
    cert_source=CertSource.GCPManaged,
    secret_stores=(SecretStore.gcp_sm,),
    network_id=IdPattern(rf"{_GCP_NAME}|{_GCP_PREFIX}/global/networks/{_GCP_NAME}", "a VPC network name or self-link"),
    subnet_id=IdPattern(rf"{_GCP_NAME}|{_GCP_PREFIX}/regions/[a-z0-9-]+/subnetworks/{_GCP_NAME}", "a subnetwork name"),
    # Google's Debian images do not run cloud-init (the bootstrap's carrier); its Ubuntu images do.
    fill_pool=_plain({"instanceType": "e2-small", "image": "ubuntu-24.04"}),
    exec_options=GcpExec,
    lb_options=GcpLoadBalancer,
    moved=(Moved("exec", "interactive"), Moved("loadBalancer", "dnsZone")),
    checks=(_labels, _bucket),
    starter=Starter(
        provider="""    "cloud": "gcp",
    "project": __PROJECT__, // your Google Cloud project id
    "region": __REGION__,""",
        network="A new private VPC network with Cloud NAT egress: VMs get no public IPs, port 22 is never opened.",
        machine="""      "instanceType": "e2-small",
      "image": "ubuntu-24.04", // an image family or image; Google's Debian images do not run cloud-init""",
        secrets=("gcp-sm:db-password", "gcp-sm:api-key/versions/2"),
        default_region="us-central1",
        check=_starter_problem,
    ),
)
