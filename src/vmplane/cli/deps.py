"""`vmplane deps`: the pinned artifacts VMs install, read from the repositories into the local cache
($VMPLANE_HOME/deps/)."""

from __future__ import annotations

from typing import Annotated

import typer

from vmplane.cli.common import EXIT_OK, EXIT_UNAVAILABLE, OutputOpt, begin, print_json
from vmplane.cli.deps_tf import deps_tf
from vmplane.errors import UsageError

# Some part could not be read: what is missing is named (stderr, the manifest's `unavailable`, the JSON).

deps_app = typer.Typer(
    help="Pinned dependencies: the vmconfig manifests and their artifacts, the Terraform provider cache.",
    no_args_is_help=True,
)

ArchOpt = Annotated[str, typer.Option("--arch", help="amd64 or arm64: the pools' architecture, not this host's.")]
KindOpt = Annotated[list[str] | None, typer.Option("--kind", help="nginx or bare; repeat for both (default: both).")]


@deps_app.command("download")
def download(arch: ArchOpt, kind: KindOpt = None, output: OutputOpt = "text") -> None:
    """Read the repositories' metadata, download every pinned package, save the manifests.

    Each package lands in $VMPLANE_HOME/deps/packages/<sha256>/<file>, refused unless its sha256 is the
    repository index's; one already there is not downloaded again. The manifests become current. What
    cannot be reached is named; a family the current manifest pinned keeps its old entry. Exit 0 when
    everything was pinned, 3 when some part is unavailable (or kept from before).
    """
    from vmplane.deps.download import download as run
    from vmplane.envspec.models import Arch, BootstrapMode

    cmd = begin(output)
    try:
        target = Arch(arch)
        kinds = [BootstrapMode(k) for k in dict.fromkeys(kind or ["nginx", "bare"])]
    except ValueError as err:
        raise UsageError(f"--arch must be amd64 or arm64 and --kind nginx or bare: {err}") from None
    from rich.console import Console

    err_con = Console(stderr=True, highlight=False)

    def say(message: str) -> None:
        err_con.print(message, style="dim", markup=False, soft_wrap=True)

    outcomes, transfer = run(cmd.settings.home, target, kinds, say)
    complete = all(o.complete for o in outcomes)
    for o in outcomes:
        for key, why in {**o.manifest.unavailable, **o.kept}.items():
            err_con.print(f"[yellow]{o.manifest.kind.value}.{target.value}: {key}:[/] ", end="")
            err_con.print(why, markup=False, soft_wrap=True)
    if cmd.json:
        print_json(
            {
                "arch": target.value,
                "manifests": [o.to_json() for o in outcomes],
                "downloaded": [{"url": p.url, "sha256": p.sha256, "size": p.size} for p in transfer.downloaded],
                "reused": len(transfer.reused),
                "downloadedBytes": transfer.bytes,
                "complete": complete,
            }
        )
    else:
        for o in outcomes:
            m = o.manifest
            cmd.con.print(
                f"{m.kind.value}.{target.value}: saved {o.path} "
                f"(pinned: {', '.join([*m.families, *m.images]) or 'nothing'}; "
                f"unavailable: {', '.join(m.unavailable) or 'none'})",
                markup=False,
                soft_wrap=True,
            )
        cmd.con.print(
            f"{len(transfer.downloaded)} package(s) downloaded ({transfer.bytes / 1e6:.1f} MB), "
            f"{len(transfer.reused)} already cached",
            markup=False,
        )
    raise typer.Exit(EXIT_OK if complete else EXIT_UNAVAILABLE)


deps_app.command("tf")(deps_tf)
