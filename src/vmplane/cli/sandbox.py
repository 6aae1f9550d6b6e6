"""`vmplane sandbox`: the emulated AWS account (moto's server) and Google Cloud project on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vmplane.cli.common import OutputOpt, begin, print_json

sandbox_app = typer.Typer(
    help="The sandbox: an emulated AWS account (moto's server) and Google Cloud project on 127.0.0.1.",
    no_args_is_help=True,
)


def _sandbox_call(action: str, output: str, faults: Path | None = None) -> None:
    from vmplane.sandbox import control

    cmd = begin(output)
    # A SandboxError exits 1 through the CLI's one error handler.
    info = control.start(cmd.settings, faults) if action == "start" else getattr(control, action)(cmd.settings)
    if cmd.json:
        print_json(info.to_json())
    else:
        state = "running" if info.running else "stopped"
        pid = f" (pid {info.pid})" if info.pid and info.running else ""
        typer.echo(f"sandbox {state} at {info.endpoint} (AWS) and {info.gcp_endpoint} (Google Cloud){pid}")
        if info.faults and info.running:
            rules = ", ".join(k for k in info.faults if k not in ("file", "seed"))
            typer.echo(f"fault profile {info.faults['file']} (seed {info.faults['seed']}: {rules or 'no faults'})")


@sandbox_app.command("start")
def sandbox_start(
    output: OutputOpt = "text",
    faults: Annotated[
        Path | None,
        typer.Option(
            "--faults",
            help="A fault profile (JSONC): delayed visibility, IAM propagation, throttling and capacity "
            "errors, deterministic from its seed (README: Fault profiles).",
        ),
    ] = None,
) -> None:
    """Start the sandbox (if not running) and leave it running."""
    _sandbox_call("start", output, faults)


@sandbox_app.command("stop")
def sandbox_stop(output: OutputOpt = "text") -> None:
    """Stop the sandbox; everything in it is forgotten."""
    _sandbox_call("stop", output)


@sandbox_app.command("status")
def sandbox_status(output: OutputOpt = "text") -> None:
    """Is the sandbox running, and where."""
    _sandbox_call("status", output)


@sandbox_app.command("reset")
def sandbox_reset(output: OutputOpt = "text") -> None:
    """Forget every emulated resource; the sandbox keeps running."""
    _sandbox_call("reset", output)
