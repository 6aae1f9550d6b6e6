"""The `vmplane` command: wiring and rendering only; decisions live in jobs/ and pipeline/.

Stages follow one shape: load → plan → print → confirm unless --yes → run → summary.
Exit codes: 0 ok, 1 the job failed (or the cloud/sandbox did), 2 usage or validation error.
Heavy imports (boto3, dbos, sqlalchemy, moto) happen inside commands so `--help` and `validate` start fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from vmplane.envspec.models import EnvSpec
    from vmplane.jobs.operations import OperationPlan
    from vmplane.jobs.service import JobView, Phase
    from vmplane.settings import Settings
    from vmplane.target import Target

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

app = typer.Typer(
    name="vmplane",
    help="Provision production-shape VM environments (private network, NAT, pools, exec channel) from one JSONC file.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
sandbox_app = typer.Typer(
    help="The sandbox: an emulated AWS account (moto's server) on 127.0.0.1.", no_args_is_help=True
)
app.add_typer(sandbox_app, name="sandbox")

FileOpt = Annotated[Path, typer.Option("--file", "-f", help="The environment file (vmplane.env.jsonc).")]
SandboxOpt = Annotated[bool, typer.Option("--sandbox", help="Run against the embedded emulated AWS account.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
OutputOpt = Annotated[str, typer.Option("--output", "-o", help="text or json (one JSON object on stdout).")]


# ---- shared plumbing ------------------------------------------------------------------------------


def _json(output: str) -> bool:
    if output not in ("text", "json"):
        _die(f"--output must be text or json, not {output!r}", EXIT_USAGE)
    return output == "json"


def _die(message: str, code: int) -> NoReturn:
    from rich.console import Console

    Console(stderr=True, highlight=False).print(f"[red]error:[/] {message}", soft_wrap=True)
    raise typer.Exit(code)


def _settings() -> Settings:
    from vmplane.settings import get_settings

    return get_settings()


def _load(path: Path) -> EnvSpec:
    from vmplane.envspec.load import SpecError, load_spec

    try:
        return load_spec(path)
    except SpecError as err:
        sys.stderr.write(err.format() + "\n")
        n = len(err.issues)
        sys.stderr.write(f"{n} error{'s' if n != 1 else ''} in {path}; nothing was created.\n")
        raise typer.Exit(EXIT_USAGE) from None


def _target(spec: EnvSpec, sandbox: bool, con: Console) -> Target:
    from vmplane.target import Target

    if not sandbox:
        return Target.for_spec(spec, None)
    info = _ensure_sandbox(con)
    return Target.for_spec(spec, info)


def _ensure_sandbox(con: Console) -> str:
    from vmplane.sandbox import control

    settings = _settings()
    try:
        before = control.status(settings)
        info = control.start(settings)
    except control.SandboxError as err:
        _die(str(err), EXIT_FAILED)
    if not before.running:
        con.print(f"[dim]sandbox started at {info.endpoint} (vmplane sandbox stop to end it)[/]")
    return info.endpoint


def _confirm(con: Console, question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        _die(f"{question} needs confirmation: pass --yes when not running interactively", EXIT_USAGE)
    if not typer.confirm(question, default=False, err=True):
        con.print("Cancelled; nothing was changed.")
        raise typer.Exit(EXIT_USAGE)


def _run_job(job_id: str, phase: Phase, con: Console) -> JobView:
    from vmplane.cli.render import StepPrinter
    from vmplane.jobs import operations

    settings = _settings()
    printer = StepPrinter(con, phase, operations.find_job(settings, job_id))
    job = operations.run(settings, job_id, phase=phase, on_progress=printer)
    recovered = operations.finish_recovered()
    if recovered:
        con.print(
            f"[dim]also finished {len(recovered)} interrupted workflow(s) recovered at start: {', '.join(recovered)}[/]"
        )
    return job


def _finish(job: JobView, json_output: bool, con: Console, ok_status: str) -> NoReturn:
    from vmplane.cli.render import print_json, show_job

    if json_output:
        print_json(job.to_json())
    else:
        con.print()
        show_job(con, job)
    raise typer.Exit(EXIT_OK if job.status.value == ok_status else EXIT_FAILED)


def _finish_operation(job: JobView, json_output: bool, con: Console) -> NoReturn:
    op = job.operation
    if op is not None and not json_output:
        for note in op.notes:
            con.print(f"[yellow]note:[/] {note}", soft_wrap=True)
    _finish(job, json_output, con, "succeeded")


@contextmanager
def _job_errors() -> Iterator[None]:
    """Known domain errors become one clean line and exit code 2."""
    from vmplane.jobs.operations import OperationError
    from vmplane.jobs.service import JobConflictError, JobNotFoundError

    try:
        yield
    except (JobConflictError, JobNotFoundError, OperationError) as err:
        _die(str(err), EXIT_USAGE)


# ---- file commands --------------------------------------------------------------------------------


@app.command()
def init(
    name: Annotated[str, typer.Option(help="Environment name (DNS-safe).")] = "demo",
    org: Annotated[str, typer.Option(help="Organisation id.")] = "acme",
    region: Annotated[str, typer.Option(help="Cloud region.")] = "us-east-1",
    file: FileOpt = Path("vmplane.env.jsonc"),
    force: Annotated[bool, typer.Option(help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented starter vmplane.env.jsonc and its local JSON Schema."""
    from vmplane.envspec.schema import write_schema
    from vmplane.envspec.starter import render_starter

    if file.exists() and not force:
        _die(f"{file} exists; use --force to overwrite it", EXIT_USAGE)
    try:
        text = render_starter(name, org, region)
    except ValueError as err:
        _die(str(err), EXIT_USAGE)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    schema = write_schema(file.parent)
    typer.echo(f"wrote {file} and {schema}")


@app.command()
def schema(
    out_dir: Annotated[Path, typer.Option("--dir", "-d", help="Directory for vmplane.env.schema.json.")] = Path(),
    stdout: Annotated[bool, typer.Option("--stdout", help="Print the schema instead of writing it.")] = False,
) -> None:
    """Write the JSON Schema that editors use to validate and complete environment files."""
    from vmplane.envspec.schema import env_json_schema, write_schema

    if stdout:
        import json

        typer.echo(json.dumps(env_json_schema(), indent=2, sort_keys=True))
        return
    typer.echo(f"wrote {write_schema(out_dir)}")


@app.command()
def validate(file: FileOpt, output: OutputOpt = "text") -> None:
    """Check an environment file; print every error as FILE:LINE:COL: path: message."""
    json_output = _json(output)
    spec = _load(file)
    if json_output:
        from vmplane.cli.render import print_json

        print_json({"file": str(file), "valid": True, "name": spec.name, "org": spec.org})
    else:
        typer.echo(f"{file}: valid ({spec.name}, {len(spec.pools)} pool{'s' if len(spec.pools) != 1 else ''})")


# ---- cloud commands -------------------------------------------------------------------------------


@app.command()
def plan(file: FileOpt, sandbox: SandboxOpt = False, output: OutputOpt = "text") -> None:
    """Show the steps and resources `apply` would run and create, or for an applied environment each
    changed field with its impact (runtime, vm, cloud, identity) and what applying it does."""
    from vmplane.cli.render import consoles, print_json, show_changes, show_plan
    from vmplane.jobs import operations
    from vmplane.jobs.operations import Decision
    from vmplane.target import Target

    json_output = _json(output)
    con, _ = consoles(json_output)
    spec = _load(file)
    # Planning reads vmplane's records only; it neither starts the sandbox nor calls the cloud.
    endpoint = f"http://127.0.0.1:{_settings().sandbox_port}" if sandbox else None
    with _job_errors():
        ap = operations.plan_apply(_settings(), spec, Target.for_spec(spec, endpoint))
    if json_output:
        print_json(ap.to_json())
    else:
        show_changes(con, ap.changes, ap.refusals)
        if ap.decision is not Decision.refused:
            show_plan(con, ap.plan)
    raise typer.Exit(EXIT_USAGE if ap.decision is Decision.refused else EXIT_OK)


@app.command()
def apply(file: FileOpt, sandbox: SandboxOpt = False, yes: YesOpt = False, output: OutputOpt = "text") -> None:
    """Provision the environment (or update an applied one in place): plan, confirm, run with live progress."""
    from vmplane.cli.render import consoles, print_json, show_changes, show_plan
    from vmplane.jobs import operations
    from vmplane.jobs.operations import Decision
    from vmplane.jobs.service import Phase

    json_output = _json(output)
    con, _ = consoles(json_output)
    spec = _load(file)
    target = _target(spec, sandbox, con)
    settings = _settings()
    with _job_errors():
        ap = operations.plan_apply(settings, spec, target)
        if ap.decision is Decision.no_changes:
            assert ap.job is not None
            con.print("No changes. The environment matches the file.")
            if json_output:
                print_json(ap.job.to_json())
            raise typer.Exit(EXIT_OK)
        if ap.decision is Decision.refused:
            show_changes(con, ap.changes, [])
            reasons = "\n  ".join(ap.refusals)
            _die(
                f"{len(ap.refusals)} change(s) cannot be applied in place; nothing was changed:\n  {reasons}",
                EXIT_USAGE,
            )
        if ap.decision is Decision.update:
            assert ap.job is not None
            show_changes(con, ap.changes, [])
            _confirm(con, f"Update {ap.job.org}/{ap.job.env} in place?", yes)
            operations.begin_update(settings, ap.job, spec, ap)
            con.print(f"\njob [bold]{ap.job.id}[/] update")
            _finish_operation(_run_job(ap.job.id, Phase.operation, con), json_output, con)
        show_plan(con, ap.plan)
        _confirm(con, "Apply this plan?", yes)
        job_id = operations.create_or_update_job(settings, spec, target, ap)
    con.print(f"\njob [bold]{job_id}[/]")
    job = _run_job(job_id, Phase.provision, con)
    _finish(job, json_output, con, "succeeded")


@app.command()
def destroy(
    file: Annotated[Path | None, typer.Option("--file", "-f", help="The environment file.")] = None,
    job_ref: Annotated[
        str | None, typer.Option("--job", help="A job id or environment name instead of a file.")
    ] = None,
    sandbox: SandboxOpt = False,
    yes: YesOpt = False,
    output: OutputOpt = "text",
) -> None:
    """Tear the environment down in the seed's order, leaving nothing tagged with its job."""
    from vmplane.cli.render import consoles, print_json, show_plan
    from vmplane.jobs import operations
    from vmplane.jobs.service import Phase

    json_output = _json(output)
    con, _ = consoles(json_output)
    settings = _settings()
    if (file is None) == (job_ref is None):
        _die("give exactly one of --file or --job", EXIT_USAGE)
    with _job_errors():
        if file is not None:
            spec = _load(file)
            job = operations.current_job_for(settings, spec)
            if job is None:
                con.print(f"Nothing to destroy: {spec.org}/{spec.name} has no job.")
                if json_output:
                    print_json({"env": spec.name, "org": spec.org, "status": "absent"})
                raise typer.Exit(EXIT_OK)
        else:
            assert job_ref is not None
            job = operations.find_job(settings, job_ref)
        if job.status.value == "deleted":
            con.print(f"{job.id} is already deleted.")
            if json_output:
                print_json(job.to_json())
            raise typer.Exit(EXIT_OK)
        if job.target.sandbox != sandbox and file is not None:
            where = "the sandbox" if job.target.sandbox else "a real cloud account"
            _die(f"job {job.id} lives on {where}; {'add' if job.target.sandbox else 'drop'} --sandbox", EXIT_USAGE)
        if job.target.sandbox:
            _ensure_sandbox(con)
        show_plan(con, operations.plan_destroy(settings, job))
        _confirm(con, f"Destroy {job.org}/{job.env} ({job.id})?", yes)
        operations.begin_destroy(settings, job.id)
    con.print(f"\njob [bold]{job.id}[/] teardown")
    done = _run_job(job.id, Phase.teardown, con)
    _finish(done, json_output, con, "deleted")


@app.command()
def resume(
    job_ref: Annotated[str, typer.Argument(help="Job id or environment name.")], output: OutputOpt = "text"
) -> None:
    """Continue an interrupted or failed job (or operation) at the step where it stopped."""
    from vmplane.cli.render import consoles
    from vmplane.jobs import operations
    from vmplane.jobs.operations import resume_phase
    from vmplane.jobs.service import Phase

    json_output = _json(output)
    con, _ = consoles(json_output)
    settings = _settings()
    with _job_errors():
        job = operations.find_job(settings, job_ref)
    phase = resume_phase(job)
    if phase is None:
        con.print(f"{job.id} is {job.status.value}; nothing to resume.")
        _finish(job, json_output, con, job.status.value)
    if job.target.sandbox:
        _ensure_sandbox(con)
    if job.status.value == "delete_failed":
        operations.begin_destroy(settings, job.id)
    con.print(f"resuming [bold]{job.id}[/] ({phase.value})")
    done = _run_job(job.id, phase, con)
    if phase is Phase.operation:
        _finish_operation(done, json_output, con)
    _finish(done, json_output, con, "deleted" if phase is Phase.teardown else "succeeded")


@app.command("exec")
def exec_cmd(
    env: Annotated[str, typer.Argument(help="Environment name or job id.")],
    vm: Annotated[str, typer.Argument(help="VM name (<env>-<pool>-<index>) or instance id.")],
    command: Annotated[list[str] | None, typer.Argument(help="The command, after --.")] = None,
    interactive: Annotated[bool, typer.Option("--interactive", "-i", help="Start an SSM session.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the command.")] = 120.0,
    output: OutputOpt = "text",
) -> None:
    """Run a command on a VM through the IAM-gated exec channel (SSM Run Command). No SSH, ever."""
    import shlex
    import shutil

    from vmplane.cli.render import consoles, print_json
    from vmplane.clouds.errors import CloudError
    from vmplane.jobs import operations

    json_output = _json(output)
    con, _ = consoles(json_output)
    with _job_errors():
        target = operations.exec_target(_settings(), env, vm)
    job = target.job
    if job.infra.ExecMode != "SSM":
        _die(f"exec mode {job.infra.ExecMode} is not available yet (SSM is)", EXIT_USAGE)
    session = ["aws", "ssm", "start-session", "--target", target.instance_id, "--region", job.target.region]
    if interactive:
        if job.target.sandbox or not shutil.which("session-manager-plugin") or not shutil.which("aws"):
            why = "the sandbox has no SSM sessions" if job.target.sandbox else "the session plugin is not installed"
            con.print(f"{why}; with the AWS CLI and session-manager-plugin, run:")
            typer.echo(shlex.join(session))
            raise typer.Exit(EXIT_OK)
        os.execvp("aws", session)
    if not command:
        _die("give a command after --, or --interactive", EXIT_USAGE)
    if job.target.sandbox:
        con.print("[dim]sandbox: the emulator records the command but does not run it; output is empty[/]")
    with _job_errors():
        if job.target.sandbox:
            _ensure_sandbox(con)
        try:
            result = operations.exec_command(target, shlex.join(command), timeout)
        except CloudError as err:
            _die(str(err), EXIT_FAILED)
    if json_output:
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


# ---- OpenTofu/Terraform -----------------------------------------------------------------------

tf_app = typer.Typer(
    help="The environment as an OpenTofu/Terraform stack, its files split by the impact of a change.",
    no_args_is_help=True,
)
app.add_typer(tf_app, name="tf")
OutDirOpt = Annotated[
    Path | None, typer.Option("--out", "-o", help="Directory for the stack (default: the file's directory).")
]
# `-o` is the stack directory here (`tf generate -f FILE -o DIR`); the format is `--output` only.
TfOutputOpt = Annotated[str, typer.Option("--output", help="text or json (one JSON object on stdout).")]
TfSandboxOpt = Annotated[
    bool, typer.Option("--sandbox", help="Also write vmplane.env.sandbox_override.tf pointing at the sandbox.")
]


def _tf_write(file: Path, out: Path | None, sandbox: bool, output: str, *, upgrade: bool) -> None:
    from vmplane.cli.render import print_json
    from vmplane.tf.generate import PREFIX, GenerateError, generate, is_managed, write

    json_output = _json(output)
    spec = _load(file)
    out_dir = out if out is not None else file.parent
    if upgrade and not any(is_managed(p) for p in out_dir.glob(f"{PREFIX}*.tf")):
        _die(f"{out_dir} has no vmplane-managed files to upgrade; run `vmplane tf generate` first", EXIT_USAGE)
    endpoint = f"http://127.0.0.1:{_settings().sandbox_port}" if sandbox else None
    try:
        result = write(generate(spec, endpoint), out_dir)
    except GenerateError as err:
        _die(str(err), EXIT_USAGE)
    if json_output:
        print_json({"dir": str(out_dir), **result.__dict__})
        return
    for name in result.written:
        typer.echo(f"wrote {out_dir / name}")
    for name in result.removed:
        typer.echo(f"removed {out_dir / name} (no longer generated)")
    typer.echo(
        f"{len(result.written)} written, {len(result.unchanged)} unchanged, {len(result.removed)} removed; "
        "files vmplane did not write were left alone"
    )


@tf_app.command("generate")
def tf_generate(
    file: FileOpt, out: OutDirOpt = None, sandbox: TfSandboxOpt = False, output: TfOutputOpt = "text"
) -> None:
    """Write the managed vmplane.env.*.tf files (and the editor schema) for FILE."""
    _tf_write(file, out, sandbox, output, upgrade=False)


@tf_app.command("upgrade")
def tf_upgrade(
    file: FileOpt, out: OutDirOpt = None, sandbox: TfSandboxOpt = False, output: TfOutputOpt = "text"
) -> None:
    """Regenerate an existing stack's managed files with this vmplane; your own files stay untouched."""
    _tf_write(file, out, sandbox, output, upgrade=True)


tf_state_app = typer.Typer(help="The generated stack's remote state in S3.", no_args_is_help=True)
tf_app.add_typer(tf_state_app, name="state")


@tf_state_app.command("init")
def tf_state_init(file: FileOpt, sandbox: SandboxOpt = False, output: TfOutputOpt = "text") -> None:
    """Create the S3 state object with a conditional put (If-None-Match: *): never overwrites one."""
    from vmplane.cli.render import consoles, print_json
    from vmplane.clouds.aws.session import AwsClients, AwsTarget
    from vmplane.clouds.errors import CloudError
    from vmplane.tf.state import StateExistsError, init_state

    json_output = _json(output)
    con, _ = consoles(json_output)
    spec = _load(file)
    if spec.state is None:
        _die(f'{file}: add a "state": {{"bucket": ...}} block to keep the stack\'s state in S3', EXIT_USAGE)
    endpoint = _ensure_sandbox(con) if sandbox else None
    region = spec.state.region or spec.provider.region
    target = AwsTarget(region=region, profile=None if sandbox else spec.provider.profile, endpoint_url=endpoint)
    try:
        loc = init_state(AwsClients(target), spec)
    except StateExistsError as err:
        _die(str(err), EXIT_USAGE)
    except CloudError as err:
        _die(str(err), EXIT_FAILED)
    if json_output:
        print_json({"bucket": loc.bucket, "key": loc.key, "region": loc.region, "created": True})
    else:
        typer.echo(f"created {loc.url} (empty state; conditional put, nothing overwritten)")


# ---- operations on a provisioned environment (vmOp) -----------------------------------------------

lb_app = typer.Typer(
    help="Attach or detach an environment's load balancer; the VMs keep running.", no_args_is_help=True
)
app.add_typer(lb_app, name="lb")
EnvArg = Annotated[str, typer.Argument(help="Environment name or job id.")]


def _operate(ref: str, build: Callable[[JobView], OperationPlan], yes: bool, output: str) -> NoReturn:
    """One shape for every vmOp: find the job, plan, confirm, record the operation, run it, report."""
    from vmplane.cli.render import consoles, show_plan
    from vmplane.jobs import operations
    from vmplane.jobs.service import Phase

    json_output = _json(output)
    con, _ = consoles(json_output)
    settings = _settings()
    with _job_errors():
        job = operations.find_job(settings, ref)
        op = build(job)
        if job.target.sandbox:
            _ensure_sandbox(con)
        show_plan(con, op.plan)
        _confirm(con, f"Run {op.kind} on {job.org}/{job.env} ({job.id})?", yes)
        record = operations.begin_operation(settings, op)
    con.print(f"\njob [bold]{job.id}[/] {op.kind} ({record.id})")
    _finish_operation(_run_job(job.id, Phase.operation, con), json_output, con)


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
        lb = _load(file).load_balancer
        if lb is None:
            _die(f"{file} has no loadBalancer block", EXIT_USAGE)
    _operate(env, lambda job: operations.plan_attach_lb(job, lb), yes, output)


@lb_app.command("detach")
def lb_detach(env: EnvArg, yes: YesOpt = False, output: OutputOpt = "text") -> None:
    """Remove the load balancer, its target group, listeners, certificate and DNS record; the VMs stay."""
    from vmplane.jobs import operations

    _operate(env, operations.plan_detach_lb, yes, output)


@app.command()
def scale(
    env: EnvArg,
    pool: Annotated[str, typer.Argument(help="Pool name.")],
    min_size: Annotated[int | None, typer.Option("--min", help="ASG minimum size.")] = None,
    max_size: Annotated[int | None, typer.Option("--max", help="ASG maximum size.")] = None,
    desired: Annotated[int | None, typer.Option("--desired", help="Desired size (a Fixed pool's size).")] = None,
    yes: YesOpt = False,
    output: OutputOpt = "text",
) -> None:
    """Change a pool's sizes in place; running VMs stay (a smaller Fixed pool drops its highest-numbered VMs)."""
    from vmplane.jobs import operations

    _operate(
        env,
        lambda job: operations.plan_scale(job, pool, min_size=min_size, max_size=max_size, desired=desired),
        yes,
        output,
    )


@app.command()
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


# ---- the API server and its tokens -------------------------------------------------------------

tokens_app = typer.Typer(help="API bearer tokens, scoped to one org with a role.", no_args_is_help=True)
app.add_typer(tokens_app, name="tokens")


@app.command()
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
    """Run the provisioning API (/provisioning-jobs)."""
    import uvicorn

    from vmplane.api.app import create_app

    # Access logs carry method, path and status only: never headers, so never a token.
    app_ = create_app(_settings(), run_workflows=worker)
    uvicorn.run(app_, host=host, port=port, log_level="info", proxy_headers=False)


@app.command("worker")
def worker_cmd(
    heartbeat: Annotated[float, typer.Option(help="Seconds between heartbeats.")] = 2.0,
    dead_after: Annotated[float, typer.Option(help="A worker silent this long is taken over.")] = 15.0,
) -> None:
    """Run queued jobs (PostgreSQL: VMPLANE_DATABASE_URL), and take over the jobs of dead workers."""
    import signal
    import threading

    from vmplane.pipeline import worker

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    worker.run(_settings(), heartbeat=heartbeat, dead_after=dead_after, stop=stop)


@tokens_app.command("create")
def tokens_create(
    org: Annotated[str, typer.Option(help="The organisation the token acts for.")],
    role: Annotated[str, typer.Option(help="viewer, operator or admin.")] = "operator",
    output: OutputOpt = "text",
) -> None:
    """Create a token; it is printed once and stored only as a hash."""
    from vmplane.cli.render import print_json
    from vmplane.jobs.tokens import Role, create_token
    from vmplane.store.db import transaction

    json_output = _json(output)
    try:
        parsed = Role(role)
    except ValueError:
        _die(f"--role must be viewer, operator or admin, not {role!r}", EXIT_USAGE)
    with transaction(_settings().db_url) as s:
        token, row = create_token(s, org, parsed)
        token_id = row.id
    if json_output:
        print_json({"id": token_id, "org": org, "role": parsed.value, "token": token})
    else:
        typer.echo(token)
        sys.stderr.write(f"token {token_id} for org {org} ({parsed.value}); it is not shown again\n")


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (tok-...).")],
    org: Annotated[str, typer.Option(help="The token's organisation.")],
) -> None:
    """Revoke a token at once."""
    from vmplane.jobs.tokens import revoke
    from vmplane.store.db import transaction

    with transaction(_settings().db_url) as s:
        if not revoke(s, token_id, org):
            _die(f"no live token {token_id} in org {org}", EXIT_USAGE)
    typer.echo(f"revoked {token_id}")


# ---- read-only commands ---------------------------------------------------------------------------


@app.command()
def status(
    job_ref: Annotated[str | None, typer.Argument(help="Job id or environment name.")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="The environment file.")] = None,
    output: OutputOpt = "text",
) -> None:
    """Show a job: status, steps, VMs (reads vmplane's records; calls no cloud)."""
    from vmplane.cli.render import consoles, print_json, show_job
    from vmplane.jobs import operations

    json_output = _json(output)
    con, _ = consoles(json_output)
    settings = _settings()
    with _job_errors():
        if file is not None:
            spec = _load(file)
            job = operations.current_job_for(settings, spec)
            if job is None:
                _die(f"{spec.org}/{spec.name} has no job (vmplane apply -f {file})", EXIT_USAGE)
        elif job_ref is not None:
            job = operations.find_job(settings, job_ref)
        else:
            _die("give a job id, an environment name, or --file", EXIT_USAGE)
    if json_output:
        print_json(job.to_json())
    else:
        show_job(con, job)


@app.command()
def envs(output: OutputOpt = "text", org: Annotated[str | None, typer.Option(help="Only this org.")] = None) -> None:
    """The inventory: environments registered by stepRegisterSpace."""
    from rich.table import Table

    from vmplane.cli.render import consoles, print_json
    from vmplane.jobs import service as jobs
    from vmplane.store.db import transaction

    json_output = _json(output)
    con, _ = consoles(json_output)
    with transaction(_settings().db_url) as s:
        rows = [
            {
                "org": e.org,
                "name": e.name,
                "job": e.job_id,
                "cloud": e.cloud,
                "region": e.region,
                "registeredAt": e.registered_at.isoformat(),
                "outputs": e.outputs,
            }
            for e in jobs.list_envs(s, org)
        ]
    if json_output:
        print_json({"environments": rows})
        return
    if not rows:
        con.print("No environments yet (vmplane apply -f FILE).")
        return
    t = Table(box=None)
    for col in ("ORG", "NAME", "JOB", "WHERE", "VMS"):
        t.add_column(col)
    for r in rows:
        vms = r["outputs"].get("vms", [])
        ready = sum(1 for v in vms if v.get("state") == "ready")
        t.add_row(r["org"], r["name"], r["job"], r["outputs"].get("target", r["region"]), f"{ready}/{len(vms)} ready")
    con.print(t)


@app.command("jobs")
def jobs_cmd(
    output: OutputOpt = "text", org: Annotated[str | None, typer.Option(help="Only this org.")] = None
) -> None:
    """Recent provisioning jobs."""
    from rich.table import Table

    from vmplane.cli.render import consoles, print_json
    from vmplane.jobs import service as jobs
    from vmplane.store.db import transaction

    json_output = _json(output)
    con, _ = consoles(json_output)
    with transaction(_settings().db_url) as s:
        views = [jobs.view(r) for r in jobs.list_jobs(s, org)]
    if json_output:
        print_json({"jobs": [v.to_json() for v in views]})
        return
    if not views:
        con.print("No jobs yet.")
        return
    t = Table(box=None)
    for col in ("JOB", "ORG", "ENV", "STATUS", "STEPS", "UPDATED"):
        t.add_column(col)
    for v in views:
        done = sum(1 for s in v.steps if s.status.value == "succeeded")
        t.add_row(v.id, v.org, v.env, v.status.value, f"{done}/{len(v.steps)}", f"{v.updated_at:%Y-%m-%d %H:%M:%S}")
    con.print(t)


# ---- sandbox --------------------------------------------------------------------------------------


def _sandbox_call(action: str, output: str) -> None:
    from vmplane.cli.render import print_json
    from vmplane.sandbox import control

    json_output = _json(output)
    try:
        info = getattr(control, action)(_settings())
    except control.SandboxError as err:
        _die(str(err), EXIT_FAILED)
    if json_output:
        print_json(info.to_json())
    else:
        state = "running" if info.running else "stopped"
        typer.echo(f"sandbox {state} at {info.endpoint}" + (f" (pid {info.pid})" if info.pid and info.running else ""))


@sandbox_app.command("start")
def sandbox_start(output: OutputOpt = "text") -> None:
    """Start the sandbox (if not running) and leave it running."""
    _sandbox_call("start", output)


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


def main() -> None:
    try:
        app()
    finally:
        if "vmplane.pipeline.engine" in sys.modules:
            from vmplane.pipeline import engine

            engine.shutdown()
