"""Rules on any compute request: requestId, unknown zones and regions, list paging."""

from __future__ import annotations

import re

from vmplane.sandbox.gcp.compute import Call
from vmplane.sandbox.gcp.compute_catalogue import REGIONS, ZONES
from vmplane.sandbox.gcp.rules import Step, bad, rule
from vmplane.sandbox.gcp.rules.examples import P, net, sub, vm

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_REQUEST_ID_DOC = "https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert"
MAX_RESULTS = 500


def _request_id_uuid(call: Call) -> None:
    given = call.query.get("requestId")
    if given is not None and not _UUID.fullmatch(str(given)):
        raise bad("requestId", given, "The request ID must be a valid UUID.")


def _request_id_zero(call: Call) -> None:
    if call.query.get("requestId") == "00000000-0000-0000-0000-000000000000":
        raise bad("requestId", call.query["requestId"], "The zero UUID is not supported as a request ID.")


def _unknown_zone(call: Call) -> None:
    zone = call.params.get("zone")
    if zone is not None and zone not in ZONES and call.method.id != "compute.zones.get":
        raise bad("zone", zone, "Unknown zone.")


def _unknown_region(call: Call) -> None:
    region = call.params.get("region")
    if region is not None and region not in REGIONS and call.method.id != "compute.regions.get":
        raise bad("region", region, "Unknown region.")


def _max_results(call: Call) -> None:
    given = call.query.get("maxResults")
    if isinstance(given, int) and given > MAX_RESULTS:
        raise bad("maxResults", given, f"Must be less than or equal to {MAX_RESULTS}.")


def _q(path: str, query: str) -> str:
    return f"{path}?{query}"


rule(
    "compute.request-id-uuid",
    ("compute.*",),
    "`requestId` that is not a UUID",
    _REQUEST_ID_DOC,
    "400 invalid",
    "200: any string was kept as the idempotency key",
    (
        Step(
            "POST",
            _q(P + "/global/networks", "requestId=job-1-network"),
            {"name": "n1", "autoCreateSubnetworks": False},
        ),
    ),
    _request_id_uuid,
)
rule(
    "compute.request-id-zero",
    ("compute.*",),
    "`requestId` of the zero UUID (documented as unsupported)",
    _REQUEST_ID_DOC,
    "400 invalid",
    "200",
    (
        Step(
            "POST",
            _q(P + "/global/networks", "requestId=00000000-0000-0000-0000-000000000000"),
            {"name": "n1", "autoCreateSubnetworks": False},
        ),
    ),
    _request_id_zero,
)
rule(
    "compute.unknown-zone",
    ("compute.*",),
    "a zonal method on a zone that does not exist (zones.get alone answers 404)",
    "https://github.com/inspec/inspec-gcp/issues/301",
    "400 invalid",
    "200 with no items",
    (Step("GET", P + "/zones/us-central1-z/instances"),),
    _unknown_zone,
)
rule(
    "compute.unknown-region",
    ("compute.*",),
    "a regional method on a region that does not exist (regions.get alone answers 404)",
    "https://github.com/inspec/inspec-gcp/issues/301",
    "400 invalid",
    "200 with no items",
    (Step("GET", P + "/regions/mars-north1/subnetworks"),),
    _unknown_region,
)
rule(
    "compute.max-results-500",
    ("compute.*",),
    "`maxResults` above 500 on a list",
    "https://cloud.google.com/compute/docs/reference/rest/v1/instances/list",
    "400 invalid",
    "200 with every item",
    (Step("GET", P + "/global/networks?maxResults=501"),),
    _max_results,
)
rule(
    "compute.list-pages",
    ("compute.*.list",),
    "a list answers at most `maxResults` items and a `nextPageToken` while more remain",
    "https://cloud.google.com/compute/docs/reference/rest/v1/instances/list",
    "page",
    "every item, never a nextPageToken",
    (net("n1"), net("n2"), Step("GET", P + "/global/networks?maxResults=1")),
    where="sandbox/gcp/paging.py",
)
rule(
    "compute.aggregated-pages",
    ("compute.instances.aggregatedList",),
    "an aggregated list pages its items across scopes the same way",
    "https://cloud.google.com/compute/docs/reference/rest/v1/instances/aggregatedList",
    "page",
    "every item, never a nextPageToken",
    (
        net(),
        sub(),
        vm("vm1"),
        vm("vm2"),
        Step("GET", P + "/aggregated/instances?maxResults=1"),
    ),
    where="sandbox/gcp/paging.py",
)
rule(
    "compute.page-token-unknown",
    ("compute.*.list", "compute.*.aggregatedList"),
    "a `pageToken` the API never issued",
    "https://cloud.google.com/compute/docs/reference/rest/v1/instances/list",
    "400 invalid",
    "200: the token was ignored",
    (Step("GET", P + "/global/networks?pageToken=bm90LWEtdG9rZW4"),),
    where="sandbox/gcp/paging.py",
)
