"""Running a job's workflow in this process with live progress, and the summary at its end."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

import typer

from vmplane.cli.common import EXIT_FAILED, EXIT_OK, Cmd, print_json

if TYPE_CHECKING:
    from vmplane.jobs.service import JobView, Phase

POLL_S = 0.05


def run_job(cmd: Cmd, job_id: str, phase: Phase) -> JobView:
    from vmplane.cli.render import StepPrinter
    from vmplane.jobs import listings, operations

    printer = StepPrinter(cmd.con, phase, listings.find_job(cmd.settings, job_id))
    # Polls the job's status until its workflow ends: 0.05 s (the default is 0.1) sees the end sooner;
    # each poll is two small queries, next to steps that take tenths of a second.
    job = operations.run(cmd.settings, job_id, phase=phase, on_progress=printer, poll_interval=POLL_S)
    recovered = operations.finish_recovered()
    if recovered:
        cmd.con.print(
            f"[dim]also finished {len(recovered)} interrupted workflow(s) recovered at start: {', '.join(recovered)}[/]"
        )
    return job


def finish(cmd: Cmd, job: JobView, ok_status: str) -> NoReturn:
    """The job as JSON or its summary; exit 0 if it reached `ok_status`, else 1."""
    if cmd.json:
        print_json(job.to_json())
    else:
        from vmplane.cli.render import show_job

        cmd.con.print()
        show_job(cmd.con, job)
    raise typer.Exit(EXIT_OK if job.status.value == ok_status else EXIT_FAILED)


def finish_operation(cmd: Cmd, job: JobView) -> NoReturn:
    from rich.markup import escape

    op = job.operation
    if op is not None and not cmd.json:
        for note in op.notes:
            cmd.con.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    finish(cmd, job, "succeeded")
