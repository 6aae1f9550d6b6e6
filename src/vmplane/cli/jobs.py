"""Commands on an environment's job: apply, destroy, resume, and the read-only status, envs, jobs.

Read-only commands import only what they render: the SQL lookup (jobs/listings.py) and, for text,
rich. They never import the engine (DBOS) or a cloud SDK.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vmplane.cli.common import (
    DEFAULT_FILE,
    EXIT_OK,
    FileOpt,
    OutputOpt,
    RefreshOpt,
    SandboxOpt,
    YesOpt,
    at_fields,
    begin,
    confirm,
    ensure_sandbox,
    load,
    print_json,
    refresh_flag,
    say_on_stderr,
    target,
)
from vmplane.cli.running import finish, finish_operation, run_job
from vmplane.errors import UsageError

if TYPE_CHECKING:
    from vmplane.jobs.service import JobView
    from vmplane.settings import Settings

OrgOpt = Annotated[str | None, typer.Option(help="Only this org.")]


def apply(
    file: FileOpt = DEFAULT_FILE,
    sandbox: SandboxOpt = False,
    yes: YesOpt = False,
    output: OutputOpt = "text",
    refresh: RefreshOpt = "true",
) -> None:
    """Provision the environment (or update an applied one in place): plan, confirm, run with live progress.
    An applied environment's cloud is read first: what drifted from the file is repaired (`--refresh false`
    skips the reads)."""
    from rich.markup import escape

    from vmplane.cli.render import show_changes, show_cost, show_plan, show_repairs, show_resources
    from vmplane.jobs import operations
    from vmplane.jobs.operations import Decision
    from vmplane.jobs.service import Phase

    cmd = begin(output)
    con, settings = cmd.con, cmd.settings
    spec = load(file)
    where = target(spec, sandbox, con)
    with at_fields(file):
        ap = operations.plan_apply(settings, spec, where, say=say_on_stderr, refresh=refresh_flag(refresh))
    if ap.decision is Decision.repair:
        assert ap.job is not None and ap.repair is not None
        show_plan(con, ap.plan)
        confirm(con, f"Repair {ap.job.org}/{ap.job.env}?", yes)
        operations.begin_operation(settings, ap.repair)
        con.print(f"\njob [bold]{ap.job.id}[/] repair")
        finish_operation(cmd, run_job(cmd, ap.job.id, Phase.operation))
    if ap.decision is Decision.no_changes:
        assert ap.job is not None
        con.print("No changes. The environment matches the file.")
        if cmd.json:
            print_json(ap.job.to_json())
        raise typer.Exit(EXIT_OK)
    if ap.decision is Decision.refused:
        show_changes(con, ap.changes, [])
        reasons = "\n  ".join(ap.refusals)
        raise UsageError(f"{len(ap.refusals)} change(s) cannot be applied in place; nothing was changed:\n  {reasons}")
    if ap.decision is Decision.update:
        assert ap.job is not None
        show_changes(con, ap.changes, [])
        show_repairs(con, ap.plan)
        show_resources(con, ap.plan)  # the VMs a size change adds or removes, before the question
        con.print(f"\n[bold]{escape(ap.plan.summary)}[/]")
        show_cost(con, ap.plan.cost)
        confirm(con, f"Update {ap.job.org}/{ap.job.env} in place?", yes)
        operations.begin_update(settings, ap.job, spec, ap)
        con.print(f"\njob [bold]{ap.job.id}[/] update")
        finish_operation(cmd, run_job(cmd, ap.job.id, Phase.operation))
    show_plan(con, ap.plan)
    confirm(con, "Apply this plan?", yes)
    job_id = operations.create_or_update_job(settings, spec, where, ap)
    con.print(f"\njob [bold]{job_id}[/]")
    if ap.decision is Decision.resume and ap.job is not None and operations.resume_phase(ap.job) is Phase.operation:
        finish_operation(cmd, run_job(cmd, job_id, Phase.operation))  # an operation a crash left unfinished
    finish(cmd, run_job(cmd, job_id, Phase.provision), "succeeded")


def destroy(
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="The environment file (default: ./vmplane.env.jsonc).")
    ] = None,
    job_ref: Annotated[
        str | None, typer.Option("--job", help="A job id or environment name instead of a file.")
    ] = None,
    sandbox: SandboxOpt = False,
    yes: YesOpt = False,
    output: OutputOpt = "text",
) -> None:
    """Tear the environment down, dependents first, leaving nothing tagged with its job."""
    from vmplane.cli.render import show_plan
    from vmplane.jobs import listings, operations
    from vmplane.jobs.forget import forget as forget_job
    from vmplane.jobs.forget import forgettable
    from vmplane.jobs.service import Phase

    cmd = begin(output)
    con, settings = cmd.con, cmd.settings
    if file is not None and job_ref is not None:
        raise UsageError("give exactly one of --file or --job")
    if job_ref is None:
        spec = load(file or DEFAULT_FILE)
        # The sandbox and a real account are two targets: --sandbox picks the sandbox's job, else the real one.
        found = operations.current_job_for(settings, spec, sandbox)
        other = operations.current_job_for(settings, spec, not sandbox) if found is None else None
        if found is None and other is None:
            con.print(f"Nothing to destroy: {spec.org}/{spec.name} has no job.")
            if cmd.json:
                print_json({"env": spec.name, "org": spec.org, "status": "absent"})
            raise typer.Exit(EXIT_OK)
        job = found or other
        assert job is not None
    else:
        job = listings.find_job(settings, job_ref)
    if job.status.value == "deleted":
        con.print(f"{job.id} is already deleted.")
        if cmd.json:
            print_json(job.to_json())
        raise typer.Exit(EXIT_OK)
    if job.target.sandbox != sandbox and job_ref is None:
        where = "the sandbox" if job.target.sandbox else "a real cloud account"
        raise UsageError(f"job {job.id} lives on {where}; {'add' if job.target.sandbox else 'drop'} --sandbox")
    if forgettable(job):  # nothing in the cloud to delete: no credentials needed, no cloud call
        con.print(f"{job.id} created nothing in the cloud; its record is removed (as `vmplane forget`).")
        finish(cmd, forget_job(settings, job), "deleted")
    if job.target.sandbox:
        ensure_sandbox(con)
    show_plan(con, operations.plan_destroy(settings, job))
    confirm(con, f"Destroy {job.org}/{job.env} ({job.id})?", yes)
    operations.begin_destroy(settings, job.id)
    con.print(f"\njob [bold]{job.id}[/] teardown")
    finish(cmd, run_job(cmd, job.id, Phase.teardown), "deleted")


def forget(
    job_ref: Annotated[str, typer.Argument(help="Job id or environment name.")],
    yes: YesOpt = False,
    output: OutputOpt = "text",
) -> None:
    """Remove the record of a job that created nothing in the cloud (e.g. refused at stepValidate), with no
    cloud call and no credentials; it ends `deleted`. A job that may hold resources is refused: destroy it."""
    from vmplane.jobs import listings
    from vmplane.jobs.forget import forget as forget_job
    from vmplane.jobs.forget import holdings

    cmd = begin(output)
    job = listings.find_job(cmd.settings, job_ref)
    if job.status.value == "deleted":
        cmd.con.print(f"{job.id} is already deleted.")
        finish(cmd, job, "deleted")
    if held := holdings(job):
        raise UsageError(
            f"job {job.id} may hold cloud resources, so its record stays: {'; '.join(held)}; "
            f"`vmplane destroy --job {job.id}` deletes them"
        )
    confirm(cmd.con, f"Forget {job.org}/{job.env} ({job.id}, {job.status.value}, nothing created)?", yes)
    finish(cmd, forget_job(cmd.settings, job), "deleted")


def resume(
    job_ref: Annotated[str, typer.Argument(help="Job id or environment name.")], output: OutputOpt = "text"
) -> None:
    """Continue an interrupted or failed job (or operation) at the step where it stopped."""
    from vmplane.jobs import listings, operations
    from vmplane.jobs.operations import resume_phase
    from vmplane.jobs.service import Phase

    cmd = begin(output)
    job = listings.find_job(cmd.settings, job_ref)
    phase = resume_phase(job)
    if phase is None:
        cmd.con.print(f"{job.id} is {job.status.value}; nothing to resume.")
        finish(cmd, job, job.status.value)
    if job.target.sandbox:
        ensure_sandbox(cmd.con)
    if job.status.value == "delete_failed":
        operations.begin_destroy(cmd.settings, job.id)
    cmd.con.print(f"resuming [bold]{job.id}[/] ({phase.value})")
    done = run_job(cmd, job.id, phase)
    if phase is Phase.operation:
        finish_operation(cmd, done)
    finish(cmd, done, "deleted" if phase is Phase.teardown else "succeeded")


def status(
    job_ref: Annotated[str | None, typer.Argument(help="Job id or environment name.")] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="The environment file (default without JOB: ./vmplane.env.jsonc)."),
    ] = None,
    sandbox: Annotated[
        bool | None,
        typer.Option(
            "--sandbox/--real",
            help="With a file: the job on the sandbox, or on the real cloud (default: the only one there is).",
        ),
    ] = None,
    output: OutputOpt = "text",
) -> None:
    """Show a job: status, steps, VMs (reads vmplane's records; calls no cloud)."""
    cmd = begin(output)
    job = job_of(cmd.settings, job_ref, file, sandbox)
    if cmd.json:
        from vmplane.jobs.poolstate import pool_states

        print_json({**job.to_json(), "pools": pool_states(job)})
    else:
        from vmplane.cli.render import show_job

        show_job(cmd.con, job)


def job_of(settings: Settings, job_ref: str | None, file: Path | None, sandbox: bool | None) -> JobView:
    """The job a command names: by id or environment name, else the current job of the file (default
    ./vmplane.env.jsonc) on the sandbox, a real cloud, or (None) the only one there is."""
    from vmplane.jobs import listings, operations

    if job_ref is not None and file is None:
        return listings.find_job(settings, job_ref)
    path = file or DEFAULT_FILE
    spec = load(path)
    found = operations.current_job_for(settings, spec, sandbox)
    if found is None:
        where = "" if sandbox is None else " on the sandbox" if sandbox else " on a real cloud"
        raise UsageError(f"{spec.org}/{spec.name} has no job{where} (vmplane apply -f {path})")
    return found


def envs(
    output: OutputOpt = "text",
    org: OrgOpt = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="Cost so far up to this ISO 8601 time (UTC unless it names a zone; default now; "
            "a later time runs today's shape on).",
        ),
    ] = None,
) -> None:
    """The inventory: environments registered by stepRegisterSpace, their monthly estimate and cost so far."""
    from datetime import datetime

    from vmplane.jobs import listings

    cmd = begin(output)
    try:
        now = datetime.fromisoformat(as_of) if as_of else None
    except ValueError:
        raise UsageError(f"--as-of {as_of!r} is not an ISO 8601 time (e.g. 2026-12-01T18:00:00+00:00)") from None
    rows = listings.list_envs(cmd.settings, org, now=now)
    if cmd.json:
        print_json({"environments": [r.to_json() for r in rows]})
        return
    if not rows:
        cmd.con.print("No environments yet (vmplane apply -f FILE).")
        return
    from rich.table import Table

    t = Table(box=None)
    for col in ("ORG", "NAME", "JOB", "WHERE", "VMS", "MONTHLY", "SO FAR"):
        t.add_column(col, justify="right" if col in ("MONTHLY", "SO FAR") else "left")
    for r in rows:
        ready, total = r.vms_ready
        vms = f"{ready}/{total} ready" + (f", {r.stopped_vms} stopped" if r.stopped_vms else "")
        t.add_row(r.org, r.name, r.job, r.where, vms, _monthly(r.cost_estimate), _so_far(r.cost_so_far))
    cmd.con.print(t)


def _monthly(est: dict[str, Any] | None) -> str:
    if est is None:
        return "-"
    text = f"{est['total']:.2f} {est['currency']}"
    if est["scheduledTotal"] is not None:
        text += f" ({est['scheduledTotal']:.2f} scheduled)"
    return text + ("" if est["complete"] else " [yellow]+?[/]")  # a price is missing: `vmplane cost` names it


def _so_far(so_far: dict[str, Any] | None) -> str:
    if so_far is None:
        return "-"
    if so_far["since"] is None:
        return "0.00 (pending)"
    text = f"{so_far['amount']:.2f} {so_far['currency']} since {so_far['since'][:10]}"
    return text + ("" if so_far["complete"] else " [yellow]+?[/]")


def jobs(output: OutputOpt = "text", org: OrgOpt = None) -> None:
    """Recent provisioning jobs."""
    from vmplane.jobs import listings

    cmd = begin(output)
    views = listings.list_jobs(cmd.settings, org)
    if cmd.json:
        print_json({"jobs": [v.to_json() for v in views]})
        return
    if not views:
        cmd.con.print("No jobs yet.")
        return
    from rich.table import Table

    t = Table(box=None)
    for col in ("JOB", "ORG", "ENV", "STATUS", "STEPS", "UPDATED"):
        t.add_column(col)
    for v in views:
        done = sum(1 for s in v.steps if s.status.value == "succeeded")
        t.add_row(v.id, v.org, v.env, v.status.value, f"{done}/{len(v.steps)}", f"{v.updated_at:%Y-%m-%d %H:%M:%S}")
    cmd.con.print(t)
