"""Shared pieces of the Google Cloud stack: versions, names, labels and descriptions, what it refuses."""

from __future__ import annotations

from typing import Any

from vmplane.clouds.gcp import schedule_policy
from vmplane.envspec.models import EnvSpec
from vmplane.tf.hcl import Expr, Value
from vmplane.tf.inputs import SECRETS_NOTE, InputNotes

PROVIDER_VERSION = "~> 6.0"
TF_VERSION = ">= 1.6"
E = Expr
OWNER = "${local.identity.org}/${local.identity.name}"
# GCP names are at most 63 characters and project-wide: "<env>-<6 hex of org/env>" keeps two orgs'
# environments of the same name apart and leaves room for a pool name and a suffix (see NAME_ROOM).
BASE = "${local.base}"
# Longest names: the unmanaged group "<base>-<pool>-<zone index>" (env + 7 + 1 + pool + 2) and the VM
# "<env>-<pool>-<index>" (env + pool + 4); both fit in 63 when env + pool is at most 53.
NAME_ROOM = 53
# Where Google's load balancers and health checks connect from (documented ranges), and IAP TCP forwarding.
GFE_RANGES = ["130.211.0.0/22", "35.191.0.0/16"]
IAP_RANGE = "35.235.240.0/20"
VM_ROLES = ["roles/logging.logWriter", "roles/monitoring.metricWriter"]
# The spec's image aliases and the public image family they mean, per arch. Anything else is passed to
# the provider as written (an image or family path, e.g. projects/debian-cloud/global/images/family/debian-12).
IMAGE_FAMILIES = {
    "debian-12": {"amd64": "debian-cloud/debian-12", "arm64": "debian-cloud/debian-12-arm64"},
    "debian-13": {"amd64": "debian-cloud/debian-13", "arm64": "debian-cloud/debian-13-arm64"},
    "ubuntu-24.04": {
        "amd64": "ubuntu-os-cloud/ubuntu-2404-lts-amd64",
        "arm64": "ubuntu-os-cloud/ubuntu-2404-lts-arm64",
    },
    "ubuntu-22.04": {"amd64": "ubuntu-os-cloud/ubuntu-2204-lts", "arm64": "ubuntu-os-cloud/ubuntu-2204-lts-arm64"},
}

NOTES = InputNotes(
    runtime=(
        "Runtime inputs: changing these pushes files and variables to the running VMs through the\n"
        "exec channel (vmplane), without replacing any VM. Kept in Secret Manager by this stack.\n" + SECRETS_NOTE
    ),
    vm=(
        "VM inputs: changing these makes a new instance template. Auto-scaled pools roll onto it (one extra\n"
        "VM per zone at a time, none taken away first) unless pinTemplateVersion is set; Fixed VMs are not\n"
        "replaced by `terraform apply`: replace them one at a time (vmplane rotate, or -replace per VM)."
    ),
)


def interactive(spec: EnvSpec) -> bool:
    """Whether the stack opens TCP 22 from IAP's range (`exec.gcp.interactive`, true unless set false)."""
    return spec.exec_interactive


def unsupported(spec: EnvSpec) -> str | None:
    if spec.network.existing_vpc_id:
        return "network.existingVpcId (existingNetwork): the generated GCP stack creates its own network"
    if spec.state is not None and spec.state.region:
        return "state.region: a GCS bucket has its own location; the gcs backend takes none (leave it out)"
    # The stack's autoscalers always follow CPU (Google's default 60 % without targetCpuPercent), so only
    # the window's length can be refused.
    problems = schedule_policy.problems(spec, cpu_signal=True)
    if problems:
        return problems[0]
    for name in sorted(spec.pools):
        if len(spec.name) + len(name) > NAME_ROOM:
            return (
                f"pools.{name}: with environment {spec.name!r} its GCP names (e.g. {spec.name}-{name}-0) "
                f"would pass 63 characters; keep name + pool name within {NAME_ROOM}"
            )
    return None


def labels(role: str) -> Value:
    """The environment's label set (tags folded into GCP's label alphabet) with this resource's role."""
    return E(f'merge(local.labels, {{ (local.role_label) = "{role}" }})')


def description(what: str, limit: int = 2048) -> Value:
    """For resources without labels: what it is, then the full tag set (GCP caps descriptions)."""
    return E(f'substr("vmplane {what} of {OWNER}; tags: ${{jsonencode(local.tags)}}", 0, {limit})')


def label_locals() -> dict[str, Any]:
    """The tag set, and the same set as GCP labels, folded in HCL as `clouds.tags.gcp_labels` folds it
    (camelCase to snake_case, anything outside [a-z0-9_-] to `_`, trimmed, 63 chars, keys start with a
    letter): computed here, not in Python, so a tag edit changes only the inputs file (a test compares)."""
    # `$${1}` is `${1}` escaped: a bare `$1_` would name a (missing) capture group "1_".
    snake = 'lower(replace(s, "/([a-z0-9])([A-Z])/", "$${1}_$${2}"))'
    fold = f'substr(trim(replace({snake}, "/[^a-z0-9_-]+/", "_"), "_"), 0, 63)'
    return {
        "tags": E(
            "merge(local.cloud.tags, {\n"
            '    "${local.prefix}orgId"     = local.identity.org\n'
            '    "${local.prefix}jobId"     = local.stack_id\n'
            '    "${local.prefix}managedBy" = "vmplane"\n'
            '    "${local.prefix}env"       = local.identity.name\n'
            "  })"
        ),
        "folded": E(
            "{\n"
            "    for s in distinct(concat(keys(local.tags), values(local.tags), [local.role_key])) :\n"
            f"    s => {fold}\n"
            "  }"
        ),
        "label_keys": E(
            "{\n"
            "    for k in distinct(concat(keys(local.tags), [local.role_key])) :\n"
            '    k => can(regex("^[a-z]", local.folded[k])) ? local.folded[k] : substr("k${local.folded[k]}", 0, 63)\n'
            "  }"
        ),
        "labels": E('{ for k, v in local.tags : local.label_keys[k] => local.folded[v] if k != "Name" }'),
        "role_label": E("local.label_keys[local.role_key]"),
    }
