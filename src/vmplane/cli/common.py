"""What every command shares: its options, the command preamble, loading the file, the target, the
confirmation, and the one place where a domain error becomes a message and an exit code.

Exit codes: 0 ok, 1 the job failed (or the cloud/sandbox did), 2 usage or validation error; a
`VmplaneError` carries its own (`exit_code`). Keep this module's imports light: every command,
including `--help`, imports it. rich, pydantic, SQLAlchemy and the rest load inside functions.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vmplane.errors import UsageError, VmplaneError

if TYPE_CHECKING:
    from rich.console import Console

    from vmplane.envspec.base import Cloud
    from vmplane.envspec.models import EnvSpec
    from vmplane.sandbox.control import SandboxInfo
    from vmplane.settings import Settings
    from vmplane.target import Target

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# Some of what was asked could not be fetched (named on stderr and in --output json); the rest was.
EXIT_UNAVAILABLE = 3
DEFAULT_FILE = Path("vmplane.env.jsonc")

FileOpt = Annotated[Path, typer.Option("--file", "-f", help="The environment file (default: ./vmplane.env.jsonc).")]
SandboxOpt = Annotated[
    bool,
    typer.Option(
        "--sandbox", help="Run against the embedded sandbox (an emulated AWS account or Google Cloud project)."
    ),
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
# `-o` means the output format on every command; directories are `--dir`/`-d`.
OutputOpt = Annotated[str, typer.Option("--output", "-o", help="text or json (one JSON object on stdout).")]
RefreshOpt = Annotated[
    str,
    typer.Option(
        "--refresh",
        help="true (default): read an applied environment's cloud first and repair what drifted from the file; "
        "false: compare the file with vmplane's record only.",
    ),
]
EnvArg = Annotated[str, typer.Argument(help="Environment name or job id.")]


@dataclass
class Cmd:
    """One command's preamble: the output format, where humans read, and the settings.

    The console and the settings are made on first use: `jobs -o json` never imports rich.
    """

    json: bool
    _con: Console | None = field(default=None, repr=False)
    _settings: Settings | None = field(default=None, repr=False)

    @property
    def con(self) -> Console:
        """Where humans read: stdout, or stderr with --output json (stdout carries only the JSON)."""
        if self._con is None:
            from rich.console import Console

            self._con = Console(stderr=self.json, highlight=False)
        return self._con

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = settings()
        return self._settings


def begin(output: str) -> Cmd:
    """The preamble of every command with --output."""
    if output not in ("text", "json"):
        raise UsageError(f"--output must be text or json, not {output!r}")
    return Cmd(output == "json")


def refresh_flag(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise UsageError(f"--refresh must be true or false, not {value!r}")
    return value.lower() == "true"


def print_error(message: str) -> None:
    """`message` is shown as written: a `[e2-small]` in it is text, not Rich markup."""
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False).print(f"[red]error:[/] {escape(message)}", soft_wrap=True)


def say_on_stderr(message: str) -> None:
    """Progress of a long step, on stderr (stdout may carry --output json)."""
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False).print(f"[dim]{escape(message)}[/]", soft_wrap=True)


@contextmanager
def domain_errors() -> Iterator[None]:
    """The one place a domain error is shown: its message on stderr, and its own exit code.

    A spec file's errors are every issue as FILE:LINE:COL: path: message, then a count.
    """
    try:
        yield
    except VmplaneError as err:
        from vmplane.envspec.load import SpecError

        if isinstance(err, SpecError):
            sys.stderr.write(err.format() + "\n" + err.summary() + "\n")
            sys.exit(err.exit_code)
        print_error(str(err))
        sys.exit(err.exit_code)


@contextmanager
def at_fields(file: Path) -> Iterator[None]:
    """What the cloud refuses before a job exists (an unreadable secret, ...), each problem at its field in
    the file as FILE:LINE:COL when every problem names one; otherwise the refusal as it is."""
    from vmplane.jobs.precheck import RefusedAtFieldsError, RefusedBeforeJobError, has_field, positioned

    try:
        yield
    except RefusedBeforeJobError as err:
        if err.problems and all(has_field(p) for p in err.problems):
            raise RefusedAtFieldsError(positioned(file, err.problems), err.where) from None
        raise


def settings() -> Settings:
    from vmplane.settings import get_settings

    return get_settings()


def load(path: Path) -> EnvSpec:
    """The environment file; the default one, if absent, is a usage error that names where it looked."""
    from vmplane.envspec.load import load_spec

    if path == DEFAULT_FILE and not path.exists():
        raise UsageError(f"no environment file {path} in {Path.cwd()} (pass -f FILE, or `vmplane init` writes one)")
    return load_spec(path)


def sandbox_endpoint(cloud: Cloud | None = None) -> str:
    """The sandbox's address for `cloud`'s API, without starting it (planning and generating only
    write it down)."""
    from vmplane.clouds.registry import sandbox_address

    return sandbox_address(cloud, settings())


def endpoint_of(info: SandboxInfo, cloud: Cloud | None) -> str:
    """The running sandbox's endpoint for `cloud`: the AWS one for AWS and, as before the GCP sandbox,
    for clouds it does not emulate (their driver then answers with its own refusal)."""
    from vmplane.clouds.registry import sandbox_endpoint

    return sandbox_endpoint(cloud, info)


def target(spec: EnvSpec, sandbox: bool, con: Console) -> Target:
    from vmplane.target import Target

    return Target.for_spec(spec, ensure_sandbox(con, spec.provider.cloud) if sandbox else None)


def ensure_sandbox(con: Console, cloud: Cloud | None = None) -> str:
    """Start the sandbox unless it runs; returns its endpoint for `cloud` (AWS by default). A
    SandboxError exits 1."""
    from vmplane.sandbox import control

    before = control.status(settings())
    info = control.start(settings())
    if not before.running:
        con.print(
            f"[dim]sandbox started at {info.endpoint} (AWS) and {info.gcp_endpoint} (Google Cloud); "
            "vmplane sandbox stop ends it[/]"
        )
    return endpoint_of(info, cloud)


def confirm(con: Console, question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{question} needs confirmation: pass --yes when not running interactively")
    if not typer.confirm(question, default=False, err=True):
        con.print("Cancelled; nothing was changed.")
        raise typer.Exit(EXIT_USAGE)


def print_json(obj: object) -> None:
    """One JSON object on stdout (kept here so commands that print JSON need not import rich)."""
    import json

    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
