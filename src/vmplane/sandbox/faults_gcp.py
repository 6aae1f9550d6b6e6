"""The Google Cloud side of a fault profile: a hook around the GCP sandbox's dispatcher (gcp/server.py).

- throttle: 429 `rateLimitExceeded` (RESOURCE_EXHAUSTED), Google's answer to a burst
  (https://cloud.google.com/compute/api-quotas#rate_quotas);
- visibility: a get of a compute resource inserted within `visibility.seconds` answers 404, as a get
  issued before Google has finished the insert does (the sandbox applies an insert at once);
- capacity: an instance insert's *operation* ends with `ZONE_RESOURCE_POOL_EXHAUSTED` and no instance
  is left (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability).
  A managed instance group creates its instances inside the sandbox, so capacity reaches only
  `compute.instances.insert`. IAM propagation has no GCP fault here: the sandbox's service accounts are
  not checked by the instance inserts that name them, so a delay would have nothing to refuse.
"""

from __future__ import annotations

import re
from typing import Any

from vmplane.sandbox.faults import NO_FAULTS_AGENT, Injector
from vmplane.sandbox.gcp import operations
from vmplane.sandbox.gcp.errors import ApiError, not_found
from vmplane.sandbox.gcp.store import State

_KEY = r"(?P<key>(?:global|regions/[^/]+|zones/[^/]+)/(?P<kind>[A-Za-z]+)/[^/]+)"
_COMPUTE_PATH = re.compile(rf"^/compute/v1/projects/(?P<project>[^/]+)/{_KEY}$")
_LINK = re.compile(rf"/compute/v1/projects/(?P<project>[^/]+)/{_KEY}$")
CAPACITY_CODE = "ZONE_RESOURCE_POOL_EXHAUSTED"


class GcpFaults:
    def __init__(self, injector: Injector) -> None:
        self.faults = injector

    def before(self, http: str, path: str, headers: dict[str, str]) -> None:
        """Raise the fault this request meets, if any, before the sandbox handles it. google-api-core's REST
        clients put their ClientInfo in `x-goog-api-client`, httplib2's in `user-agent`: either may opt out."""
        f = self.faults
        if any(NO_FAULTS_AGENT in headers.get(h, "") for h in ("user-agent", "x-goog-api-client")):
            return
        if f.throttled("gcp"):
            f.record("gcp", "throttle", f"{http} {path}", "rateLimitExceeded")
            raise ApiError(429, "rateLimitExceeded", "Rate Limit Exceeded", "RESOURCE_EXHAUSTED")
        m = _COMPUTE_PATH.match(path)
        if http == "GET" and m is not None and f.invisible(f"{m['project']}/{m['key']}") is not None:
            f.record("gcp", "visibility", f"GET {m['kind']}", "notFound", m["key"])
            raise not_found(f"projects/{m['project']}/{m['key']}")

    def after(self, state: State, method_id: str, result: Any) -> None:
        """What a handled request made: remember an insert's target, or fail an instance insert."""
        if not (isinstance(result, dict) and result.get("kind") == "compute#operation"):
            return
        m = _LINK.search(str(result.get("targetLink", "")))
        if m is None or not method_id.endswith(".insert"):
            return
        if method_id == "compute.instances.insert" and self.faults.out_of_capacity("gcp"):
            zone = m["key"].split("/instances/")[0]
            message = (
                f"The zone 'projects/{m['project']}/{zone}' does not have enough resources available to fulfill "
                "the request.  Try a different zone, or try again later."
            )
            self.faults.record("gcp", "capacity", method_id, CAPACITY_CODE, zone)
            operations.fail(state, result, CAPACITY_CODE, message, http_status=503)  # leaves no instance
            return
        self.faults.created(m["kind"], f"{m['project']}/{m['key']}")
