"""List prices (USD, on-demand, Linux) per cloud and region, for what vmplane creates: the pinned
tables below, and the user's cache that `vmplane prices refresh` fills from the clouds' price APIs.

Each table names where its numbers come from and when they were recorded. The pinned ones are the
vendors' published list prices as of the date given; they were written down, not fetched (this
machine reaches no price API), so check them against the source before relying on a total. A cached
table ($VMPLANE_HOME/prices/<cloud>-<region>.json) is preferred when present; the pinned one stays the
fallback. A type or region missing from the table in use is reported by `vmplane cost` (and fails
`--strict`); it is never counted as 0.

This module is on `vmplane cost`'s start-up path: it reads JSON and nothing heavier (the refreshers,
which import boto3 and googleapiclient, live in their own modules).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vmplane.envspec.models import Cloud


@dataclass(frozen=True)
class PriceTable:
    cloud: Cloud
    region: str
    source: str
    recorded: str  # when the numbers were written down
    instance_hour: dict[str, float]
    disk_gb_month: float
    disk_kind: str
    lb_hour: float  # AWS: ALB hour; GCP: a global forwarding rule's hour (the first five, each)
    lb_capacity_unit_hour: float  # AWS: one ALB LCU-hour; GCP: none (data is priced per GB)
    nat_hour: float  # AWS: a NAT gateway hour; GCP: Cloud NAT per VM-hour (<= 32 VMs)
    nat_gb: float  # data processed by NAT, per GB
    public_ip_hour: float  # an in-use public IPv4 address
    notes: list[str] = field(default_factory=list)
    # What each fetched number is, as the price API named it (row -> SKU and description); empty when pinned.
    evidence: dict[str, str] = field(default_factory=dict)


def _pinned() -> dict[tuple[Cloud, str], PriceTable]:
    # Each priced cloud's pinned tables are in its own package (clouds/<cloud>/pricing.py), as its descriptor says.
    from vmplane.clouds.registry import descriptors

    tables = (
        PriceTable(cloud=d.cloud, **fields)
        for d in descriptors()
        if d.pricing is not None
        for fields in d.pricing.pinned
    )
    return {(t.cloud, t.region): t for t in tables}


TABLES: dict[tuple[Cloud, str], PriceTable] = _pinned()
# The two pinned tables under the names the tests and benchmarks use.
AWS_US_EAST_1, GCP_US_CENTRAL1 = (TABLES[Cloud(c), r] for c, r in (("aws", "us-east-1"), ("gcp", "us-central1")))

CACHE_FORMAT = 1
# The table's scalar rows: attribute name -> the key in the cache file.
SCALAR_KEYS = {
    "disk_gb_month": "diskGbMonth",
    "lb_hour": "lbHour",
    "lb_capacity_unit_hour": "lbCapacityUnitHour",
    "nat_hour": "natHour",
    "nat_gb": "natGb",
    "public_ip_hour": "publicIpHour",
}


class CacheProblem(ValueError):
    """A cache file that exists but cannot be used (unreadable, another format, another table)."""


def table_for(cloud: Cloud, region: str, *, home: Path | None = None) -> PriceTable | None:
    """The table `vmplane cost` uses: the user's cache when it holds one, else the pinned one.

    An unusable cache file falls back to the pinned table (`vmplane prices show` names the problem)."""
    return choose(cloud, region, home=home).table


@dataclass(frozen=True)
class Choice:
    """Which table is used for one cloud and region, and why."""

    table: PriceTable | None
    origin: str | None  # "cache", "pinned", or None (no table)
    cache_path: Path
    cache_problem: str | None = None


def choose(cloud: Cloud, region: str, *, home: Path | None = None) -> Choice:
    path = cache_path(cloud, region, home=home)
    problem = None
    try:
        cached = read_cache(path, cloud, region)
    except CacheProblem as e:
        cached, problem = None, str(e)
    if cached is not None:
        return Choice(cached, "cache", path)
    pinned = TABLES.get((cloud, region))
    return Choice(pinned, "pinned" if pinned else None, path, problem)


def cache_dir(home: Path | None = None) -> Path:
    return (home if home is not None else default_home()) / "prices"


def default_home() -> Path:
    """Settings.home (VMPLANE_HOME, matched as pydantic-settings does: any case; else ~/.vmplane),
    read without importing pydantic-settings, which would add ~30 ms to `vmplane cost`'s start-up.
    tests/unit/test_prices_refresh.py holds the two equal."""
    for key, value in os.environ.items():
        if key.upper() == "VMPLANE_HOME":
            return Path(value)
    return Path.home() / ".vmplane"


def cache_path(cloud: Cloud, region: str, *, home: Path | None = None) -> Path:
    return cache_dir(home) / f"{cloud.value}-{region}.json"


def cached_keys(home: Path | None = None) -> list[tuple[Cloud, str]]:
    """The (cloud, region) of every cache file present, by its name."""
    found = []
    for path in sorted(cache_dir(home).glob("*.json")):
        name, _, region = path.stem.partition("-")
        if name in {c.value for c in Cloud} and region:
            found.append((Cloud(name), region))
    return found


def read_cache(path: Path, cloud: Cloud, region: str) -> PriceTable | None:
    """The cached table at `path`; None when there is none, CacheProblem when it cannot be used."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CacheProblem(f"{path}: {e.strerror or e}") from e
    try:
        table = from_json(json.loads(text))
    except (ValueError, TypeError, KeyError) as e:
        raise CacheProblem(f"{path}: not a vmplane price table ({e})") from e
    if (table.cloud, table.region) != (cloud, region):
        raise CacheProblem(f"{path}: holds {table.cloud.value} {table.region}, not {cloud.value} {region}")
    note = f"from the cache {path} (written by `vmplane prices refresh`; the pinned table is the fallback)"
    return replace(table, notes=[*table.notes, note])


def write_cache(table: PriceTable, *, home: Path | None = None) -> Path:
    """Write `table` to its cache file atomically: a crash leaves the old file or the new, never half."""
    path = cache_path(table.cloud, table.region, home=home)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(to_json(table), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def to_json(table: PriceTable) -> dict[str, Any]:
    return {
        "format": CACHE_FORMAT,
        "currency": "USD",
        "cloud": table.cloud.value,
        "region": table.region,
        "source": table.source,
        "recorded": table.recorded,
        "instanceHour": dict(sorted(table.instance_hour.items())),
        "diskKind": table.disk_kind,
        **{key: getattr(table, attr) for attr, key in SCALAR_KEYS.items()},
        "notes": list(table.notes),
        "evidence": dict(sorted(table.evidence.items())),
    }


def from_json(doc: Any) -> PriceTable:
    """A PriceTable from its cache JSON; ValueError names the first field that is wrong."""
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    if doc.get("format") != CACHE_FORMAT or doc.get("currency") != "USD":
        raise ValueError(f"format {doc.get('format')!r} in {doc.get('currency')!r}, not {CACHE_FORMAT} in USD")
    hours = doc["instanceHour"]
    # An instance is never free: a 0 here would hide a missing price.
    if not isinstance(hours, dict) or not all(_price(v) and v > 0 for v in hours.values()):
        raise ValueError("instanceHour must map types to prices above 0")
    for key in SCALAR_KEYS.values():
        if not _price(doc[key]):
            raise ValueError(f"{key} must be a price, not {doc[key]!r}")
    for key in ("source", "recorded", "region", "diskKind"):
        if not isinstance(doc[key], str) or not doc[key]:
            raise ValueError(f"{key} must be a non-empty string")
    return PriceTable(
        cloud=Cloud(doc["cloud"]),
        region=doc["region"],
        source=doc["source"],
        recorded=doc["recorded"],
        instance_hour={str(k): float(v) for k, v in hours.items()},
        disk_kind=doc["diskKind"],
        notes=[str(n) for n in doc.get("notes", [])],
        evidence={str(k): str(v) for k, v in doc.get("evidence", {}).items()},
        **{attr: float(doc[key]) for attr, key in SCALAR_KEYS.items()},
    )


def _price(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
