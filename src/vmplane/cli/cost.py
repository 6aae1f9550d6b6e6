"""`vmplane cost`: the monthly estimate of an environment file from pinned list prices, its schedules'
saving, and every assumption behind the numbers."""

from __future__ import annotations

from typing import Annotated

import typer

from vmplane.cli.common import DEFAULT_FILE, EXIT_FAILED, EXIT_OK, FileOpt, OutputOpt, begin, load, print_json


def cost(
    file: FileOpt = DEFAULT_FILE,
    nat_gb: Annotated[
        float, typer.Option("--nat-gb", min=0, help="Data through NAT per month, GB (an assumption).")
    ] = 100.0,
    lb_units: Annotated[
        float, typer.Option("--lb-units", min=0, help="AWS: ALB capacity units in use on average (an assumption).")
    ] = 1.0,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 if any price is missing.")] = False,
    output: OutputOpt = "text",
) -> None:
    """Estimate what the environment costs a month (and what its schedules save), from pinned prices."""
    from vmplane.cost.estimate import estimate

    cmd = begin(output)
    spec = load(file)
    est = estimate(spec, nat_gb=nat_gb, lb_capacity_units=lb_units)
    data = est.to_json()
    if cmd.json:
        print_json(data)
    else:
        _show(cmd.con, spec.name, data)
    raise typer.Exit(EXIT_FAILED if strict and est.missing else EXIT_OK)


def _show(con: object, name: str, data: dict[str, object]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    assert isinstance(con, Console)
    table = Table(title=f"{name}: monthly estimate ({data['currency']})", title_justify="left")
    for col in ("kind", "pool", "type", "count", "unit price", "monthly", "scheduled"):
        table.add_column(col, justify="right" if col in ("count", "unit price", "monthly", "scheduled") else "left")
    lines = data["lines"]
    assert isinstance(lines, list)
    for line in lines:
        unit = "missing" if line["unitPrice"] is None else f"{line['unitPrice']:g}/{line['unit']}"
        table.add_row(
            line["kind"],
            line["pool"] or "",
            line["type"],
            f"{line['count']:g}",
            unit,
            "?" if line["monthly"] is None else f"{line['monthly']:.2f}",
            "" if line["scheduledMonthly"] is None else f"{line['scheduledMonthly']:.2f}",
        )
    con.print(table)
    monthly = data["monthly"]
    assert isinstance(monthly, dict)
    con.print(f"total {monthly['total']:.2f} {data['currency']}/month (730 h)")
    if monthly["scheduledTotal"] is not None:
        con.print(f"with the schedules {monthly['scheduledTotal']:.2f}: {monthly['savingPercent']}% less than 24x7")
    missing = data["missing"]
    assert isinstance(missing, list)
    for m in missing:
        con.print(f"[yellow]missing price[/]: {escape(str(m))} (not counted: the total is incomplete)")
    con.print("assumptions:")
    assumptions = data["assumptions"]
    assert isinstance(assumptions, dict)
    for k, v in assumptions.items():
        con.print(f"  {k}: {v}", soft_wrap=True, markup=False)
