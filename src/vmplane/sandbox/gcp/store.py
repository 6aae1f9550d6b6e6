"""The emulated projects: every resource as the JSON Google would return, keyed by its path in the project.

A compute resource's key is its path below `projects/P/` (`global/networks/n`, `zones/z/instances/i`);
its selfLink is that key under `https://www.googleapis.com/compute/v1/projects/P/`. Keys starting with
`_` are the sandbox's own bookkeeping (guest attributes, group members) and never leave the server.
One lock serialises every request: the sandbox favours simple, obviously consistent state over speed.
"""

from __future__ import annotations

import base64
import itertools
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from vmplane.sandbox.gcp.errors import invalid

COMPUTE = "https://www.googleapis.com/compute/v1/"
DEFAULT_PROJECT = "vmplane-sandbox"
NAME_RE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
# Full (either host), partial (projects/P/...) or scope-relative (global/..., zones/z/...) compute URLs.
_REF = re.compile(
    r"(?:https?://(?:www\.googleapis\.com|compute\.googleapis\.com)/compute/v1/)?"
    r"(?:projects/(?P<project>[^/]+)/)?"
    r"(?P<key>(?:global|regions/[^/]+|zones/[^/]+)/[A-Za-z]+/[^/]+(?:/[^/]+)?)"
)

Resource = dict[str, Any]


@dataclass
class Project:
    id: str
    number: str
    compute: dict[str, Resource] = field(default_factory=dict)
    operations: dict[str, Resource] = field(default_factory=dict)  # key "zones/z/operations/name"
    request_ids: dict[str, str] = field(default_factory=dict)  # requestId -> operation key
    dns_zones: dict[str, Resource] = field(default_factory=dict)
    dns_records: dict[str, dict[tuple[str, str], Resource]] = field(default_factory=dict)  # zone -> (name, type)
    dns_changes: dict[str, dict[str, Resource]] = field(default_factory=dict)
    service_accounts: dict[str, Resource] = field(default_factory=dict)  # email -> account
    policy: Resource = field(default_factory=dict)
    # Secret Manager: secret id -> secret (its versions and IAM policy under `_` keys, secretmanager.py),
    # and every access of a payload, who read which version (`GET /_sandbox/secret-accesses`)
    secrets: dict[str, Resource] = field(default_factory=dict)
    secret_accesses: list[Resource] = field(default_factory=list)
    next_public_ip: int = 1  # global addresses come from 203.0.113.0/24 (TEST-NET-3, RFC 5737)


class State:
    """Everything the sandbox holds; `reset()` forgets it all (projects come back on first use)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.guest_mode = "auto"
        self.page_size = 0  # POST /_sandbox/page-size: a ceiling on every compute list's page (0: Google's)
        self.projects: dict[str, Project] = {}
        # operation selfLink -> what happens when it completes (an instance reaching RUNNING, ...)
        self.op_hooks: dict[str, list[Callable[[], None]]] = {}
        # operation selfLink -> the error fields it ends with (operations.fail)
        self.op_errors: dict[str, Resource] = {}
        # Cloud Storage: bucket names are global (not per project); each object name keeps its generations,
        # oldest first, the live one last unless it carries `timeDeleted` (storage.py).
        self.buckets: dict[str, Resource] = {}
        self.objects: dict[str, dict[str, list[Resource]]] = {}
        self._generation = 0
        self._ids = itertools.count(int(time.time() * 1000) % 10**12 * 1000)

    def reset(self) -> None:
        with self.lock:
            self.projects.clear()
            self.op_hooks.clear()
            self.op_errors.clear()
            self.buckets.clear()
            self.objects.clear()
            self.guest_mode = "auto"
            self.page_size = 0

    def new_id(self) -> str:
        """A uint64 as a string of digits, as the schema's `format: uint64` demands."""
        return str(next(self._ids) * 7919 % 2**63 + 2**60)

    def new_generation(self) -> int:
        """A Cloud Storage generation: microseconds since the epoch, as Google's, and strictly increasing."""
        self._generation = max(self._generation + 1, time.time_ns() // 1000)
        return self._generation

    def project(self, project_id: str) -> Project:
        """Any valid project id a request names exists; it is created, seeded, on first use."""
        found = self.projects.get(project_id)
        if found is None:
            from vmplane.sandbox.gcp.seed import seed_project

            found = Project(id=project_id, number=str(100000000000 + len(self.projects)))
            self.projects[project_id] = found
            seed_project(self, found)
        return found


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fingerprint() -> str:
    return base64.b64encode(secrets.token_bytes(8)).decode()


def self_link(project: str, key: str) -> str:
    return f"{COMPUTE}projects/{project}/{key}"


def scope_key(params: dict[str, str]) -> str:
    """`zones/z`, `regions/r` or `global`, from a compute method's path parameters."""
    if "zone" in params:
        return f"zones/{params['zone']}"
    if "region" in params:
        return f"regions/{params['region']}"
    return "global"


def parse_ref(value: str, project: str, field_name: str) -> tuple[str, str]:
    """(project, key) of a compute reference given as a full, partial or scope-relative URL."""
    found = _REF.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise invalid(f"Invalid value for field '{field_name}': '{value}'. The URL is malformed.")
    return found.group("project") or project, found.group("key")


def check_name(name: Any, where: str = "resource.name") -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise invalid(
            f"Invalid value for field '{where}': '{name}'. "
            "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'"
        )
    return name


LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")


def check_labels(labels: Any, where: str = "resource.labels") -> None:
    if not labels:
        return
    if len(labels) > 64:
        raise invalid(f"Invalid value for field '{where}': at most 64 labels are allowed, got {len(labels)}")
    for key, value in labels.items():
        if not LABEL_KEY.fullmatch(key):
            raise invalid(f"Invalid value for field '{where}': label key '{key}' violates format constraints.")
        if not LABEL_VALUE.fullmatch(value):
            raise invalid(f"Invalid value for field '{where}.{key}': '{value}' violates format constraints.")


def public(resource: Resource) -> Resource:
    """The resource as Google shows it: without the sandbox's `_` bookkeeping."""
    return {k: v for k, v in resource.items() if not k.startswith("_")}
