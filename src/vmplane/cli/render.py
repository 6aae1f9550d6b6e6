"""How the CLI shows plans, jobs and progress. Rendering only: no decisions are made here.

`vmplane status` imports this module: it takes the job records from store/ (pydantic only), not from
jobs.service or pipeline/, whose imports (SQLAlchemy, the cloud layer) a read-only command must not pay.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vmplane.store.job_records import JobView, Phase, StepRecord, StepStatus

if TYPE_CHECKING:
    from vmplane.clouds.drift import Drift
    from vmplane.envspec.impact import Change
    from vmplane.pipeline.plan import Plan

# Keyed by pipeline.plan.Action's values (a StrEnum member looks up as its value).
SYMBOL_STYLE = {"+": "green", "~": "yellow", "-": "red", "-/+": "magenta"}
STEP_MARK = {
    StepStatus.succeeded: "[green]✓[/]",
    StepStatus.failed: "[red]✗[/]",
    StepStatus.running: "[yellow]…[/]",
    StepStatus.skipped: "[dim]-[/]",
    StepStatus.pending: "[dim]·[/]",
}


PLAN_VERBS = {
    "provision": "provision",
    "teardown": "destroy",
    "update": "update",
    "attach_lb": "attach a load balancer to",
    "detach_lb": "detach the load balancer from",
    "scale": "scale",
    "rotate": "replace the outdated VMs of",
    "repair": "repair",
    "push": "push the runtime settings to the VMs of",
}
IMPACT_STYLE = {"runtime": "cyan", "vm": "yellow", "cloud": "green", "identity": "red"}


def show_changes(con: Console, changes: list[Change], refusals: list[str]) -> None:
    """The changed fields grouped by impact, each with what applying it does."""
    from vmplane.envspec.impact import CONSEQUENCE, Impact

    for impact in Impact:
        group = [c for c in changes if c.impact is impact]
        if not group:
            continue
        con.print(f"[{IMPACT_STYLE[impact.value]}]{impact.value}[/]: {CONSEQUENCE[impact]}")
        for c in group:
            con.print(escape(f"  ~ {c.path}: {_short(c.old)} -> {_short(c.new)}"), soft_wrap=True)
    for r in refusals:
        con.print(f"[red]refused:[/] {escape(r)}", soft_wrap=True)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if value is not None else "(absent)"
    return text if len(text) <= 60 else text[:57] + "..."


def show_plan(con: Console, plan: Plan) -> None:
    if plan.kind != "none":
        verb = PLAN_VERBS.get(plan.kind, plan.kind)
        con.print(f"vmplane will {verb} [bold]{plan.env}[/] on {escape(plan.target)} in {len(plan.steps)} steps:")
        con.print("  " + " → ".join(plan.steps))
    for note in plan.notes:
        con.print(f"[dim]note:[/] {escape(note)}", soft_wrap=True)
    show_repairs(con, plan)
    show_resources(con, plan)
    con.print(f"\n[bold]{escape(plan.summary)}[/]")
    show_cost(con, plan.cost)


DRIFT_SYMBOL = {"missing": ("+", "green"), "changed": ("~", "yellow"), "extra": ("-", "red")}


def show_repairs(con: Console, plan: Plan) -> None:
    """What the refresh found changed outside vmplane, one line each with what apply does about it."""
    if not plan.repairs:
        return
    con.print("\nDrift: changed outside vmplane since the last apply (repaired by apply):")
    for d in plan.repairs:
        sym, style = DRIFT_SYMBOL[d.change.value] if d.repairable else ("!", "dim")
        show_drift_line(con, d, f"[{style}]{sym:>3}[/]")


def show_drift_line(con: Console, d: Drift, prefix: str) -> None:
    ident = f" ({escape(d.id)})" if d.id and not d.resource.endswith(f".{d.id}") else ""  # GCP: id is the name
    con.print(
        f"  {prefix} {escape(d.resource)}{ident} [bold]{d.change.value}[/]  [dim]{escape(d.repair)}[/]", soft_wrap=True
    )
    for f in d.fields:
        con.print(
            f"        {escape(f.field)}: wanted {escape(repr(f.wanted))}, actual {escape(repr(f.actual))}",
            soft_wrap=True,
        )


def show_resources(con: Console, plan: Plan) -> None:
    """The legend and one line per resource the plan adds, changes or destroys (a `-` per VM that goes)."""
    if not plan.resources:
        return
    con.print("\nResource actions are indicated with the following symbols:")
    for line in plan.legend():
        con.print(line)
    con.print()
    for r in plan.resources:
        sym = f"[{SYMBOL_STYLE[r.action]}]{r.action.value:>3}[/]"
        detail = f"  [dim]{escape(r.detail)}[/]" if r.detail else ""
        con.print(f"  {sym} {escape(r.type)}.{escape(r.name)}{detail}", soft_wrap=True)


def _signed(x: float) -> str:
    return f"{x:+.2f}"


def show_cost(con: Console, cost: dict[str, Any] | None) -> None:
    """One line: the monthly estimate after the plan, and for a change the difference; missing prices named."""
    if not cost:
        return
    after, before, delta, cur = cost["after"], cost["before"], cost["delta"], cost["currency"]
    text = f"Cost: ~ {after['total']:.2f} {cur}/month"
    if delta is not None:
        text += f" ({_signed(delta['total'])}, was {before['total']:.2f})"
    scheduled = after["scheduledTotal"]
    if scheduled is not None or (before and before["scheduledTotal"] is not None):
        billed = after["total"] if scheduled is None else scheduled
        text += f"; with the schedules ~ {billed:.2f}"
        if delta is not None:
            text += f" ({_signed(delta['scheduledTotal'])})"
    con.print(text + " [dim](list prices; `vmplane cost` shows each line and assumption)[/]", soft_wrap=True)
    for m in cost["missing"]:
        con.print(f"  [yellow]missing price:[/] {escape(m)} (not counted: the estimate is incomplete)", soft_wrap=True)


class StepPrinter:
    """Prints each step once when it starts and once when it ends (works in logs and terminals)."""

    def __init__(self, con: Console, phase: Phase, before: JobView | None = None) -> None:
        self.con = con
        self.phase = phase
        # Steps already done before this run (resume) are not printed again as if they had just run.
        done = before.steps_of(phase) if before is not None else []
        self.seen: dict[str, StepStatus] = {s.name: s.status for s in done if s.status is StepStatus.succeeded}

    def __call__(self, job: JobView) -> None:
        steps = job.steps_of(self.phase)
        total = len(steps)
        for i, step in enumerate(steps, 1):
            before = self.seen.get(step.name)
            if before == step.status:
                continue
            self.seen[step.name] = step.status
            if step.status is StepStatus.running:
                self.con.print(f"  [{i}/{total}] {STEP_MARK[step.status]} {step.name} …")
            elif step.status in (StepStatus.succeeded, StepStatus.failed, StepStatus.skipped):
                self.con.print(f"  [{i}/{total}] {STEP_MARK[step.status]} {step.name} {_timing(step)}")
                for line in step.log:
                    self.con.print(f"          [dim]{escape(line)}[/]", soft_wrap=True)
                if step.error:
                    self.con.print(f"          [red]{escape(step.error)}[/]", soft_wrap=True)


def _timing(step: StepRecord) -> str:
    parts = []
    if step.started_at and step.finished_at:
        parts.append(f"{(step.finished_at - step.started_at).total_seconds():.2f}s")
    calls = sum(step.api_calls.values())
    if calls:
        parts.append(f"{calls} API calls")
    return f"[dim]({', '.join(parts)})[/]" if parts else ""


def _show_pool_power(con: Console, job: JobView) -> None:
    """Stopped pools, and what each schedule does next (read from the schedule: the cloud runs it)."""
    from vmplane.jobs.poolstate import pool_states

    for name, state in pool_states(job).items():
        if state["reason"]:
            con.print(f"  [yellow]stopped:[/] {escape(state['reason'])}", soft_wrap=True)
        elif state["schedule"]:
            con.print(f"  pool {name}: schedule {state['schedule']}, running; next: {state['nextChange']}")


def show_job(con: Console, job: JobView) -> None:
    infra = job.infra
    where = escape(job.target.describe())
    con.print(f"[bold]{job.id}[/]  {job.org}/{job.env}  status [bold]{job.status.value}[/]  on {where}")
    if job.error:
        con.print(f"  [red]error:[/] {escape(job.error)}", soft_wrap=True)
    est = job.config.get("costEstimate")
    if est:
        monthly, cur = est["monthly"], est["currency"]
        scheduled = (
            f", {monthly['scheduledTotal']:.2f} with the schedules" if monthly["scheduledTotal"] is not None else ""
        )
        missing = f" [yellow](incomplete: {len(est['missing'])} missing price(s))[/]" if est["missing"] else ""
        con.print(f"  cost ~ {monthly['total']:.2f} {cur}/month{scheduled} (list prices){missing}")
    for label, steps in (("steps", job.steps), ("teardown", job.teardown_steps)):
        if steps:
            con.print(f"  {label}: " + "  ".join(f"{STEP_MARK[s.status]} {s.name}" for s in steps))
    op = job.operation
    if op is not None:
        con.print(f"  last operation: {op.kind} {escape(str(op.params or ''))} [bold]{op.status.value}[/] ({op.id})")
        if op.error:
            con.print(f"    [red]{escape(op.error)}[/]", soft_wrap=True)
        for note in op.notes:
            con.print(f"    [yellow]note:[/] {escape(note)}", soft_wrap=True)
    if infra.VMs:
        outdated = {v.Name for v in infra.outdated_vms()}
        t = Table(box=None, pad_edge=False)
        for col in ("VM", "POOL", "ID", "private IP", "zone", "state", "template"):
            t.add_column(col)
        for vm in infra.VMs:
            version = f"v{vm.LaunchTemplateVersion}" if vm.LaunchTemplateVersion else "-"
            if vm.Name in outdated:
                version += f" [yellow](outdated: v{infra.LaunchTemplateVersion.get(vm.Pool)} is current)[/]"
            t.add_row(vm.Name, vm.Pool, vm.ID or "-", vm.PrivateIP or "-", vm.AZ or "-", vm.State.value, version)
        con.print(t)
    _show_pool_power(con, job)
    if infra.LoadBalancerID:
        domain = job.spec.load_balancer.domain if job.spec.load_balancer else "-"
        con.print(f"  load balancer https://{domain} -> {infra.LoadBalancerDNSName}")
    if infra.NetworkID:
        con.print(
            f"  network {infra.NetworkID}  subnets {', '.join(infra.VMSubnetIDs)}  firewall {infra.VMSecurityGroupID}"
        )
    if infra.ExecMode and infra.VMs and job.status.value == "succeeded":
        first = next((v.ID for v in infra.VMs if v.ID), None)
        if first:
            con.print(f"  exec channel {infra.ExecMode}: vmplane exec {job.env} {first} -- CMD  (or -i for a session)")
