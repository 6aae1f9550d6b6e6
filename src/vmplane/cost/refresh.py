"""`vmplane prices refresh`: read one cloud's price API for one region into the user's cache.

The cloud-specific halves (clouds/aws/price_api.py: boto3 `pricing`; clouds/gcp/price_api.py: the Cloud
Billing Catalog)
turn the API's answers into a `Fetched`; this module decides what to price, checks that every row the
estimate needs was found, and only then replaces the cache file (atomically). A failure — no network,
no credentials, a row not found — names what failed and leaves the old cache as it was. An instance type
the API has no price for is named and left out of the table (so `vmplane cost` reports it missing), never
written as 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vmplane.clouds.descriptor import Pricing
from vmplane.clouds.price_api import Fetched, Fetcher, PriceRefreshError, Progress
from vmplane.clouds.registry import descriptors
from vmplane.cost.prices import SCALAR_KEYS, TABLES, PriceTable, cache_path, choose, write_cache
from vmplane.envspec.models import Cloud


def _priced() -> dict[Cloud, Pricing]:
    return {d.cloud: d.pricing for d in descriptors() if d.pricing is not None}


# Each priced cloud's price API and the region a refresh reads by default, from its descriptor.
SOURCES = {cloud: pricing.source for cloud, pricing in _priced().items()}
DEFAULT_REGIONS = {cloud: pricing.default_region for cloud, pricing in _priced().items()}
__all__ = ["Fetched", "Fetcher", "PriceRefreshError", "Progress", "Refreshed", "refresh"]
# Every row besides the instance types; a table without one of them is not written.
SCALAR_ROWS = tuple(SCALAR_KEYS)


@dataclass
class Refreshed:
    cloud: Cloud
    region: str
    table: PriceTable
    path: Path
    missing: dict[str, str]  # instance types the API had no price for: named, left out of the table

    def to_json(self) -> dict[str, Any]:
        return {
            "cloud": self.cloud.value,
            "region": self.region,
            "path": str(self.path),
            "source": self.table.source,
            "recorded": self.table.recorded,
            "instanceTypes": sorted(self.table.instance_hour),
            "missing": self.missing,
            "complete": not self.missing,
        }


def instance_types_to_price(
    cloud: Cloud, region: str, extra: Iterable[str] = (), *, home: Path | None = None
) -> list[str]:
    """The pinned tables' types for `cloud` (any region: the defaults and examples use them), the ones
    the table in use already holds (an earlier `-f` added them), and `extra` (the file's)."""
    types = {t for (c, _), table in TABLES.items() if c is cloud for t in table.instance_hour}
    current = choose(cloud, region, home=home).table
    if current is not None:
        types |= set(current.instance_hour)
    return sorted(types | set(extra))


def refresh(
    cloud: Cloud,
    region: str,
    *,
    extra_types: Iterable[str] = (),
    home: Path | None = None,
    progress: Progress = lambda _msg: None,
    fetch: Fetcher | None = None,
    now: datetime | None = None,
) -> Refreshed:
    """Fetch `cloud`'s prices for `region` and write them to the cache; PriceRefreshError leaves it as it was."""
    if cloud not in SOURCES:
        raise PriceRefreshError(f"vmplane reads no price API for {cloud.value}")
    types = instance_types_to_price(cloud, region, extra_types, home=home)
    disk_kind = _disk_kind(cloud)
    fetcher = fetch or _fetcher(cloud)
    progress(f"{SOURCES[cloud]}: {cloud.value} {region}, {len(types)} instance types and the network rows")
    got = fetcher(region, types, disk_kind, progress)
    lacking = [row for row in SCALAR_ROWS if row not in got.scalars]
    if lacking:
        reasons = "; ".join(f"{row}: {got.missing.get(row, 'not found')}" for row in lacking)
        kept = cache_path(cloud, region, home=home)
        raise PriceRefreshError(
            f"{SOURCES[cloud]} ({cloud.value} {region}) lacks rows the estimate needs ({reasons}); "
            f"nothing was written, {kept} is as it was"
        )
    stamp = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    table = PriceTable(
        cloud=cloud,
        region=region,
        source=SOURCES[cloud],
        recorded=stamp.isoformat().replace("+00:00", "Z"),
        instance_hour=dict(sorted(got.instance_hour.items())),
        disk_kind=disk_kind,
        notes=got.notes,
        evidence=got.evidence,
        **{row: got.scalars[row] for row in SCALAR_ROWS},
    )
    missing = {t: why for t, why in got.missing.items() if t in types and t not in got.instance_hour}
    return Refreshed(cloud, region, table, write_cache(table, home=home), missing)


def _disk_kind(cloud: Cloud) -> str:
    # The disk kind the pinned tables price is the one vmplane creates on that cloud.
    return next(t.disk_kind for (c, _), t in TABLES.items() if c is cloud)


def _fetcher(cloud: Cloud) -> Fetcher:
    # The cloud's price API reader (clouds/<cloud>/price_api.py), imported only when a refresh runs: boto3 and
    # googleapiclient never load on `vmplane cost`'s path.
    return _priced()[cloud].fetcher()
