"""Helpers shared by the unit tests: a recording `save`, contexts, spec variants, tag lookups."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from vmplane.clouds.base import Context, Tagger
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fixed.jsonc"
JOB_ID = "job-test-1"
REGION = "us-east-1"
ZONES = ["us-east-1a", "us-east-1b"]
SSM_POLICY_ARN = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"


class SaveRecorder:
    """A `Context.save` that counts calls and keeps a snapshot of the infra at each call."""

    def __init__(self) -> None:
        self.calls = 0
        self.snapshots: list[dict[str, Any]] = []
        self.infra: InfraConfig | None = None

    def __call__(self) -> None:
        self.calls += 1
        assert self.infra is not None
        self.snapshots.append(self.infra.model_dump(mode="json"))

    @property
    def last(self) -> dict[str, Any]:
        return self.snapshots[-1]


def make_ctx(spec: EnvSpec, infra: InfraConfig | None = None, job_id: str = JOB_ID) -> Context:
    infra = infra if infra is not None else InfraConfig()
    save = SaveRecorder()
    save.infra = infra
    logs: list[str] = []
    return Context(
        job_id=job_id, spec=spec, infra=infra, tagger=Tagger.for_spec(spec, job_id), save=save, log=logs.append
    )


def _merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def variant(spec: EnvSpec, **changes: Any) -> EnvSpec:
    """The spec re-validated with `changes` deep-merged in (file names, i.e. camelCase aliases)."""
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return EnvSpec.model_validate(_merge(data, changes))


def network_ctx(spec: EnvSpec) -> Context:
    """A context as stepCreateNetwork sees it: the preflight has already picked the zones."""
    return make_ctx(spec, InfraConfig(Zones=list(ZONES)))


def tags_of(resource: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def job_tag_filter(job_id: str = JOB_ID) -> list[dict[str, Any]]:
    return [{"Name": "tag:zop:jobId", "Values": [job_id]}]
