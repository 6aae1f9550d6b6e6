"""Operations on a provisioned environment (vmOp): lb attach/detach, scale, rotate, push, stop/start. One
shape for all."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from vmplane.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EnvArg,
    OutputOpt,
    YesOpt,
    begin,
    confirm,
    ensure_sandbox,
    load,
    print_json,
)
from vmplane.cli.running import finish_operation, run_job
from vmplane.errors import UsageError

if TYPE_CHECKING:
    from vmplane.jobs.operations import OperationPlan
    from vmplane.jobs.service import JobView

lb_app = typer.Typer(
    help="Attach or detach an environment's load balancer; the VMs keep running.", no_args_is_help=True
)


def _operate(ref: str, build: Callable[[JobView], OperationPlan], yes: bool, output: str) -> NoReturn:
    """Find the job, plan, confirm, record the operation, run it, report."""
    from vmplane.cli.render import show_plan
    from vmplane.jobs import listings, operations
    from vmplane.jobs.service import Phase

    cmd = begin(output)
    job = listings.find_job(cmd.settings, ref)
    op = build(job)
    if job.target.sandbox:
        ensure_sandbox(cmd.con)
    show_plan(cmd.con, op.plan)
    if not yes:
        _warn(op.warnings)  # before the question, and again at the end
    confirm(cmd.con, f"Run {op.kind} on {job.org}/{job.env} ({job.id})?", yes)
    record = operations.begin_operation(cmd.settings, op)
    cmd.con.print(f"\njob [bold]{job.id}[/] {op.kind} ({record.id})")
    done = run_job(cmd, job.id, Phase.operation)
    _warn(op.warnings)
    if cmd.json and op.json_extra:
        print_json({**done.to_json(), **op.json_extra})
        raise typer.Exit(EXIT_OK if done.status.value == "succeeded" else EXIT_FAILED)
    finish_operation(cmd, done)


def _warn(warnings: list[str]) -> None:
    """Warnings go to stderr in both output modes (stdout may be a script's JSON)."""
    if warnings:
        from rich.console import Console
        from rich.markup import escape

        err = Console(stderr=True, highlight=False)
        for w in warnings:
            err.print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)


# `-f` is optional here on purpose: without it the job's recorded loadBalancer block is used, so a
# vmplane.env.jsonc that happens to be in the current directory must not be picked up silently.
@lb_app.command("attach")
def lb_attach(
    env: EnvArg,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Take the loadBalancer block from this file.")
    ] = None,
    yes: YesOpt = False,
    output: OutputOpt = "text",
) -> None:
    """Create the load balancer (the four LB steps) in front of the running VMs."""
    from vmplane.jobs import operations

    lb = None
    if file is not None:
        lb = load(file).load_balancer
        if lb is None:
            raise UsageError(f"{file} has no loadBalancer block")
    _operate(env, lambda job: operations.plan_attach_lb(job, lb), yes, output)


@lb_app.command("detach")
def lb_detach(env: EnvArg, yes: YesOpt = False, output: OutputOpt = "text") -> None:
    """Remove the load balancer, its target group, listeners, certificate and DNS record; the VMs stay."""
    from vmplane.jobs import operations

    _operate(env, operations.plan_detach_lb, yes, output)


def scale(
    env: EnvArg,
    pool: Annotated[str, typer.Argument(help="Pool name.")],
    min_size: Annotated[int | None, typer.Option("--min", help="ASG minimum size.")] = None,
    max_size: Annotated[int | None, typer.Option("--max", help="ASG maximum size.")] = None,
    desired: Annotated[int | None, typer.Option("--desired", help="Desired size (a Fixed pool's size).")] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="Compare the new sizes with this file (default: as last applied)."),
    ] = None,
    yes: YesOpt = False,
    output: OutputOpt = "text",
) -> None:
    """Change a pool's sizes in place; running VMs stay (a smaller Fixed pool drops its highest-numbered VMs).
    Warns when the file, as last applied, says other sizes: its next apply would set them again."""
    from vmplane.jobs import operations

    # Read only when given, as for `lb attach`: a file that happens to be in the directory is not assumed.
    spec = load(file) if file is not None else None
    _operate(
        env,
        lambda job: operations.plan_scale(
            job, pool, min_size=min_size, max_size=max_size, desired=desired, file=spec, file_name=str(file)
        ),
        yes,
        output,
    )


def rotate(
    env: EnvArg,
    pool: Annotated[str | None, typer.Argument(help="Only this pool.")] = None,
    yes: YesOpt = False,
    output: OutputOpt = "text",
) -> None:
    """Replace VMs that run an outdated launch template version: Fixed pools one VM at a time (never
    below the pool's size), ASG pools by an instance refresh."""
    from vmplane.jobs import operations

    _operate(env, lambda job: operations.plan_rotate(job, pool), yes, output)


def stop(
    env: EnvArg,
    pool: Annotated[str | None, typer.Argument(help="Only this pool (default: every pool).")] = None,
    yes: YesOpt = False,
    output: OutputOpt = "text",
) -> None:
    """Stop a pool now: Fixed VMs are stopped (disks kept), an auto-scaling group goes to 0. The network,
    load balancer and schedules stay; `vmplane start` brings the pool back."""
    from vmplane.jobs import operations

    _operate(env, lambda job: operations.plan_stop(job, pool), yes, output)


def start(
    env: EnvArg,
    pool: Annotated[str | None, typer.Argument(help="Only this pool (default: every pool).")] = None,
    yes: YesOpt = False,
    output: OutputOpt = "text",
) -> None:
    """Start a stopped pool now (also one its schedule stopped) and wait until its VMs are ready."""
    from vmplane.jobs import operations

    _operate(env, lambda job: operations.plan_start(job, pool), yes, output)


def push(
    env: EnvArg,
    force: Annotated[
        bool, typer.Option("--force", help="Push to every running VM, not only those whose settings differ.")
    ] = False,
    yes: YesOpt = False,
    output: OutputOpt = "text",
) -> None:
    """Push the runtime settings again: re-read the referenced secrets' versions (metadata, never a value)
    and push to every running VM whose settings or secret versions differ; nothing is replaced. Rotating
    a secret: update it in its store, then `vmplane push ENV` (or apply the unchanged file)."""
    from vmplane.jobs import operations

    _operate(env, lambda job: operations.plan_push(job, force=force), yes, output)
