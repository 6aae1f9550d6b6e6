"""`vmplane exec`: a command on a VM through the cloud's IAM-gated exec channel (SSM on AWS). No SSH."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from vmplane.cli.common import EXIT_FAILED, EXIT_OK, OutputOpt, begin, ensure_sandbox, print_json
from vmplane.errors import UsageError


def exec_cmd(
    env: Annotated[str, typer.Argument(help="Environment name or job id.")],
    vm: Annotated[str, typer.Argument(help="VM name (<env>-<pool>-<index>) or instance id.")],
    command: Annotated[list[str] | None, typer.Argument(help="The command, after --.")] = None,
    interactive: Annotated[
        bool,
        typer.Option("--interactive", "-i", help="Start an interactive session (SSM on AWS, IAP on Google Cloud)."),
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the command.")] = 120.0,
    output: OutputOpt = "text",
) -> None:
    """Run a command on a VM through the IAM-gated exec channel (SSM Run Command on AWS, a metadata mailbox
    on Google Cloud, the QEMU guest agent on Proxmox VE). No SSH keys, ever."""
    import shlex
    import shutil

    from vmplane.jobs import operations

    cmd = begin(output)
    con = cmd.con
    target = operations.exec_target(cmd.settings, env, vm)
    job = target.job
    if interactive:
        hint = operations.session_hint(target)
        if job.target.sandbox or hint.needs or not shutil.which(hint.argv[0]):
            why = (
                "the sandbox has no interactive sessions"
                if job.target.sandbox
                else f"{hint.needs or hint.argv[0]} is not installed"
            )
            con.print(f"{why}; where it is, run:")
            typer.echo(shlex.join(hint.argv))
            raise typer.Exit(EXIT_OK)
        os.execvp(hint.argv[0], hint.argv)
    if not command:
        raise UsageError("give a command after --, or --interactive")
    if job.target.sandbox:
        con.print("[dim]sandbox: the emulator records the command but does not run it; output is empty[/]")
        ensure_sandbox(con)
    # A CloudError (exit 1) is reported by the CLI's one error handler.
    result = operations.exec_command(target, shlex.join(command), timeout)
    if cmd.json:
        print_json(
            {
                "vm": target.vm_name,
                "instanceId": result.instance_id,
                "status": result.status,
                "exitCode": result.exit_code,
                "stdout": result.stdout,
                "stderr": result.stderr,
            }
        )
    else:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        con.print(f"[dim]{target.vm_name} ({result.instance_id}): {result.status}, exit {result.exit_code}[/]")
    raise typer.Exit(result.exit_code if result.exit_code > 0 else (EXIT_OK if result.ok else EXIT_FAILED))
