"""Prices for one Google Cloud region from the Cloud Billing Catalog API (`services.skus.list`).

Two services hold what vmplane creates: Compute Engine (6F81-5844-456A: the machine families' core and
RAM SKUs, persistent disk) and Networking (E505-1604-58F8: Cloud NAT, the load balancer's forwarding
rule). Both lists are read page by page through google-api-python-client and its bundled discovery
document `cloudbilling.v1` (nothing is fetched to build the client). A machine type costs
vCPUs x the family's core SKU + GiB x its RAM SKU; the shapes are Google's published ones (shared-core
e2-micro/small/medium bill 0.25/0.5/1 vCPU).

A SKU is matched by its description, its category (on-demand) and `serviceRegions` (the region, or
`global`), and its unit is checked; two matches with different prices are reported as ambiguous.
Credentials: an API key from GOOGLE_API_KEY (sent as the `key` parameter, so it is scrubbed from every
message), else Application Default Credentials. Neither is ever logged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vmplane.clouds.price_api import Fetched, PriceRefreshError, Progress

COMPUTE_ENGINE = "services/6F81-5844-456A"
NETWORKING = "services/E505-1604-58F8"
SCOPE = "https://www.googleapis.com/auth/cloud-billing.readonly"
CALL_TIMEOUT = 60.0  # seconds per HTTP request
RETRIES = 4  # googleapiclient retries 429, 5xx and connection errors with backoff
PAGE_SIZE = 5000  # the API's default and maximum
API = "Cloud Billing Catalog API"

# Family -> its SKUs' name (`<name> Instance Core running in Americas`, `... Ram ...`).
FAMILIES = {"e2": "E2", "n2": "N2", "n2d": "N2D AMD", "n1": "N1 Predefined"}
# GiB of RAM per vCPU for the predefined shapes.
_RAM_PER_VCPU = {
    "n1": {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9},
    "default": {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0},
}
_SHARED_CORE = {"e2-micro": (0.25, 1.0), "e2-small": (0.5, 2.0), "e2-medium": (1.0, 4.0)}
DISKS = {
    "pd-standard": "Storage PD Capacity",
    "pd-balanced": "Balanced PD Capacity",
    "pd-ssd": "SSD backed PD Capacity",
}


@dataclass(frozen=True)
class Want:
    """One SKU to find: its description (a regex, case-insensitive), unit, and whether it is global."""

    description: str
    unit: str
    global_sku: bool = False


def network_wants(disk_kind: str) -> dict[str, Want]:
    disk = DISKS.get(disk_kind, disk_kind)
    return {
        "disk_gb_month": Want(rf"{re.escape(disk)}( in .+)?", "GiBy.mo"),
        # The external Application Load Balancer's global forwarding rules (the first five share one charge).
        "lb_hour": Want(r"(networking )?cloud load balancer forwarding rule minimum global", "h", global_sku=True),
        # Cloud NAT bills each VM that uses the gateway by the hour (the rate up to 32 VMs), and its data.
        "nat_hour": Want(r"(networking )?cloud nat gateway uptime( charge)?", "h"),
        "nat_gb": Want(r"(networking )?cloud nat data processing( charge)?", "GiBy"),
        # The address Cloud NAT allocates for itself (AUTO_ONLY): the only public IPv4 vmplane's VMs use.
        "public_ip_hour": Want(r"(networking )?cloud nat ip usage", "h"),
    }


NOTES = [
    "Cloud NAT is billed per VM-hour (up to 32 VMs), not per gateway",
    "machine types priced as vCPU x core SKU + GiB x RAM SKU (shared-core e2: 0.25/0.5/1 vCPU)",
    "publicIpHour is the Cloud NAT address; the load balancer's address is not billed while a forwarding "
    "rule uses it; LB data processing is not counted",
]


def shape(machine_type: str) -> tuple[str, float, float] | None:
    """(family, vCPUs billed, GiB) of a predefined machine type, or None when vmplane cannot tell."""
    if machine_type in _SHARED_CORE:
        return ("e2", *_SHARED_CORE[machine_type])
    m = re.fullmatch(r"([a-z0-9]+)-(standard|highmem|highcpu)-(\d+)", machine_type)
    if m is None or m.group(1) not in FAMILIES:
        return None
    family, kind, vcpus = m.group(1), m.group(2), int(m.group(3))
    per_vcpu = _RAM_PER_VCPU.get(family, _RAM_PER_VCPU["default"])[kind]
    return family, float(vcpus), vcpus * per_vcpu


def fetch(
    region: str,
    instance_types: list[str],
    disk_kind: str,
    progress: Progress,
    *,
    http: Any = None,
    api_key: str | None = None,
) -> Fetched:
    """Read every row for `region`. `http` (an httplib2.Http, or a mock in tests) replaces the
    authorised transport; `api_key` defaults to GOOGLE_API_KEY."""
    key = api_key if api_key is not None else (os.environ.get("GOOGLE_API_KEY") or None)
    billing = _service(http, key)
    skus = [*_list_skus(billing, COMPUTE_ENGINE, "Compute Engine", progress, key)]
    skus += _list_skus(billing, NETWORKING, "Networking", progress, key)
    return price_table_rows(skus, region, instance_types, disk_kind)


def price_table_rows(skus: Sequence[dict[str, Any]], region: str, instance_types: list[str], disk_kind: str) -> Fetched:
    """The rows of a table from the SKU lists (pure: the tests feed it recorded answers)."""
    out = Fetched(notes=list(NOTES))
    for row, want in network_wants(disk_kind).items():
        found = find(skus, region, want)
        if isinstance(found, str):
            out.missing[row] = found
        else:
            out.scalars[row], out.evidence[row] = found
    out.scalars["lb_capacity_unit_hour"] = 0.0
    out.evidence["lb_capacity_unit_hour"] = "Google Cloud bills no capacity units (LB data is priced per GB)"
    for machine_type in instance_types:
        _price_machine_type(out, skus, region, machine_type)
    return out


def _price_machine_type(out: Fetched, skus: Sequence[dict[str, Any]], region: str, machine_type: str) -> None:
    dims = shape(machine_type)
    if dims is None:
        out.missing[machine_type] = "not a predefined E2/N2/N2D/N1 shape vmplane can price from core and RAM SKUs"
        return
    family, vcpus, gib = dims
    name = re.escape(FAMILIES[family])
    core = find(skus, region, Want(rf"{name} Instance Core running in .+", "h"))
    ram = find(skus, region, Want(rf"{name} Instance Ram running in .+", "GiBy.h"))
    if isinstance(core, str) or isinstance(ram, str):
        out.missing[machine_type] = "; ".join(x for x in (core, ram) if isinstance(x, str))
        return
    out.instance_hour[machine_type] = round(vcpus * core[0] + gib * ram[0], 6)
    out.evidence[machine_type] = f"{vcpus:g} x {core[1]} + {gib:g} x {ram[1]}"


def find(skus: Sequence[dict[str, Any]], region: str, want: Want) -> tuple[float, str] | str:
    """The wanted SKU's price and what it is, or why there is none (never 0). A regional row takes the
    region's own SKU, else a global one (some networking SKUs are priced once for every region)."""
    pattern = re.compile(want.description, re.IGNORECASE)
    places = ["global"] if want.global_sku else [region, "global"]
    for where in places:
        found: dict[float, str] = {}
        for sku in skus:
            if not pattern.fullmatch(sku.get("description", "")) or where not in sku.get("serviceRegions", []):
                continue
            if sku.get("category", {}).get("usageType") != "OnDemand":
                continue
            price = unit_price(sku, want.unit)
            if price is not None:
                found.setdefault(price, f"{API}: sku {sku.get('skuId', '?')} {sku['description']!r} per {want.unit}")
        if len(found) > 1:
            return (
                f"ambiguous: {len(found)} SKUs {want.description!r} in {where} with different prices ({sorted(found)})"
            )
        if found:
            ((price_usd, evidence),) = found.items()
            return price_usd, evidence
    return f"the {API} lists no on-demand SKU {want.description!r} per {want.unit} in {' or '.join(places)}"


def unit_price(sku: dict[str, Any], unit: str) -> float | None:
    """The first priced tier of the SKU's current pricing, in USD per `unit` (None if another unit)."""
    for info in sku.get("pricingInfo", [])[-1:]:  # a timeline, oldest first: without a time range, only now
        expression = info.get("pricingExpression", {})
        if expression.get("usageUnit") != unit:
            return None
        tiers = sorted(expression.get("tieredRates", []), key=lambda t: float(t.get("startUsageAmount", 0)))
        for tier in tiers:
            money = tier.get("unitPrice", {})
            if money.get("currencyCode", "USD") != "USD":
                return None
            usd = int(money.get("units", "0")) + int(money.get("nanos", 0)) / 1e9
            if usd > 0:  # a $0 first tier is a free allowance; the estimate counts none
                return round(usd, 9)
    return None


def _service(http: Any, api_key: str | None) -> Any:
    from googleapiclient import discovery

    if http is None:
        import httplib2

        http = httplib2.Http(timeout=CALL_TIMEOUT)
        if api_key is None:
            import google_auth_httplib2

            http = google_auth_httplib2.AuthorizedHttp(_default_credentials(), http=http)
    return discovery.build(
        "cloudbilling", "v1", http=http, developerKey=api_key, static_discovery=True, cache_discovery=False
    )


def _default_credentials() -> Any:
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(scopes=[SCOPE])
    except DefaultCredentialsError as e:
        raise PriceRefreshError(
            f"{API}: no credentials: set GOOGLE_API_KEY (an API key allowed to call the Cloud Billing API) "
            "or run `gcloud auth application-default login`"
        ) from e
    return credentials


def _list_skus(billing: Any, parent: str, label: str, progress: Progress, api_key: str | None) -> list[dict[str, Any]]:
    skus: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        extra = {"pageToken": token} if token else {}
        request = billing.services().skus().list(parent=parent, currencyCode="USD", pageSize=PAGE_SIZE, **extra)
        page = _execute(request, f"{label} SKUs", api_key)
        skus += page.get("skus", [])
        progress(f"{API}: {label}: {len(skus)} SKUs")
        token = page.get("nextPageToken") or None
        if token is None:
            return skus


def _execute(request: Any, what: str, api_key: str | None) -> dict[str, Any]:
    import httplib2
    from google.auth.exceptions import GoogleAuthError
    from googleapiclient.errors import HttpError

    try:
        page: dict[str, Any] = request.execute(num_retries=RETRIES)
        return page
    except HttpError as e:
        message = _scrub(f"{API} answered {e.resp.status} for {what}: {_reason(e)}", api_key)
        raise PriceRefreshError(message) from None  # the cause holds the URI, with the key in it
    except GoogleAuthError as e:
        raise PriceRefreshError(f"{API}: the credentials could not be used: {type(e).__name__}") from None
    except (OSError, httplib2.HttpLib2Error) as e:
        raise PriceRefreshError(
            f"could not reach the {API} (cloudbilling.googleapis.com) for {what}: {type(e).__name__}"
        ) from None


def _reason(error: Any) -> str:
    import json

    try:
        body = json.loads(error.content)
        return str(body["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return str(getattr(error.resp, "reason", "") or "no message")


def _scrub(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text
