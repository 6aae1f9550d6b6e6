"""What the Proxmox VE driver can do, with no API client import: `vmplane validate` checks a file against
it (the driver declares the same object and answers the same problems)."""

from __future__ import annotations

from vmplane.clouds.base import Capabilities, TagRules, capability_problems
from vmplane.clouds.tags import PROXMOX_TAG
from vmplane.envspec.models import Cloud, EnvSpec, ExecMode

EXEC_SCRIPT_BYTES = 48 * 1024  # the largest script one guest-agent exec carries (agent_exec.py enforces it)
USER_DATA_BYTES = 256 * 1024

CAPABILITIES = Capabilities(
    pool_modes=frozenset({"fixed"}),
    load_balancers=False,
    cert_sources=frozenset(),
    instance_refresh=False,
    exec_modes=frozenset({ExecMode.QemuGuestAgent}),
    exec_payload_bytes=EXEC_SCRIPT_BYTES,
    user_data_bytes=USER_DATA_BYTES,
    tags=TagRules(style="tokens", key_pattern=PROXMOX_TAG, max_key=40, max_value=60),
    schedules=False,
    drift=True,  # clouds/proxmox/drift.py reads it, repair.py repairs it
    pool_mode_refusals={
        "asg": "Proxmox VE has no cloud autoscaler, so 'asg' pools cannot run there; use mode 'fixed' with a size"
    },
)


def static_problems(spec: EnvSpec) -> list[str]:
    """The capability check (an `asg` pool refused in Proxmox VE's words, from `pool_mode_refusals`)."""
    return capability_problems(spec, CAPABILITIES, Cloud.proxmox)
