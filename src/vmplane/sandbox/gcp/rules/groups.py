"""Rules on managed instance groups and instance groups' named ports."""

from __future__ import annotations

import re

from vmplane.sandbox.gcp.compute import Call
from vmplane.sandbox.gcp.compute_catalogue import REGIONS
from vmplane.sandbox.gcp.rules import Step, bad, body, rule
from vmplane.sandbox.gcp.rules.examples import ZONE, P, mig, net, post, sub, template

_MIG_DOC = "https://cloud.google.com/compute/docs/reference/rest/v1/regionInstanceGroupManagers"
_MIG = (
    "compute.regionInstanceGroupManagers.insert",
    "compute.regionInstanceGroupManagers.patch",
    "compute.regionInstanceGroupManagers.update",
)
# InstanceGroupManager.baseInstanceName's @pattern in compute.v1: at most 58 characters (or a `-###` suffix).
_BASE = re.compile(r"[a-z](([-a-z0-9]{0,57})|([-a-z0-9]{0,51}-#{1,10}(\[[0-9]{1,10}\])?))")
_NAME = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
_SURGE_DOC = "https://cloud.google.com/compute/docs/instance-groups/rolling-out-updates-to-managed-instance-groups"


def _base_name(call: Call) -> None:
    given = body(call).get("baseInstanceName")
    if given is not None and not _BASE.fullmatch(str(given)):
        raise bad(
            "resource.baseInstanceName", given, "Must be a match of regex '[a-z](([-a-z0-9]{0,57})|(...-#{1,10}))'"
        )


def _target_size(call: Call) -> None:
    given = body(call).get("targetSize")
    if given is not None and int(given) < 0:
        raise bad("resource.targetSize", given, "Must be greater than or equal to 0")


def _surge(call: Call) -> None:
    """A regional MIG's fixed maxSurge/maxUnavailable: 0 or at least its number of zones."""
    given = body(call)
    policy = given.get("updatePolicy") or {}
    stored = call.project.compute.get(call.key) if not call.method.id.endswith(".insert") else None
    spread = (given.get("distributionPolicy") or (stored or {}).get("distributionPolicy") or {}).get("zones")
    zones = len(spread or REGIONS.get(call.params.get("region", ""), ()))
    for name in ("maxSurge", "maxUnavailable"):
        fixed = (policy.get(name) or {}).get("fixed")
        if fixed is not None and 0 < int(fixed) < zones:
            raise bad(
                f"resource.updatePolicy.{name}.fixed",
                fixed,
                f"Fixed {name} for a regional managed instance group must be 0 or at least the number of zones "
                f"({zones}).",
            )


def _versions(call: Call) -> None:
    versions = body(call).get("versions") or []
    unsized = [v for v in versions if isinstance(v, dict) and not v.get("targetSize")]
    if len(versions) > 1 and len(unsized) != 1:
        raise bad("resource.versions", len(versions), "Exactly one version must leave the targetSize field unset.")


def _named_ports(call: Call) -> None:
    for i, port in enumerate(body(call).get("namedPorts") or []):
        if not _NAME.fullmatch(str(port.get("name", ""))):
            raise bad(f"namedPorts[{i}].name", port.get("name"), "Must be an RFC 1035 name.")
        if not 1 <= int(port.get("port", 0)) <= 65535:
            raise bad(f"namedPorts[{i}].port", port.get("port"), "The port number must be between 1 and 65535.")


_SETUP = (net(), sub(), template())
_VERSIONS = [
    {"instanceTemplate": "global/instanceTemplates/t1", "targetSize": {"fixed": 1}},
    {"instanceTemplate": "global/instanceTemplates/t1", "targetSize": {"fixed": 1}},
]

for _id, _methods, _summary, _source, _example, _check in (
    (
        "compute.mig-base-name",
        _MIG,
        "a MIG `baseInstanceName` over 58 characters (or not an RFC 1035 prefix)",
        _MIG_DOC,
        (*_SETUP, mig(baseInstanceName="b" * 59)),
        _base_name,
    ),
    (
        "compute.mig-target-size",
        _MIG,
        "a negative MIG target size",
        _MIG_DOC,
        (*_SETUP, mig(targetSize=-1)),
        _target_size,
    ),
    (
        "compute.mig-surge-zones",
        _MIG,
        "a regional MIG's fixed maxSurge or maxUnavailable between 1 and its number of zones - 1",
        _SURGE_DOC,
        (*_SETUP, mig(updatePolicy={"type": "PROACTIVE", "maxSurge": {"fixed": 1}})),
        _surge,
    ),
    (
        "compute.mig-versions-one-unsized",
        _MIG,
        "several MIG versions where not exactly one leaves targetSize unset",
        _MIG_DOC,
        (*_SETUP, mig(versions=_VERSIONS)),
        _versions,
    ),
    (
        "compute.named-port-values",
        ("compute.instanceGroups.setNamedPorts", "compute.regionInstanceGroups.setNamedPorts"),
        "a named port whose name is not an RFC 1035 name or whose port is outside 1..65535",
        "https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroups/setNamedPorts",
        (
            net(),
            post(f"/zones/{ZONE}/instanceGroups", {"name": "g1", "network": "global/networks/n1"}),
            Step(
                "POST",
                P + f"/zones/{ZONE}/instanceGroups/g1/setNamedPorts",
                {"namedPorts": [{"name": "http", "port": 0}]},
            ),
        ),
        _named_ports,
    ),
):
    rule(_id, _methods, _summary, _source, "400 invalid", "200", _example, _check)
