"""Every name the GCP driver gives a resource, in one place: steps create with these, plans show these,
teardown and the leftover scan find by these.

Most compute resources take no labels, so a deterministic name (unique per project and scope) plus the
tag set in `description` is how vmplane knows a resource is its own. Names follow Google's rule
`[a-z]([-a-z0-9]{0,61}[a-z0-9])?`.
"""

from __future__ import annotations

import re

from vmplane.clouds.naming import digest, fit
from vmplane.envspec.models import EnvSpec

MAX_NAME = 63
NAME_RE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def _name(*parts: str) -> str:
    return fit("-".join(p for p in parts if p), MAX_NAME)


def valid(name: str) -> bool:
    return NAME_RE.fullmatch(name) is not None


def prefix(spec: EnvSpec) -> str:
    """What every resource name of the environment starts with (the leftover scan's first filter)."""
    return f"{spec.name}-"


def network(spec: EnvSpec) -> str:
    return _name(spec.name, "net")


def subnetwork(spec: EnvSpec) -> str:
    return _name(spec.name, "vms")


def router(spec: EnvSpec) -> str:
    return _name(spec.name, "router")


def nat(spec: EnvSpec) -> str:
    return _name(spec.name, "nat")


def network_tag(spec: EnvSpec) -> str:
    """The network tag on every VM; firewall rules target it."""
    return _name(spec.name, "vm")


def firewall(spec: EnvSpec, purpose: str) -> str:
    """`vpc` (ingressPorts from the VPC), `health` (Google's health checkers), `iap` (TCP 22 from IAP)."""
    return _name(spec.name, "allow", purpose)


def service_account_id(spec: EnvSpec) -> str:
    """IAM account ids are 6-30 characters, unique per project: env head + a digest of org/env."""
    head = spec.name[:18].rstrip("-")
    return f"vmp-{head}-{digest(f'{spec.org}/{spec.name}', 6)}"


def service_account_email(spec: EnvSpec, project: str) -> str:
    return f"{service_account_id(spec)}@{project}.iam.gserviceaccount.com"


def template(spec: EnvSpec, pool: str, version: int) -> str:
    """Instance templates are immutable: each change is a new version with its own name."""
    return _name(spec.name, pool, f"v{version}")


def instance(spec: EnvSpec, pool: str, index: int) -> str:
    """Fixed-pool VMs: one name per slot (`<env>-<pool>-<i>`), so a re-run finds the VM it made. It is
    also the VM record's `Name` for good; the instance itself is `rotated` to a new name."""
    return _name(spec.name, pool, str(index))


def rotated(spec: EnvSpec, pool: str, index: int, version: int) -> str:
    """The replacement a rotation makes for slot `index` from template v`version`. An instance name is
    unique per zone and the replacement runs beside the VM it replaces, so it cannot take the old name;
    deterministic, so a re-run after a crash finds the replacement it inserted instead of adding one."""
    return _name(spec.name, pool, str(index), f"v{version}")


def mig(spec: EnvSpec, pool: str) -> str:
    return _name(spec.name, pool, "mig")


def mig_base_instance_name(spec: EnvSpec, pool: str) -> str:
    """A MIG names its VMs `<base>-<4 random characters>`; the base is at most 58 characters."""
    return _name(spec.name, pool)[:58].rstrip("-")


def autoscaler(spec: EnvSpec, pool: str) -> str:
    return _name(spec.name, pool, "as")


def schedule_policy(spec: EnvSpec, pool: str, digest: str) -> str:
    """A Fixed pool's instance schedule. Google cannot change a policy that VMs follow, so a new schedule is
    a new policy: the schedule's digest is part of the name."""
    return _name(spec.name, pool, "sched", digest)


def instance_group(spec: EnvSpec, zone: str) -> str:
    """Fixed pools reach a backend service through one unmanaged instance group per zone."""
    return _name(spec.name, "ig", zone.rsplit("-", 1)[-1])


def health_check(spec: EnvSpec) -> str:
    return _name(spec.name, "hc")


def backend_service(spec: EnvSpec) -> str:
    return _name(spec.name, "backend")


def url_map(spec: EnvSpec) -> str:
    return _name(spec.name, "https")


def redirect_url_map(spec: EnvSpec) -> str:
    return _name(spec.name, "http-redirect")


def certificate(spec: EnvSpec, domain: str) -> str:
    """A managed certificate covers fixed domains and cannot change: a new domain is a new certificate."""
    return _name(spec.name, "cert", digest(domain))


def https_proxy(spec: EnvSpec) -> str:
    return _name(spec.name, "https-proxy")


def http_proxy(spec: EnvSpec) -> str:
    return _name(spec.name, "http-proxy")


def address(spec: EnvSpec) -> str:
    return _name(spec.name, "ip")


def https_rule(spec: EnvSpec) -> str:
    return _name(spec.name, "https-443")


def http_rule(spec: EnvSpec) -> str:
    return _name(spec.name, "http-80")
