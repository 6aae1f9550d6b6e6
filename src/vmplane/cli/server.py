"""The provisioning API (`serve`), the queue's workers (`worker`), and the API's bearer tokens."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from vmplane.cli.common import OutputOpt, begin, print_json, settings
from vmplane.errors import UsageError

tokens_app = typer.Typer(help="API bearer tokens, scoped to one org with a role.", no_args_is_help=True)


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    worker: Annotated[
        bool,
        typer.Option(
            "--worker/--no-worker", help="Also run jobs here; --no-worker only enqueues for `vmplane worker`."
        ),
    ] = True,
) -> None:
    """Run the provisioning API (/provisioning-jobs) and the dashboard (open http://HOST:PORT/)."""
    import uvicorn

    from vmplane.dashboard import create_server
    from vmplane.observe import logs

    # Access logs carry method, path and status only: never headers or cookies, so never a token. They go
    # through vmplane's log handler (its format and redaction): log_config=None keeps uvicorn's own config away.
    logs.serving()
    app_ = create_server(settings(), run_workflows=worker)
    uvicorn.run(app_, host=host, port=port, log_config=None, proxy_headers=False)


def worker_cmd(
    heartbeat: Annotated[float, typer.Option(help="Seconds between heartbeats.")] = 2.0,
    dead_after: Annotated[float, typer.Option(help="A worker silent this long is taken over.")] = 15.0,
    metrics_port: Annotated[
        int | None,
        typer.Option(help="Serve this worker's metrics (Prometheus text) on 127.0.0.1:PORT/metrics; off by default."),
    ] = None,
) -> None:
    """Run queued jobs (PostgreSQL: VMPLANE_DATABASE_URL), and take over the jobs of dead workers."""
    import signal
    import threading

    from vmplane.observe import logs
    from vmplane.pipeline import worker

    logs.serving()
    if metrics_port is not None:
        from vmplane.observe import metrics
        from vmplane.pipeline import job_gauges

        job_gauges.install(settings())
        metrics.serve(metrics_port)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    worker.run(settings(), heartbeat=heartbeat, dead_after=dead_after, stop=stop)


@tokens_app.command("create")
def tokens_create(
    org: Annotated[str, typer.Option(help="The organisation the token acts for.")],
    role: Annotated[str, typer.Option(help="viewer, operator or admin.")] = "operator",
    output: OutputOpt = "text",
) -> None:
    """Create a token; it is printed once and stored only as a hash."""
    from vmplane.jobs.tokens import Role, issue_token

    cmd = begin(output)
    try:
        parsed = Role(role)
    except ValueError:
        raise UsageError(f"--role must be viewer, operator or admin, not {role!r}") from None
    issued = issue_token(cmd.settings, org, parsed)
    if cmd.json:
        print_json({"id": issued.id, "org": org, "role": parsed.value, "token": issued.token})
    else:
        typer.echo(issued.token)
        sys.stderr.write(f"token {issued.id} for org {org} ({parsed.value}); it is not shown again\n")


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (tok-...).")],
    org: Annotated[str, typer.Option(help="The token's organisation.")],
) -> None:
    """Revoke a token at once."""
    from vmplane.jobs.tokens import revoke_token

    if not revoke_token(settings(), token_id, org):
        raise UsageError(f"no live token {token_id} in org {org}")
    typer.echo(f"revoked {token_id}")
