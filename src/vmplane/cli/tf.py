"""`vmplane tf`: the environment as an OpenTofu/Terraform stack, and its remote state (S3, Cloud Storage)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vmplane.bootstrap import vmconfig, vmconfig_fetch
from vmplane.cli.common import (
    DEFAULT_FILE,
    FileOpt,
    OutputOpt,
    SandboxOpt,
    begin,
    ensure_sandbox,
    load,
    print_json,
    sandbox_endpoint,
)
from vmplane.errors import UsageError

if TYPE_CHECKING:
    from vmplane.envspec.models import Cloud

tf_app = typer.Typer(
    help="The environment as an OpenTofu/Terraform stack, its files split by the impact of a change.",
    no_args_is_help=True,
)
tf_state_app = typer.Typer(help="The generated stack's remote state (S3 or Cloud Storage).", no_args_is_help=True)
tf_app.add_typer(tf_state_app, name="state")

# `-o` is the output format, as on every command; the stack's directory is `--dir`/`-d`.
DirOpt = Annotated[
    Path | None, typer.Option("--dir", "-d", help="Directory for the stack (default: the file's directory).")
]
# `--out` was the directory option (with `-o`) before `-o` meant --output everywhere; kept, hidden.
OutAliasOpt = Annotated[Path | None, typer.Option("--out", hidden=True, help="Deprecated: use --dir.")]
TfSandboxOpt = Annotated[
    bool, typer.Option("--sandbox", help="Also write vmplane.env.sandbox_override.tf pointing at the sandbox.")
]


def _tf_write(file: Path, out_dir: Path | None, out: Path | None, sandbox: bool, output: str, *, upgrade: bool) -> None:
    from vmplane.tf.generate import PREFIX, generate, is_managed, write

    cmd = begin(output)
    if out_dir is not None and out is not None and out_dir != out:
        raise UsageError("give --dir once (--out is its old name)")
    spec = load(file)
    stack = out_dir or out or file.parent
    if upgrade and not any(is_managed(p) for p in stack.glob(f"{PREFIX}*.tf")):
        raise UsageError(f"{stack} has no vmplane-managed files to upgrade; run `vmplane tf generate` first")

    def say(message: str) -> None:
        typer.echo(message, err=True)

    # A real stack's VMs boot: what they need is fetched first, as `apply` does (the sandbox stays offline).
    left = [] if sandbox else vmconfig_fetch.fetch_missing(spec, cmd.settings.home, say)
    result = write(generate(spec, sandbox_endpoint(spec.provider.cloud) if sandbox else None), stack)
    if sandbox:
        for u in vmconfig.unpinned(spec, cmd.settings.home):
            say(f"note: sandbox: a real VM would fail closed here: {u.message()} (the sandbox stack applies)")
    elif left:  # written anyway: the copy may be edited; the precondition checks it
        for problem in [u.message() for u in left] + [vmconfig.ways_out(spec, left, cmd.settings.home)]:
            say(f"warning: {problem} (terraform plan fails until the copy pins it)")
    cache = _provider_cache(cmd.settings.home, spec.provider.cloud, stack, refresh=upgrade)
    if cmd.json:
        print_json({"dir": str(stack), **result.__dict__, "providerCache": cache})
        return
    for name in result.written:
        typer.echo(f"wrote {stack / name}")
    for name in result.removed:
        typer.echo(f"removed {stack / name} (no longer generated)")
    typer.echo(
        f"{len(result.written)} written, {len(result.unchanged)} unchanged, {len(result.removed)} removed; "
        "files vmplane did not write were left alone"
    )


def _provider_cache(home: Path, cloud: Cloud, stack: Path, *, refresh: bool) -> dict[str, object]:
    """Point the stack at the offline provider cache, first refreshing its lock on `tf upgrade`."""
    from vmplane.deps.tf_cache import TerraformError, lock_path, saved_platforms
    from vmplane.tf import provider_cache

    refreshed: list[str] = []
    platforms = saved_platforms(home, cloud.value)
    if refresh and lock_path(home, cloud.value).is_file() and platforms:
        fix = f"run `vmplane deps tf --cloud {cloud.value} --platform {' --platform '.join(platforms)}` where it is"
        try:
            got = provider_cache.refresh(home, cloud, platforms, lambda m: typer.echo(m, err=True))
            refreshed = got.platforms
            for why in got.unavailable:
                typer.echo(f"warning: provider cache: {why}", err=True)
            if got.unavailable:
                typer.echo(f"warning: the provider source is not fully reachable: {fix}", err=True)
        except TerraformError as err:
            typer.echo(f"warning: provider cache not refreshed: {err}\n{fix}", err=True)
    attached = provider_cache.attach(home, cloud, stack)
    typer.echo(attached.note, err=True)
    return {"lock": attached.lock, "plugins": attached.plugins, "refreshed": refreshed, "note": attached.note}


@tf_app.command("generate")
def tf_generate(
    file: FileOpt = DEFAULT_FILE,
    out_dir: DirOpt = None,
    sandbox: TfSandboxOpt = False,
    output: OutputOpt = "text",
    out: OutAliasOpt = None,
) -> None:
    """Write the managed vmplane.env.*.tf files (and the editor schema) for FILE."""
    _tf_write(file, out_dir, out, sandbox, output, upgrade=False)


@tf_app.command("upgrade")
def tf_upgrade(
    file: FileOpt = DEFAULT_FILE,
    out_dir: DirOpt = None,
    sandbox: TfSandboxOpt = False,
    output: OutputOpt = "text",
    out: OutAliasOpt = None,
) -> None:
    """Regenerate an existing stack's managed files with this vmplane; your own files stay untouched."""
    _tf_write(file, out_dir, out, sandbox, output, upgrade=True)


@tf_state_app.command("init")
def tf_state_init(file: FileOpt = DEFAULT_FILE, sandbox: SandboxOpt = False, output: OutputOpt = "text") -> None:
    """Create the state object, never overwriting one: S3 with If-None-Match: * (AWS), Cloud Storage with
    ifGenerationMatch=0 (Google Cloud, creating or adopting the bucket)."""
    from vmplane.tf.state import init_state_for

    cmd = begin(output)
    spec = load(file)
    if spec.state is None:
        raise UsageError(f'{file}: add a "state": {{"bucket": ...}} block to keep the stack\'s state in a bucket')
    # StateExistsError (exit 2) and CloudError (exit 1) are reported by the CLI's one error handler.
    loc = init_state_for(spec, ensure_sandbox(cmd.con, spec.provider.cloud) if sandbox else None)
    if cmd.json:
        print_json({**loc.report(), "created": True})
    else:
        typer.echo(f"created {loc.url} ({loc.note})")
