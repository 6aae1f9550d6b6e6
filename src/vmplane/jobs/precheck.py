"""stepValidate's checks run before a job exists, so a request bound to fail records nothing.

`plan_apply` calls `checked` for the decisions that would create or re-run a job (a new one, a failed
job with a corrected file). The unpinned vmconfig artifacts were fetched or refused just before, by
`bootstrap.vmconfig_fetch`; this runs the rest of what stepValidate would refuse: the driver's read-only
cloud check (`CloudDriver.precheck`: the instance type offered in the zones, the images, the DNS zone,
the Proxmox templates, names owned by someone else). A refusal is exit 2 / HTTP 422 naming each field;
a cloud that cannot be reached or refuses the credentials raises its CloudError, also before anything
is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from vmplane.clouds import registry
from vmplane.clouds.base import CloudDriver
from vmplane.clouds.errors import ProviderInvalidError
from vmplane.envspec.jsonc import JsoncSyntaxError, parse_jsonc
from vmplane.envspec.load import SpecError, SpecIssue
from vmplane.envspec.models import EnvSpec
from vmplane.errors import UsageError
from vmplane.target import Target

if TYPE_CHECKING:
    from vmplane.jobs.apply import ApplyPlan

# The job id the throwaway context's tags carry for a job not created yet: no resource has it, so a name
# the job would create that already exists is someone else's, as it would be for the new job.
UNBORN_JOB = "job-precheck"


class RefusedBeforeJobError(UsageError):
    """What the job's stepValidate would refuse, found before the job exists (exit 2, HTTP 422)."""

    def __init__(self, where: str, problems: list[str]) -> None:
        self.where, self.problems = where, problems
        super().__init__(
            f"stepValidate would refuse this file on {where}; nothing was recorded or created: " + "; ".join(problems)
        )


class RefusedAtFieldsError(SpecError):
    """A RefusedBeforeJobError whose every problem names a field: each at its place in the file."""

    def __init__(self, placed: SpecError, where: str) -> None:
        self.where = where
        super().__init__(placed.file, placed.issues)

    def summary(self) -> str:
        return f"stepValidate would refuse this file on {self.where}; nothing was recorded or created."


def problems(driver: CloudDriver, spec: EnvSpec, target: Target, ap: ApplyPlan) -> list[str]:
    """What the job would refuse at stepValidate, each naming its field (empty: it would go on). In
    stepValidate's order: the driver's own answer first (plan_apply ran its capability check)."""

    try:
        driver.validate(spec)
        # What the VMs would find unpinned was fetched or refused before this (vmconfig_fetch, in plan_apply).
        return driver.precheck(spec, ap.job.id if ap.job else UNBORN_JOB, ap.job.infra if ap.job else None)
    except ProviderInvalidError:
        return []  # a provider that answers Invalid to everything (the Azure stub): its job records that


def checked(ap: ApplyPlan, driver: CloudDriver, spec: EnvSpec, target: Target, say: Callable[[str], None]) -> ApplyPlan:
    """`ap` once the cloud has no objection; raises RefusedBeforeJobError naming each problem."""
    say(f"checking {target.describe()}: what stepValidate would refuse (read-only)")
    found = problems(driver, spec, target, ap)
    if found:
        raise RefusedBeforeJobError(target.describe(), found)
    return ap


def static_problems(spec: EnvSpec) -> list[str]:
    """The driver's capability check (an `asg` pool or a load balancer on Proxmox VE, ...): no target,
    no credentials, no network. Each problem starts with its field path."""
    try:
        return registry.static_problems(spec)
    except ProviderInvalidError:
        return []  # the Azure stub answers Invalid to everything: its job records that answer


def positioned(file: Path, problems: list[str]) -> SpecError:
    """`problems` ("pools.web.mode: ...") as FILE:LINE:COL issues, at the field or its nearest parent."""
    try:
        text = file.read_text(encoding="utf-8-sig")
    except OSError:
        text = ""
    return SpecError(str(file), issues_at(text, problems))


_PATH_PART = re.compile(r'\.?([^.\[\]"]+)|\["([^"]*)"\]|\[(\d+)\]')


def _path_keys(path: str) -> tuple[str | int, ...]:
    """`runtime.files["/etc/a.pem"].secret` -> ("runtime", "files", "/etc/a.pem", "secret"); `$` -> ()."""
    if path == "$":
        return ()
    return tuple(int(index) if index else (word or quoted) for word, quoted, index in _PATH_PART.findall(path))


def has_field(problem: str) -> bool:
    """Whether `problem` starts with a field path (`pools.web.size: ...`)."""
    path, sep, _ = problem.partition(": ")
    return bool(sep) and " " not in path


def issues_at(text: str, problems: list[str]) -> list[SpecIssue]:
    """Each problem placed at its field path's value in `text` (or the nearest parent; 1:1 if none)."""
    try:
        values = parse_jsonc(text)[1].values
    except JsoncSyntaxError:
        values = {}
    issues = []
    for problem in problems:
        path, _, message = problem.partition(": ")
        if not has_field(problem):
            path, message = "$", problem
        keys = _path_keys(path)
        line, col = next((values[keys[:n]] for n in range(len(keys), -1, -1) if keys[:n] in values), (1, 1))
        issues.append(SpecIssue(path, message, line, col))
    return issues
