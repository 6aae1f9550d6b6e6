"""Fault profiles: the real clouds' timing, injected into both sandboxes (`vmplane sandbox start --faults FILE`).

A profile (JSON with comments) names a `seed` and up to four faults:

- `visibility`: a resource created within the last `seconds` is invisible to requests that name it
  (AWS: `Invalid<Kind>ID.NotFound`; GCP: 404 on a get of it), for the `kinds` listed;
- `iamPropagation`: an instance profile (AWS) created within the last `seconds` is refused by
  RunInstances / CreateLaunchTemplate / CreateAutoScalingGroup as AWS refuses it, and so are its first
  `firstUses` uses however late they come (a loaded machine can take longer than `seconds` to get there);
- `throttle`: with probability `rate` a request starts a burst of `burst` throttled requests;
- `capacity`: with probability `rate` an instance launch fails for want of capacity in its zone.

Determinism: each (cloud, rule) pair draws from its own `random.Random` seeded by `seed` and the rule's
name, so the same seed and the same request sequence give the same faults. Visibility and IAM
propagation are by time, as on the clouds. Control paths (`/moto-api/`, `/_sandbox/`) are never faulted,
nor are clients that say NO_FAULTS_AGENT in their User-Agent.
Every injected fault is logged (logger `vmplane.sandbox.faults`) and tallied (`Injector.tally`), which the
AWS side serves at `/_sandbox/faults` and the GCP side at `/_sandbox/faults`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vmplane.envspec.jsonc import parse_jsonc
from vmplane.errors import VmplaneError

log = logging.getLogger("vmplane.sandbox.faults")

Cloud = Literal["aws", "gcp"]
# A client whose User-Agent carries this is never faulted: what inspects the emulator (the tests' own
# clients, the sandbox's seed) is not what is under test, and a throttled inspection would only be noise.
NO_FAULTS_AGENT = "vmplane-no-faults"
# What `visibility.kinds` may name: AWS resource id prefixes' kinds and GCP compute collections.
AWS_KINDS = {
    "vpc": "InvalidVpcID.NotFound",
    "subnet": "InvalidSubnetID.NotFound",
    "security-group": "InvalidGroup.NotFound",
    "internet-gateway": "InvalidInternetGatewayID.NotFound",
    "route-table": "InvalidRouteTableID.NotFound",
    "nat-gateway": "NatGatewayNotFound",
    "elastic-ip": "InvalidAllocationID.NotFound",
    "instance": "InvalidInstanceID.NotFound",
    "launch-template": "InvalidLaunchTemplateId.NotFound",
}
GCP_KINDS = ("networks", "subnetworks", "firewalls", "instances", "instanceTemplates", "addresses", "routers")


class ProfileError(VmplaneError):
    pass


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Visibility(_Rule):
    seconds: float = Field(ge=0, le=600)
    kinds: list[str] = Field(default_factory=lambda: [*AWS_KINDS, *GCP_KINDS])


class IamPropagation(_Rule):
    seconds: float = Field(ge=0, le=600)
    first_uses: int = Field(default=0, ge=0, le=5, alias="firstUses")


class Throttle(_Rule):
    rate: float = Field(ge=0, le=1)
    burst: int = Field(default=1, ge=1, le=5)  # botocore's standard mode gives up after 6 attempts


class Capacity(_Rule):
    rate: float = Field(ge=0, le=1)


class Profile(_Rule):
    seed: int
    visibility: Visibility | None = None
    iam_propagation: IamPropagation | None = Field(default=None, alias="iamPropagation")
    throttle: Throttle | None = None
    capacity: Capacity | None = None
    source: str = ""  # the file it came from (not a field of the file)

    def summary(self) -> dict[str, Any]:
        """What `vmplane sandbox status` shows: the file and its rules, as written."""
        return {"file": self.source, **self.model_dump(by_alias=True, exclude={"source"}, exclude_none=True)}


def load(path: Path) -> Profile:
    """The profile in `path`; every error names the file and the field."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ProfileError(f"{path}: cannot read the fault profile ({e.strerror})") from e
    try:
        data, _ = parse_jsonc(text)
    except Exception as e:  # the JSONC parser's own error names the line and column
        raise ProfileError(f"{path}: not JSON with comments: {e}") from e
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: a fault profile is an object")
    try:
        profile = Profile.model_validate({k: v for k, v in data.items() if k != "source"})
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ProfileError(f"{path}: {field}: {first['msg']}") from e
    unknown = set(profile.visibility.kinds if profile.visibility else []) - {*AWS_KINDS, *GCP_KINDS}
    if unknown:
        raise ProfileError(f"{path}: visibility.kinds: unknown {sorted(unknown)} (known: {[*AWS_KINDS, *GCP_KINDS]})")
    return profile.model_copy(update={"source": str(path.resolve())})


class Injector:
    """The faults of one sandbox process: draws, what was created when, and the tally."""

    def __init__(self, profile: Profile, clock: Callable[[], float] = time.monotonic) -> None:
        self.profile = profile
        self._clock = clock
        self._lock = threading.Lock()
        self._rngs: dict[str, random.Random] = {}
        self._burst: dict[Cloud, int] = {"aws": 0, "gcp": 0}
        self._born: dict[str, tuple[str, float]] = {}  # resource id/name -> (kind, created at)
        self._profiles: dict[str, float] = {}  # instance profile name -> created at
        self._refusals_left: dict[str, int] = {}  # instance profile name -> first uses still to refuse
        self.tally: Counter[str] = Counter()  # "<cloud>.<fault>" -> count
        self.events: list[dict[str, Any]] = []  # the latest injected faults, for the control endpoint

    def _rng(self, name: str) -> random.Random:
        if name not in self._rngs:
            self._rngs[name] = random.Random(f"{self.profile.seed}:{name}")
        return self._rngs[name]

    def throttled(self, cloud: Cloud) -> bool:
        rule = self.profile.throttle
        if rule is None:
            return False
        with self._lock:
            if self._burst[cloud] > 0:
                self._burst[cloud] -= 1
                return True
            if self._rng(f"{cloud}.throttle").random() < rule.rate:
                self._burst[cloud] = rule.burst - 1
                return True
            return False

    def out_of_capacity(self, cloud: Cloud) -> bool:
        rule = self.profile.capacity
        if rule is None:
            return False
        with self._lock:
            return self._rng(f"{cloud}.capacity").random() < rule.rate

    def created(self, kind: str, ident: str) -> None:
        rule = self.profile.visibility
        if rule is not None and kind in rule.kinds and rule.seconds > 0:
            with self._lock:
                self._born[ident] = (kind, self._clock())

    def invisible(self, ident: str) -> str | None:
        """The kind of `ident` if it was created too recently to be seen, else None."""
        rule = self.profile.visibility
        if rule is None:
            return None
        with self._lock:
            born = self._born.get(ident)
            if born is None:
                return None
            if self._clock() - born[1] >= rule.seconds:
                del self._born[ident]  # visible from now on: never invisible again
                return None
            return born[0]

    def profile_created(self, name: str) -> None:
        if self.profile.iam_propagation is not None:
            with self._lock:
                self._profiles[name] = self._clock()
                self._refusals_left[name] = self.profile.iam_propagation.first_uses

    def profile_unseen(self, name: str) -> bool:
        rule = self.profile.iam_propagation
        if rule is None:
            return False
        with self._lock:
            born = self._profiles.get(name)
            if born is None:
                return False
            if self._refusals_left.get(name, 0) > 0:
                self._refusals_left[name] -= 1
                return True
            return self._clock() - born < rule.seconds

    def record(self, cloud: Cloud, fault: str, operation: str, code: str, detail: str = "") -> None:
        with self._lock:
            self.tally[f"{cloud}.{fault}"] += 1
            self.events.append({"cloud": cloud, "fault": fault, "operation": operation, "code": code})
            del self.events[:-200]
        log.info("fault injected: %s %s on %s -> %s %s", cloud, fault, operation, code, detail)

    def report(self) -> dict[str, Any]:
        with self._lock:
            return {"profile": self.profile.summary(), "tally": dict(self.tally), "events": list(self.events)}
