"""What the AWS driver can do, with no SDK import: `vmplane validate` checks a file against it without
loading boto3 (the driver declares the same object)."""

from __future__ import annotations

from vmplane.clouds.aws.secret_policy import estimated_grants, size_problem
from vmplane.clouds.base import Capabilities, TagRules, capability_problems
from vmplane.clouds.tags import AWS_TAG_KEY
from vmplane.envspec.models import CertSource, Cloud, EnvSpec, ExecMode
from vmplane.envspec.secrets import secret_refs

EXEC_SCRIPT_BYTES = 48 * 1024  # the largest script one SSM Run Command carries (aws/exec.py enforces it)
USER_DATA_BYTES = 16384  # EC2's limit on user-data before base64

CAPABILITIES = Capabilities(
    pool_modes=frozenset({"fixed", "asg"}),
    load_balancers=True,
    cert_sources=frozenset({CertSource.AWSACM}),
    instance_refresh=True,
    exec_modes=frozenset({ExecMode.SSM}),
    exec_payload_bytes=EXEC_SCRIPT_BYTES,
    user_data_bytes=USER_DATA_BYTES,
    tags=TagRules(style="key_value", key_pattern=AWS_TAG_KEY, max_key=128, max_value=256),
    schedules=True,
    drift=True,  # clouds/aws/drift.py reads, clouds/aws/repair.py repairs
)


def static_problems(spec: EnvSpec) -> list[str]:
    """What `spec` asks that the AWS driver cannot do, each naming the field; and a secrets policy that
    could not fit IAM's limit even before the cloud names the keys (precheck sees the real one)."""
    out = capability_problems(spec, CAPABILITIES, Cloud.aws)
    too_big = size_problem(estimated_grants(secret_refs(spec), spec.provider.region), spec.provider.region)
    return out + ([too_big] if too_big else [])
