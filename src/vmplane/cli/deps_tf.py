"""`vmplane deps tf`: the offline Terraform provider cache and lock the generated stacks use."""

from __future__ import annotations

import re
from typing import Annotated

import typer

from vmplane.cli.common import EXIT_UNAVAILABLE, OutputOpt, begin, print_json
from vmplane.errors import UsageError

PlatformOpt = Annotated[
    list[str] | None,
    typer.Option("--platform", help="OS_ARCH terraform will run on (e.g. linux_amd64); repeat for several."),
]
CloudOpt = Annotated[
    list[str] | None, typer.Option("--cloud", help="aws or gcp; repeat for both (default: every cloud).")
]
_PLATFORM = re.compile(r"^[a-z0-9]+_[a-z0-9]+$")


def deps_tf(platform: PlatformOpt = None, cloud: CloudOpt = None, output: OutputOpt = "text") -> None:
    """Mirror the generated stacks' providers into $VMPLANE_HOME/deps/tf and lock them, per cloud.

    Providers come from the origin registry, else through your Terraform CLI config (e.g. a mirror).
    Additive: versions already cached stay. Exit 1 when something could not be had (it is named)."""
    from vmplane.envspec.models import Cloud
    from vmplane.tf.provider_cache import refresh
    from vmplane.tf.stacks import STACKS

    cmd = begin(output)
    if not platform:
        raise UsageError("give --platform OS_ARCH (e.g. linux_amd64) for each platform terraform runs on")
    bad = [p for p in platform if not _PLATFORM.match(p)]
    if bad:
        raise UsageError(f"--platform must be OS_ARCH such as linux_amd64, not {', '.join(bad)}")
    names = [c.value for c in STACKS]
    unknown = [c for c in cloud or [] if c not in names]
    if unknown:
        raise UsageError(f"--cloud must be one of {', '.join(names)}, not {', '.join(unknown)}")
    home = cmd.settings.ensure_home()
    results = [
        refresh(home, Cloud(c), list(dict.fromkeys(platform)), lambda m: typer.echo(m, err=True))
        for c in (cloud or names)
    ]
    incomplete = any(r.unavailable for r in results)
    if cmd.json:
        print_json({"clouds": [r.as_dict() for r in results], "complete": not incomplete})
    else:
        for r in results:
            if r.lock:
                typer.echo(f"{r.cloud}: locked for {', '.join(r.platforms)} in {r.lock} (via {r.via})")
            for why in r.unavailable:
                typer.echo(f"{r.cloud}: unavailable: {why}", err=True)
    if incomplete:
        raise typer.Exit(EXIT_UNAVAILABLE)
