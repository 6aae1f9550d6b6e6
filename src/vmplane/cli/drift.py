"""`vmplane drift`: read the cloud (never write it) and list what differs from the file as last applied."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vmplane.cli.common import EXIT_OK, OutputOpt, begin, ensure_sandbox, print_json
from vmplane.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from vmplane.jobs.drift import DriftReport

# Like `terraform plan -detailed-exitcode`: 0 none, 3 (not 2, which is a usage error here) drift; 1 unreadable.
EXIT_DRIFT = 3


def drift(
    env: Annotated[str | None, typer.Argument(help="Environment name or job id.")] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="Find the environment from this file (default: ./vmplane.env.jsonc)."),
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
    """List what changed in the cloud outside vmplane: resources missing, changed (each field's wanted and
    actual value) or extra (tagged with the job, not in the file). Read-only; `vmplane apply` repairs it.
    Exit 0: no drift, 3: drift, 1: the cloud could not be read."""
    from vmplane.cli.jobs import job_of
    from vmplane.clouds.errors import UnsupportedError
    from vmplane.jobs import drift as drift_

    cmd = begin(output)
    job = job_of(cmd.settings, env, file, sandbox)
    if job.target.sandbox:
        ensure_sandbox(cmd.con, job.target.cloud)
    try:
        report = drift_.check(job)
    except UnsupportedError as err:
        raise UsageError(str(err)) from None
    if cmd.json:
        print_json(report.to_json())
    else:
        _show(cmd.con, report)
    raise typer.Exit(EXIT_DRIFT if report.drift else EXIT_OK)


def _show(con: Console, report: DriftReport) -> None:
    from rich.markup import escape

    from vmplane.cli.render import DRIFT_SYMBOL, show_drift_line

    where = f"{escape(report.env)} ({report.job_id}) on {escape(report.target)}"
    if not report.drift:
        con.print(f"No drift: the cloud matches {where} as last applied.")
        return
    con.print(f"Drift in {where}:")
    for d in report.drift:
        sym, style = DRIFT_SYMBOL[d.change.value] if d.repairable else ("!", "dim")
        show_drift_line(con, d, f"[{style}]{sym:>3}[/]")
    n = len(report.repairable)
    con.print(
        f"\n[bold]{len(report.drift)} resource(s) drifted[/]; `vmplane apply` repairs {n}"
        + (f", {len(report.drift) - n} reported only (not vmplane's)" if n < len(report.drift) else "")
        + "."
    )
