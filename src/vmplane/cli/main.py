"""The `vmplane` command: wiring and rendering only; decisions live in jobs/ and pipeline/.

Stages follow one shape: load → plan → print → confirm unless --yes → run → summary.
Each module of this package holds one group of commands; this one builds the Typer app from them.
Every module imports only typer and cli.common at start-up: heavy modules (rich, pydantic models,
SQLAlchemy, DBOS, boto3, FastAPI) load inside the commands that use them, so `--help`, `validate`
and the read-only commands start fast.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from vmplane.cli import cost as cost_
from vmplane.cli import drift as drift_
from vmplane.cli import exec as exec_
from vmplane.cli import files, jobs, ops, server
from vmplane.cli.common import domain_errors
from vmplane.cli.deps import deps_app
from vmplane.cli.prices import prices_app
from vmplane.cli.sandbox import sandbox_app
from vmplane.cli.tf import tf_app
from vmplane.errors import UsageError

app = typer.Typer(
    name="vmplane",
    help="Provision production-shape VM environments (private network, NAT, pools, exec channel) from one JSONC file.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format",
            envvar="VMPLANE_LOG_FORMAT",
            help="Logs on stderr: text (for people) or json (one object a line).",
        ),
    ] = "text",
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            envvar="VMPLANE_LOG_LEVEL",
            help="debug, info, warning or error (default: warning; info for serve and worker).",
        ),
    ] = None,
) -> None:
    from vmplane.observe import logs

    try:
        logs.configure(log_format, log_level)
    except ValueError as err:
        raise UsageError(str(err)) from None


# Registration order is the order of `vmplane --help`.
app.command()(files.init)
app.command()(files.schema)
app.command()(files.validate)
app.command()(files.plan)
app.command("cost")(cost_.cost)
app.command()(jobs.apply)
app.command()(jobs.destroy)
app.command()(jobs.resume)
app.command()(jobs.forget)
app.command("exec")(exec_.exec_cmd)
app.command()(ops.scale)
app.command()(ops.rotate)
app.command()(ops.push)
app.command()(ops.stop)
app.command()(ops.start)
app.command()(server.serve)
app.command("worker")(server.worker_cmd)
app.command()(jobs.status)
app.command()(drift_.drift)
app.command()(jobs.envs)
app.command("jobs")(jobs.jobs)
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(tf_app, name="tf")
app.add_typer(prices_app, name="prices")
app.add_typer(ops.lb_app, name="lb")
app.add_typer(server.tokens_app, name="tokens")
app.add_typer(deps_app, name="deps")


def _add_cloud_commands() -> None:
    """Each cloud's own sub-commands (`vmplane proxmox ...`), as its descriptor names them."""
    from vmplane.clouds.registry import descriptors

    for d in descriptors():
        if d.cli is not None:
            app.add_typer(d.cli.app.load(), name=d.cli.name)


_add_cloud_commands()


def main() -> None:
    try:
        with domain_errors():
            app()
    except SystemExit as done:
        if "vmplane.pipeline.engine" not in sys.modules:
            raise
        _shutdown_engine()
        _exit_now(done.code)
    finally:
        _shutdown_engine()


def _shutdown_engine() -> None:
    if "vmplane.observe.tracing" in sys.modules:  # spans still buffered go out before the exit
        from vmplane.observe import tracing

        tracing.flush()
    # Only a command that ran a workflow imported the engine; shutting DBOS down joins its threads.
    if "vmplane.pipeline.engine" in sys.modules:
        from vmplane.pipeline import engine

        engine.shutdown()


def _exit_now(code: object) -> None:
    """End a process that ran a workflow without interpreter finalisation.

    Tearing down the object graph of boto3, botocore, DBOS and SQLAlchemy takes ~0.3-0.5 s after the
    command has finished. Everything that matters is done by now: the job's rows are committed (SQLite
    WAL is durable at commit), DBOS is shut down, so flush what is buffered and leave.
    """
    import logging

    from vmplane.store.db import dispose_all

    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"), as the interpreter would print it
        sys.stderr.write(f"{code}\n")
        status = 1
    dispose_all()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
