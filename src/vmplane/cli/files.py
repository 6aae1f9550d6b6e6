"""Commands on the environment file alone: init, schema, validate, and plan (which reads vmplane's
records but never starts the sandbox or calls the cloud)."""

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
    SandboxOpt,
    begin,
    load,
    print_json,
    sandbox_endpoint,
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
    """Check an environment file; print every error as FILE:LINE:COL: path: message."""
    cmd = begin(output)
    spec = load(file)
    if cmd.json:
        print_json({"file": str(file), "valid": True, "name": spec.name, "org": spec.org})
    else:
        typer.echo(f"{file}: valid ({spec.name}, {len(spec.pools)} pool{'s' if len(spec.pools) != 1 else ''})")


def plan(file: FileOpt = DEFAULT_FILE, sandbox: SandboxOpt = False, output: OutputOpt = "text") -> None:
    """Show the steps and resources `apply` would run and create, or for an applied environment each
    changed field with its impact (runtime, vm, cloud, identity) and what applying it does."""
    from vmplane.cli.render import show_changes, show_plan
    from vmplane.jobs import operations
    from vmplane.jobs.operations import Decision
    from vmplane.target import Target

    cmd = begin(output)
    spec = load(file)
    # Planning reads vmplane's records only; it neither starts the sandbox nor calls the cloud.
    endpoint = sandbox_endpoint(spec.provider.cloud) if sandbox else None
    where = Target.for_spec(spec, endpoint)
    ap = operations.plan_apply(cmd.settings, spec, where, say=lambda m: typer.echo(m, err=True))
    if cmd.json:
        print_json(ap.to_json())
    else:
        show_changes(cmd.con, ap.changes, ap.refusals)
        if ap.decision is not Decision.refused:
            show_plan(cmd.con, ap.plan)
    raise typer.Exit(EXIT_USAGE if ap.decision is Decision.refused else EXIT_OK)
