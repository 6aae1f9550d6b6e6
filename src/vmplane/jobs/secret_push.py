"""The secrets' versions against what the VMs got: `vmplane push ENV` and an apply of an unchanged file.

A new version of an unpinned secret leaves the file as it was, so the file's diff cannot see it: here the
store's metadata is read (only for a spec with references, so read-only commands stay cheap) and each
ready VM's `RuntimeHash` compared with the wanted one. What differs is a runtime change: pushed, nothing
replaced. Versions are ids, never values, so plans show them.
"""

from __future__ import annotations

from vmplane.clouds.registry import driver_for
from vmplane.envspec.impact import Change, Impact
from vmplane.envspec.models import EnvSpec
from vmplane.envspec.secrets import SecretStore, secret_refs
from vmplane.jobs import service as jobs
from vmplane.jobs.precheck import RefusedBeforeJobError
from vmplane.jobs.service import JobView
from vmplane.jobs.vmops import OperationPlan
from vmplane.pipeline.plan import Plan, PlanKind
from vmplane.pipeline.runtime_push import Wanted, stale_vms, wanted

PUSH_STEPS = ["stepPushRuntime", "stepRegisterSpace"]


def _wanted(job: JobView, spec: EnvSpec) -> Wanted:
    """The wanted hash. A secret that cannot be read (gone, disabled, an `env:` variable not set where
    vmplane runs) is refused here, each at its field (exit 2), before anything is recorded: the push
    would fail on it."""
    driver = driver_for(job.target)
    if (refs := secret_refs(spec)) and (found := driver.secret_access().problems(refs)):
        raise RefusedBeforeJobError(job.target.describe(), found)
    return wanted(driver, spec)


def version_changes(job: JobView, spec: EnvSpec, want: Wanted | None = None) -> list[Change]:
    """One runtime change per reference whose delivery is due: a new version (`version A -> new version B`),
    or an `env:` value (no version: pushed at every apply). Empty when every ready VM has the wanted hash,
    or the spec has no references (the store is not asked then)."""
    if not secret_refs(spec):
        return []
    want = want or _wanted(job, spec)
    if not stale_vms(job.infra.VMs, want):
        return []
    got = job.infra.SecretVersions
    out = []
    for path, ref in want.refs.items():
        if ref.store is SecretStore.env:
            out.append(Change(f"{path}.secret", None, f"env:{ref.name} read at push time", Impact.runtime))
            continue
        now = want.versions.get(ref.text)
        if ref.text not in got or got[ref.text] != now:
            old = f"version {got[ref.text]}" if got.get(ref.text) else None
            out.append(Change(f"{path}.secret", old, f"new version {now}", Impact.runtime))
    return out


def references_changed(changes: list[Change]) -> bool:
    """Whether the file's changes add, remove or change a secret reference: the VMs' read access (the
    identity step's grants) must follow before a push."""

    def is_ref(value: object) -> bool:  # a reference, or an env/files object holding one
        if not isinstance(value, dict):
            return False
        return isinstance(value.get("secret"), str) or any(is_ref(v) for v in value.values())

    return any(
        c.path.startswith("runtime.") and (c.path.endswith(".secret") or is_ref(c.old) or is_ref(c.new))
        for c in changes
    )


def plan_push(job: JobView, *, force: bool = False) -> OperationPlan:
    """`vmplane push ENV`: re-read the secrets' versions and push to every running VM whose hash differs
    (`force`: to every running VM)."""
    jobs.require_provisioned(job.id, job.status)
    want = _wanted(job, job.spec)
    ready = [v for v in job.infra.VMs if v.ID and v.State.value == "ready"]
    targets = ready if force else stale_vms(job.infra.VMs, want)
    plan = Plan(PlanKind.push, job.env, job.target.describe(), list(PUSH_STEPS), [])
    for c in version_changes(job, job.spec, want):
        plan.notes.append(f"{c.path}: {c.old + ' -> ' if c.old else ''}{c.new}")
    for v in targets:
        plan.notes.append(f"{v.Name} ({v.ID}) gets the runtime settings; nothing is replaced")
    if not targets:
        plan.notes.append("every running VM has the current settings and secret versions: nothing to push")
    elif want.env_refs and not force:
        plan.notes.append("env: references have no version vmplane can compare: every running VM gets the push")
    plan.headline = f"Push: {len(targets)} of {len(ready)} running VMs."
    return OperationPlan("push", job, {"force": True} if force else {}, plan.steps, plan)
