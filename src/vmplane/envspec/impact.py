"""What a change to an environment file does to the running environment.

Every field path of the spec has one impact class, decided by where its value ends up:
- runtime: workload settings, pushed to running VMs through the exec channel;
- vm: baked into the launch template (image, type, disk, user-data): a new template version, and the
  running VMs are replaced only by an explicit `vmplane rotate`;
- cloud: a cloud resource updated in place (security group rules, group sizes, LB settings);
- identity: what the environment is (name, org, cloud, network shape): cannot change in place.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Impact(StrEnum):
    runtime = "runtime"
    vm = "vm"
    cloud = "cloud"
    identity = "identity"


CONSEQUENCE = {
    Impact.runtime: "pushed to the running VMs through the exec channel; nothing is replaced",
    Impact.vm: "new launch template version; running VMs are not replaced until `vmplane rotate`",
    Impact.cloud: "updated in place",
    Impact.identity: "cannot change in place: destroy the environment and apply it again",
}

# First match wins; `*` is one path segment (a pool name, a tag key, a file path).
RULES: list[tuple[str, Impact]] = [
    ("$schema", Impact.runtime),  # editor hint only
    ("name", Impact.identity),
    ("org", Impact.identity),
    ("provider", Impact.identity),
    ("provider.*", Impact.identity),  # every cloud's: region, profile, project, endpoint, node(s), TLS
    ("tagPrefix", Impact.identity),
    ("network.cidr", Impact.identity),
    ("network.zones", Impact.identity),
    ("network.existingVpcId", Impact.identity),
    ("network.existingPrivateSubnetIds", Impact.identity),
    ("network.existingNetwork", Impact.identity),  # synonyms: recorded under the two keys above
    ("network.existingSubnets", Impact.identity),
    ("network.ingressPorts", Impact.cloud),
    ("exec.mode", Impact.identity),  # the IAM role and channel the VMs were built with
    ("exec.*.interactive", Impact.cloud),  # GCP: the IAP firewall rule, changed in place
    ("exec.*", Impact.cloud),  # a cloud's exec options added or removed
    ("pools.*.mode", Impact.identity),
    ("pools.*.image", Impact.vm),
    ("pools.*.instanceType", Impact.vm),
    ("pools.*.arch", Impact.vm),
    ("pools.*.diskGb", Impact.vm),
    ("pools.*.*.template", Impact.vm),  # Proxmox: what new VMs are cloned from
    ("pools.*.*.cores", Impact.vm),
    ("pools.*.*.memoryMb", Impact.vm),
    ("pools.*.size", Impact.cloud),
    ("pools.*.min", Impact.cloud),
    ("pools.*.max", Impact.cloud),
    ("pools.*.desired", Impact.cloud),
    ("pools.*.targetCpuPercent", Impact.cloud),
    ("pools.*.pinTemplateVersion", Impact.cloud),
    ("pools.*.schedule", Impact.cloud),  # the cloud's scheduled actions, changed in place
    ("pools.*.schedule.*", Impact.cloud),
    ("pools.*", Impact.cloud),  # a pool added or removed
    ("pools.*.*", Impact.vm),  # a cloud's pool options added or removed: what new VMs are made from
    ("bootstrap.mode", Impact.vm),  # rendered into user-data
    # Not a spec field: the current vmconfig manifest of a (kind, arch) a pool uses, also in user-data.
    ("vmconfig.*.*", Impact.vm),
    ("bootstrap.timeoutSeconds", Impact.cloud),
    ("tags", Impact.cloud),
    ("tags.*", Impact.cloud),
    ("runtime.env", Impact.runtime),
    ("runtime.env.*", Impact.runtime),
    ("runtime.files", Impact.runtime),
    ("runtime.files.*", Impact.runtime),
    # A reference changed (another secret, another pinned version): the VMs fetch it at the next push.
    ("runtime.env.*.secret", Impact.runtime),
    ("runtime.files.*.secret", Impact.runtime),
    ("state", Impact.identity),  # where the stack's state lives: moving it is not an in-place change
    ("state.*", Impact.identity),
    ("loadBalancer", Impact.cloud),
    ("loadBalancer.*.dnsZone", Impact.cloud),
    ("loadBalancer.*.*", Impact.cloud),  # a cloud's own load balancer options
    ("loadBalancer.*", Impact.cloud),
    ("loadBalancer.healthCheck.*", Impact.cloud),
]


def classify(path: str) -> Impact | None:
    for pattern, impact in RULES:
        if fnmatch.fnmatchcase(path, pattern) and path.count(".") == pattern.count("."):
            return impact
    return None


@dataclass(frozen=True)
class Change:
    path: str
    old: Any
    new: Any
    impact: Impact

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "old": self.old, "new": self.new, "impact": self.impact.value}


# Objects whose keys the user chooses (pool names, tag keys, variable names, file paths): their keys are
# matched as `*`, and shown in brackets where they are not plain words.
USER_KEYED = {"pools", "tags", "runtime.env", "runtime.files"}


def diff(old: dict[str, Any], new: dict[str, Any], prefix: str = "", pattern: str = "") -> list[Change]:
    """Changed leaves between two spec documents (as `spec_json` writes them), with their impact.
    An object added or removed as a whole (a pool, a tag, the load balancer) is one change."""
    out: list[Change] = []
    user_keyed = pattern in USER_KEYED
    for key in sorted(set(old) | set(new)):
        shown = key if _WORD.fullmatch(key) else f'["{key}"]'
        path = f"{prefix}{'' if shown.startswith('[') or not prefix else '.'}{shown}"
        sub_pattern = f"{pattern}.{'*' if user_keyed else key}" if pattern else key
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(diff(a, b, path, sub_pattern))
            continue
        impact = classify(sub_pattern)
        if impact is None:
            raise KeyError(f"no impact class for {path}")
        out.append(Change(path, a, b, impact))
    return out


_WORD = re.compile(r"[A-Za-z0-9_$-]+")
