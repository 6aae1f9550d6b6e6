"""Prices for one AWS region from the AWS Price List API (boto3 `pricing`, GetProducts).

One query per instance type (on-demand Linux, shared tenancy, no pre-installed software, the capacity
actually used), one each for gp3 storage, the ALB (hour and LCU), the NAT gateway (hour and GB) and the
public IPv4 address. Each answer is a page of JSON strings, one product each; the price is
terms.OnDemand -> priceDimensions -> pricePerUnit.USD. A row is taken from the product whose usagetype is
exactly the one AWS bills it under (with or without the region's prefix, e.g. `USE1-`), so the ALB's
trust-store hours or the idle-address rate never stand in for the row asked for; two products with
different prices for one row are reported as ambiguous instead of either one being chosen.

The filter values follow AWS's documentation and public examples of GetProducts (aws_pricing_product,
Karpenter's pricing provider): `regionCode` and the attribute names are the Price List's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vmplane.clouds.price_api import Fetched, PriceRefreshError, Progress

if TYPE_CHECKING:  # types-boto3 (a test extra): for mypy only
    from types_boto3_pricing import PricingClient
    from types_boto3_pricing.type_defs import GetProductsRequestTypeDef, GetProductsResponseTypeDef

PRICING_REGION = "us-east-1"  # where the Price List API answers (for the prices of every region)
PAGE_SIZE = 100  # the API's maximum
API = "AWS Price List API"

# A usagetype as AWS bills it, with the region's prefix (USE2-, CAN1-, EU-) or, in us-east-1, often none.
_PREFIX = r"(?:[A-Z]{3}\d-|EU-)?"


@dataclass(frozen=True)
class Row:
    name: str  # "instance:<type>" or one of refresh.SCALAR_ROWS
    usagetype: str  # without the region prefix
    unit: str  # the price dimension's unit


@dataclass(frozen=True)
class Query:
    """One GetProducts query, and the rows read from its answer."""

    what: str
    service: str
    filters: tuple[tuple[str, str], ...]
    rows: tuple[Row, ...]

    def params(self) -> GetProductsRequestTypeDef:
        return {
            "ServiceCode": self.service,
            "Filters": [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in self.filters],
            "FormatVersion": "aws_v1",
            "MaxResults": PAGE_SIZE,
        }


def instance_query(instance_type: str, region: str) -> Query:
    return Query(
        f"EC2 {instance_type}",
        "AmazonEC2",
        (
            ("instanceType", instance_type),
            ("regionCode", region),
            ("operatingSystem", "Linux"),
            ("tenancy", "Shared"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),  # not the unused-reservation or allocated-host rates
            ("licenseModel", "No License required"),
            ("marketoption", "OnDemand"),  # not Capacity Blocks
        ),
        (Row(f"instance:{instance_type}", f"BoxUsage:{instance_type}", "Hrs"),),
    )


def network_queries(region: str, disk_kind: str) -> list[Query]:
    return [
        Query(
            f"EBS {disk_kind} storage",
            "AmazonEC2",
            (("regionCode", region), ("productFamily", "Storage"), ("volumeApiName", disk_kind)),
            (Row("disk_gb_month", f"EBS:VolumeUsage.{disk_kind}", "GB-Mo"),),
        ),
        Query(
            "Application Load Balancer",
            "AWSELB",
            (("regionCode", region), ("productFamily", "Load Balancer-Application")),
            (Row("lb_hour", "LoadBalancerUsage", "Hrs"), Row("lb_capacity_unit_hour", "LCUUsage", "LCU-Hrs")),
        ),
        Query(
            "NAT gateway",
            "AmazonEC2",
            (("regionCode", region), ("productFamily", "NAT Gateway")),
            (Row("nat_hour", "NatGateway-Hours", "Hrs"), Row("nat_gb", "NatGateway-Bytes", "GB")),
        ),
        Query(
            "public IPv4 address",
            "AmazonVPC",
            # These products carry no productFamily; the Price List groups them as VPCPublicIPv4Address
            # (in-use, idle and contiguous-block rates), so the in-use one is picked by usagetype.
            (("regionCode", region), ("group", "VPCPublicIPv4Address")),
            (Row("public_ip_hour", "PublicIPv4:InUseAddress", "Hrs"),),
        ),
    ]


NOTES = [
    "every public IPv4 address is billed hourly (since 2024-02-01): the NAT's EIP and the ALB's",
    "on-demand Linux, shared tenancy; the first priced tier of each rate (no free tier counted)",
]


def fetch(
    region: str, instance_types: list[str], disk_kind: str, progress: Progress, *, client: PricingClient | None = None
) -> Fetched:
    """Read every row for `region`; `client` is a boto3 `pricing` client (made here when not given)."""
    pricing = client if client is not None else make_client()
    out = Fetched(notes=list(NOTES))
    queries = [instance_query(t, region) for t in instance_types] + network_queries(region, disk_kind)
    for query in queries:
        products = list_products(pricing, query)
        progress(f"{API}: {query.what} in {region}: {len(products)} product{'s' if len(products) != 1 else ''}")
        for row in query.rows:
            found = pick(products, row)
            key = row.name.removeprefix("instance:")
            if isinstance(found, str):
                out.missing[key] = found
                continue
            price, evidence = found
            if row.name.startswith("instance:"):
                out.instance_hour[key] = price
            else:
                out.scalars[key] = price
            out.evidence[key] = evidence
    return out


def make_client() -> PricingClient:
    import boto3
    from botocore.config import Config

    # The user's own credentials and profile (AWS_PROFILE, ~/.aws): the Price List API signs requests,
    # any identity allowed pricing:GetProducts may read it. "standard" retries throttling and 5xx.
    config = Config(
        connect_timeout=5, read_timeout=60, retries={"mode": "standard", "max_attempts": 6}, user_agent_extra="vmplane"
    )
    from botocore.exceptions import ProfileNotFound

    try:
        return boto3.session.Session().client("pricing", region_name=PRICING_REGION, config=config)
    except ProfileNotFound as e:  # AWS_PROFILE names a profile in neither file: one line, no traceback
        profile = e.kwargs.get("profile", "")
        raise PriceRefreshError(f"{API}: AWS profile {profile!r} (AWS_PROFILE) is not in ~/.aws/config") from e


def list_products(client: PricingClient, query: Query) -> list[dict[str, Any]]:
    """Every product matching `query`, page by page."""
    products: list[dict[str, Any]] = []
    params = query.params()
    while True:
        page = _call(client, params, query.what)
        products += [json.loads(item) for item in page.get("PriceList", [])]
        token = page.get("NextToken")
        if not token:
            return products
        params = {**query.params(), "NextToken": token}


def pick(products: Sequence[dict[str, Any]], row: Row) -> tuple[float, str] | str:
    """The row's price and what it came from, or why there is none (never 0)."""
    billed = re.compile(_PREFIX + re.escape(row.usagetype) + "$")
    found: dict[float, str] = {}
    for product in products:
        attrs = product.get("product", {}).get("attributes", {})
        usagetype = attrs.get("usagetype", "")
        if not billed.match(usagetype):
            continue
        price = on_demand_price(product, row.unit)
        if price is not None:
            sku = product.get("product", {}).get("sku", "?")
            found.setdefault(price[0], f"{API}: sku {sku} {usagetype}: {price[1]}")
    if not found:
        return f"the {API} lists no on-demand {row.usagetype} product priced per {row.unit}"
    if len(found) > 1:
        return f"ambiguous: {len(found)} {row.usagetype} products with different prices ({sorted(found)})"
    ((price_usd, evidence),) = found.items()
    return price_usd, evidence


def on_demand_price(product: dict[str, Any], unit: str) -> tuple[float, str] | None:
    """The first priced tier of the product's on-demand dimensions in `unit`: (USD, its description)."""
    dims = [
        dim
        for term in product.get("terms", {}).get("OnDemand", {}).values()
        for dim in term.get("priceDimensions", {}).values()
        if dim.get("unit") == unit and "USD" in dim.get("pricePerUnit", {})
    ]
    for dim in sorted(dims, key=lambda d: float(d.get("beginRange", "0"))):
        usd = float(dim["pricePerUnit"]["USD"])
        if usd > 0:  # a $0 first tier is a free allowance; the estimate counts none
            return usd, str(dim.get("description", ""))
    return None


def _call(client: PricingClient, params: GetProductsRequestTypeDef, what: str) -> GetProductsResponseTypeDef:
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    try:
        return client.get_products(**params)
    except NoCredentialsError as e:
        raise PriceRefreshError(
            f"{API}: no AWS credentials (its requests are signed: set AWS_PROFILE or AWS_ACCESS_KEY_ID, "
            "or run `aws configure`)"
        ) from e
    except (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError) as e:
        raise PriceRefreshError(
            f"could not reach the {API} (pricing.{PRICING_REGION}.amazonaws.com) for {what}: {type(e).__name__}"
        ) from e
    except ClientError as e:
        err = e.response.get("Error", {})
        raise PriceRefreshError(f"{API} refused {what}: {err.get('Code', '?')}: {err.get('Message', '')}") from e
    except BotoCoreError as e:
        raise PriceRefreshError(f"{API}: {what}: {type(e).__name__}: {e}") from e
