"""Commands on the environment file alone: init, schema, validate (no cloud, no credentials), and plan
(which reads vmplane's records and, for a new job, the cloud's answers to stepValidate's read-only checks)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vmplane.cli.common import (
    DEFAULT_FILE,
    EXIT_OK,
    EXIT_USAGE,
    FileOpt,
    OutputOpt,
    RefreshOpt,
    SandboxOpt,
    at_fields,
    begin,
    load,
    print_json,
    refresh_flag,
    say_on_stderr,
    target,
)
from vmplane.errors import UsageError


def init(
    name: Annotated[str, typer.Option(help="Environment name (DNS-safe).")] = "demo",
    org: Annotated[str, typer.Option(help="Organisation id.")] = "acme",
    region: Annotated[
        str | None, typer.Option(help="Cloud region (default: us-east-1 on aws, us-central1 on gcp).")
    ] = None,
    cloud: Annotated[str, typer.Option(help="aws, gcp or proxmox.")] = "aws",
    file: FileOpt = DEFAULT_FILE,
    force: Annotated[bool, typer.Option(help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented starter vmplane.env.jsonc and its local JSON Schema."""
    from vmplane.envspec.base import Cloud
    from vmplane.envspec.schema import write_schema
    from vmplane.envspec.starter import render_starter

    if file.exists() and not force:
        raise UsageError(f"{file} exists; use --force to overwrite it")
    if cloud not in Cloud.__members__:
        raise UsageError(f"--cloud must be aws, gcp or proxmox, not {cloud!r}")
    try:
        text = render_starter(name, org, region, cloud=Cloud(cloud))
    except ValueError as err:
        raise UsageError(str(err)) from None
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    schema_file = write_schema(file.parent)
    typer.echo(f"wrote {file} and {schema_file}")


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


def validate(file: FileOpt = DEFAULT_FILE, output: OutputOpt = "text") -> None:
    """Check an environment file, and that its cloud's driver can run what it asks (an `asg` pool or a load
    balancer on Proxmox VE is not); print every error as FILE:LINE:COL: path: message. Reads no
    credentials and calls no cloud: `plan` runs the checks that read the cloud."""
    from vmplane.envspec.percloud import spec_warnings
    from vmplane.jobs.precheck import positioned, static_problems

    cmd = begin(output)
    spec = load(file)
    if problems := static_problems(spec):
        raise positioned(file, problems)
    warnings = positioned(file, spec_warnings(spec)).issues
    for w in warnings:
        say_on_stderr(f"{file}:{w.line}:{w.col}: warning: {w.path}: {w.message}")
    if cmd.json:
        listed = [{"path": w.path, "line": w.line, "col": w.col, "message": w.message} for w in warnings]
        print_json({"file": str(file), "valid": True, "name": spec.name, "org": spec.org, "warnings": listed})
    else:
        typer.echo(f"{file}: valid ({spec.name}, {len(spec.pools)} pool{'s' if len(spec.pools) != 1 else ''})")


def plan(
    file: FileOpt = DEFAULT_FILE, sandbox: SandboxOpt = False, output: OutputOpt = "text", refresh: RefreshOpt = "true"
) -> None:
    """Show the steps and resources `apply` would run and create, or for an applied environment each
    changed field with its impact (runtime, vm, cloud, identity) and what applying it does. Exits 2,
    with the reasons, when `apply` would be refused: for a new job that includes what the cloud would
    refuse at stepValidate (read-only calls: the instance type in the zones, images, DNS zone, templates).
    An applied environment's cloud is read (`--refresh false` skips it): what drifted shows as repairs."""
    from vmplane.cli.render import show_changes, show_plan
    from vmplane.jobs import operations
    from vmplane.jobs.operations import Decision

    cmd = begin(output)
    spec = load(file)
    # The cloud's read-only checks need the sandbox running, as `apply` does; it creates nothing.
    where = target(spec, sandbox, cmd.con)
    with at_fields(file):
        ap = operations.plan_apply(cmd.settings, spec, where, say=say_on_stderr, refresh=refresh_flag(refresh))
    if cmd.json:
        print_json(ap.to_json())
    else:
        show_changes(cmd.con, ap.changes, ap.refusals)
        if ap.decision is not Decision.refused:
            show_plan(cmd.con, ap.plan)
    raise typer.Exit(EXIT_USAGE if ap.decision is Decision.refused else EXIT_OK)
