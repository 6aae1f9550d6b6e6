"""What the Google Cloud driver can do, with no Google client import: `vmplane validate` checks a file
against it (the driver declares the same object, and adds the checks of its image references)."""

from __future__ import annotations

from vmplane.clouds.base import Capabilities, TagRules, capability_problems
from vmplane.clouds.gcp import schedule_policy
from vmplane.clouds.tags import GCP_LABEL_KEY
from vmplane.envspec.models import CertSource, Cloud, EnvSpec, ExecMode

EXEC_SCRIPT_BYTES = 48 * 1024  # the largest script one OS Config exec carries (gcp/exec.py enforces it)
# Instance metadata values are at most 256 KB; cloud-init's user-data is one of them.
USER_DATA_BYTES = 256 * 1024

CAPABILITIES = Capabilities(
    pool_modes=frozenset({"fixed", "asg"}),
    load_balancers=True,
    cert_sources=frozenset({CertSource.GCPManaged}),
    instance_refresh=True,  # a MIG's rolling update
    exec_modes=frozenset({ExecMode.OSConfig}),
    exec_payload_bytes=EXEC_SCRIPT_BYTES,
    user_data_bytes=USER_DATA_BYTES,
    tags=TagRules(style="key_value", key_pattern=GCP_LABEL_KEY, max_key=63, max_value=63),
    schedules=True,  # instance schedule policies (Fixed), autoscaler scaling schedules (MIGs)
    drift=True,  # clouds/gcp/drift.py reads it, repair.py (stepRepairDrift) repairs it
)


def static_problems(spec: EnvSpec) -> list[str]:
    """The capability check and the schedules' rules, each naming the field."""
    return capability_problems(spec, CAPABILITIES, Cloud.gcp) + schedule_policy.problems(spec)
