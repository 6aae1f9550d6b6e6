"""What a cloud's price API reader answers `vmplane prices refresh` (cost/refresh.py), in neutral terms: each
cloud's reader (clouds/<cloud>/price_api.py) is below cost in the layers, so the types it returns are here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from vmplane.errors import VmplaneError

Progress = Callable[[str], None]


class PriceRefreshError(VmplaneError):
    """A price API could not be read, or did not hold every row the estimate needs; the cache is unchanged."""

    http_status = 502


@dataclass
class Fetched:
    """What one price API answered for one region, before it becomes a table."""

    instance_hour: dict[str, float] = field(default_factory=dict)
    scalars: dict[str, float] = field(default_factory=dict)  # SCALAR_ROWS -> price
    evidence: dict[str, str] = field(default_factory=dict)  # row -> the SKU/product it came from
    missing: dict[str, str] = field(default_factory=dict)  # row -> why it was not found
    notes: list[str] = field(default_factory=list)


class Fetcher(Protocol):
    def __call__(self, region: str, instance_types: list[str], disk_kind: str, progress: Progress) -> Fetched: ...
