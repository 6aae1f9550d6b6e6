"""`vmplane prices`: which price table `vmplane cost` uses, and `refresh`, which reads the clouds' price
APIs (AWS Price List, Cloud Billing Catalog) into the user's cache ($VMPLANE_HOME/prices/)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vmplane.cli.common import EXIT_FAILED, EXIT_OK, Cmd, OutputOpt, begin, load, print_json
from vmplane.errors import UsageError

if TYPE_CHECKING:
    from vmplane.cost.prices import Choice
    from vmplane.envspec.base import Cloud

prices_app = typer.Typer(
    help="Price tables: the pinned ones, and a cache refreshed from the clouds' price APIs.", no_args_is_help=True
)

CloudOpt = Annotated[str | None, typer.Option("--cloud", help="aws or gcp (default: both, or the file's).")]
RegionOpt = Annotated[str | None, typer.Option("--region", help="The region (default: the file's, or the pinned one).")]
PricedFileOpt = Annotated[
    Path | None, typer.Option("--file", "-f", help="Also price this environment file's instance types, in its region.")
]


@prices_app.command("refresh")
def refresh(
    cloud: CloudOpt = None, region: RegionOpt = None, file: PricedFileOpt = None, output: OutputOpt = "text"
) -> None:
    """Read the clouds' price APIs into the cache `vmplane cost` prefers.

    The pinned table stays the fallback. A failure names what failed and keeps the old cache; a type
    without a price is named and left out (never 0). Exit 1 unless everything was refreshed and priced.
    """
    from vmplane.cost.refresh import PriceRefreshError
    from vmplane.cost.refresh import refresh as refresh_table

    cmd = begin(output)
    done: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    for target, where, extra in _targets(cloud, region, file):
        try:
            result = refresh_table(target, where, extra_types=extra, home=cmd.settings.home, progress=_progress(cmd))
        except PriceRefreshError as err:
            failed.append({"cloud": target.value, "region": where, "error": str(err)})
            if not cmd.json:
                cmd.con.print(f"[red]error:[/] {target.value} {where}: ", end="")
                cmd.con.print(str(err), markup=False, soft_wrap=True)
            continue
        done.append(result.to_json())
        if not cmd.json:
            _show_refreshed(cmd, result.to_json())
    complete = not failed and all(r["complete"] for r in done)
    if cmd.json:
        print_json({"refreshed": done, "failed": failed, "complete": complete})
    elif not complete:
        unpriced = sum(len(r["missing"]) for r in done)
        cmd.con.print(
            f"[yellow]incomplete:[/] {len(failed)} table(s) not refreshed, {unpriced} type(s) without a price"
        )
    raise typer.Exit(EXIT_OK if complete else EXIT_FAILED)


@prices_app.command("show")
def show(cloud: CloudOpt = None, region: RegionOpt = None, output: OutputOpt = "text") -> None:
    """Which price table `vmplane cost` uses, its source and date, and its prices.

    For each cloud and region: the cache (from `vmplane prices refresh`) or the pinned table.
    """
    from vmplane.cost.prices import TABLES, cached_keys, choose

    cmd = begin(output)
    wanted = _cloud(cloud)
    keys = sorted({*TABLES, *cached_keys(cmd.settings.home)})
    keys = [(c, r) for c, r in keys if (wanted is None or c is wanted) and (region is None or r == region)]
    if wanted is not None and region is not None and not keys:
        keys = [(wanted, region)]
    if region is not None and not keys:
        raise UsageError(f"no price table for region {region}: give --cloud, or `vmplane prices refresh` it")
    choices = [choose(c, r, home=cmd.settings.home) for c, r in keys]
    docs = [_choice_json(c, r, choice) for (c, r), choice in zip(keys, choices, strict=True)]
    if cmd.json:
        print_json({"tables": docs})
    else:
        for doc, choice in zip(docs, choices, strict=True):
            _show_choice(cmd, doc, choice)
    raise typer.Exit(EXIT_OK if all(choice.table is not None for choice in choices) else EXIT_FAILED)


def _cloud(name: str | None) -> Cloud | None:
    from vmplane.cost.refresh import SOURCES

    if name is None:
        return None
    known = {c.value: c for c in SOURCES}
    if name not in known:
        raise UsageError(f"--cloud must be one of {', '.join(sorted(known))}, not {name!r}")
    return known[name]


def _targets(cloud: str | None, region: str | None, file: Path | None) -> list[tuple[Cloud, str, list[str]]]:
    """(cloud, region, the file's instance types) for each table to refresh."""
    from vmplane.cost.refresh import DEFAULT_REGIONS, SOURCES

    wanted = _cloud(cloud)
    if file is not None:
        spec = load(file)
        if spec.provider.cloud not in SOURCES:
            raise UsageError(f"{file} is for {spec.provider.cloud.value}: vmplane reads no price API for it")
        if wanted is not None and wanted is not spec.provider.cloud:
            raise UsageError(f"--cloud {wanted.value} but {file} is for {spec.provider.cloud.value}")
        types = sorted({pool.instance_type for pool in spec.pools.values()})
        return [(spec.provider.cloud, region or spec.provider.region, types)]
    if wanted is None:
        if region is not None:
            raise UsageError("--region needs --cloud (or -f FILE, whose cloud it is)")
        return [(c, DEFAULT_REGIONS[c], []) for c in SOURCES]
    return [(wanted, region or DEFAULT_REGIONS[wanted], [])]


def _progress(cmd: Cmd) -> Any:
    def say(message: str) -> None:
        cmd.con.print(message, style="dim", markup=False, soft_wrap=True)

    return say


def _show_refreshed(cmd: Cmd, doc: dict[str, Any]) -> None:
    types = doc["instanceTypes"]
    cmd.con.print(
        f"{doc['cloud']} {doc['region']}: wrote {doc['path']} ({doc['source']}, recorded {doc['recorded']}; "
        f"{len(types)} instance types)",
        markup=False,
        soft_wrap=True,
    )
    for name, why in doc["missing"].items():
        cmd.con.print("[yellow]no price[/] ", end="")
        cmd.con.print(f"for {name}: {why} (left out: `vmplane cost` reports it missing)", markup=False, soft_wrap=True)


def _choice_json(cloud: Cloud, region: str, choice: Choice) -> dict[str, Any]:
    from vmplane.cost.prices import to_json

    doc: dict[str, Any] = {
        "cloud": cloud.value,
        "region": region,
        "used": choice.origin,
        "cachePath": str(choice.cache_path),
        "cacheProblem": choice.cache_problem,
    }
    if choice.table is not None:
        doc["table"] = to_json(choice.table)
    return doc


def _show_choice(cmd: Cmd, doc: dict[str, Any], choice: Choice) -> None:
    from rich.table import Table

    head = f"{doc['cloud']} {doc['region']}: "
    if choice.table is None:
        cmd.con.print(
            f"{head}no price table (`vmplane prices refresh --cloud {doc['cloud']} --region {doc['region']}`)",
            markup=False,
        )
        return
    t = choice.table
    if choice.origin == "cache":
        used = f"the cache {choice.cache_path} (the pinned table is the fallback)"
    else:
        used = f"the pinned table (no cache at {choice.cache_path})"
    cmd.con.print(f"{head}{used}; {t.source}, recorded {t.recorded}", markup=False, soft_wrap=True)
    if choice.cache_problem:
        cmd.con.print("[yellow]cache ignored:[/] ", end="")
        cmd.con.print(choice.cache_problem, markup=False, soft_wrap=True)
    rows = Table(show_header=True, box=None, pad_edge=False)
    for col in ("row", "USD", "per", "from"):
        rows.add_column(col, justify="right" if col == "USD" else "left")
    for name, price in t.instance_hour.items():
        rows.add_row(name, f"{price:g}", "hour", t.evidence.get(name, ""))
    scalars = [
        ("disk_gb_month", f"disk ({t.disk_kind})", "GB-month"),
        ("lb_hour", "load balancer", "hour"),
        ("lb_capacity_unit_hour", "LB capacity unit", "hour"),
        ("nat_hour", "NAT", "hour"),
        ("nat_gb", "NAT data", "GB"),
        ("public_ip_hour", "public IPv4", "hour"),
    ]
    for attr, label, unit in scalars:
        rows.add_row(label, f"{getattr(t, attr):g}", unit, t.evidence.get(attr, ""))
    cmd.con.print(rows)
