"""Google Cloud clients for one target (a real project or the sandbox); every call goes through the
transport (clouds/transport.py: counts, retries, metrics, the fault hook), operations are polled by us.

Compute goes through google-cloud-compute over REST; Cloud DNS, IAM and Resource Manager through
google-api-python-client's bundled discovery documents. In sandbox mode every client points at the
sandbox with anonymous credentials, so Application Default Credentials are never read.

`ExtendedOperation.result()` polls compute.googleapis.com whatever endpoint the client was given, so
the driver calls the `*_unary` methods and waits on operations itself (`operations.py`).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, overload

from vmplane.clouds.errors import AuthError, CloudError
from vmplane.clouds.gcp.errors import translate
from vmplane.clouds.transport import Transport

if TYPE_CHECKING:
    from google.cloud import compute_v1

    from vmplane.clouds.gcp.discovery import CrmApi, DnsApi, IamApi, SecretManagerApi

T = TypeVar("T")

CALL_TIMEOUT = 60.0  # seconds per HTTP request
_THROTTLING = frozenset({"429", "rateLimitExceeded", "userRateLimitExceeded", "RESOURCE_EXHAUSTED"})
ADC_ENV = "GOOGLE_APPLICATION_CREDENTIALS"
# Aims a real target (Application Default Credentials, not the sandbox's anonymous ones) at another API
# endpoint, as AWS_ENDPOINT_URL does for AWS: how a dead port, an unresolvable host or refused credentials
# look can be seen without Google. Google's clients have no such variable (the universe domain only
# renames googleapis.com, and must match the credentials').
ENDPOINT_HOOK_ENV = "VMPLANE_GCP_TEST_ENDPOINT"


@dataclass(frozen=True)
class GcpTarget:
    project: str
    region: str
    endpoint_url: str | None = None  # set only for the sandbox

    @property
    def sandbox(self) -> bool:
        return self.endpoint_url is not None

    def describe(self) -> str:
        where = f"sandbox {self.endpoint_url}" if self.sandbox else "Google Cloud"
        return f"{where} (project {self.project}, {self.region})"


def new_request_id() -> str:
    """A requestId for one insert: Google drops a repeat of the same id, so a retried call creates once."""
    return str(uuid.uuid4())


class GcpClients:
    """Lazily built, thread-safe clients for one target; `call` is the one way a driver reaches the cloud."""

    def __init__(self, target: GcpTarget) -> None:
        self.target = target
        self.project = target.project
        self.region = target.region
        self._lock = threading.Lock()
        self._compute: dict[str, Any] = {}
        self._discovery: dict[str, Any] = {}
        self._credentials: Any = None
        self._source = ""  # where the credentials came from, for an error that says Google refused them
        # The sandbox's endpoint, or the override's; None: Google's own per API.
        self.endpoint_url = target.endpoint_url or os.environ.get(ENDPOINT_HOOK_ENV) or None
        self.transport = Transport(
            "gcp",
            translate=self._translate,
            endpoint=self._endpoint,
            is_sandbox=lambda: target.sandbox,
            throttled=lambda err: err.code in _THROTTLING,
        )

    # ---- clients ----
    def _creds(self) -> Any:
        if self._credentials is None:
            if self.target.sandbox:
                from google.auth.credentials import AnonymousCredentials

                self._credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
            else:
                self._credentials, self._source = _default_credentials()
        return self._credentials

    # One overload per client vmplane names (google-cloud-compute is typed, so mypy checks those calls).
    @overload
    def compute(self, client: Literal["BackendServices"]) -> compute_v1.BackendServicesClient: ...
    @overload
    def compute(self, client: Literal["Firewalls"]) -> compute_v1.FirewallsClient: ...
    @overload
    def compute(self, client: Literal["Images"]) -> compute_v1.ImagesClient: ...
    @overload
    def compute(self, client: Literal["InstanceGroups"]) -> compute_v1.InstanceGroupsClient: ...
    @overload
    def compute(self, client: Literal["Instances"]) -> compute_v1.InstancesClient: ...
    @overload
    def compute(self, client: Literal["MachineTypes"]) -> compute_v1.MachineTypesClient: ...
    @overload
    def compute(self, client: Literal["Networks"]) -> compute_v1.NetworksClient: ...
    @overload
    def compute(self, client: Literal["RegionAutoscalers"]) -> compute_v1.RegionAutoscalersClient: ...
    @overload
    def compute(
        self, client: Literal["RegionInstanceGroupManagers"]
    ) -> compute_v1.RegionInstanceGroupManagersClient: ...
    @overload
    def compute(self, client: Literal["RegionInstanceGroups"]) -> compute_v1.RegionInstanceGroupsClient: ...
    @overload
    def compute(self, client: Literal["RegionInstanceTemplates"]) -> compute_v1.RegionInstanceTemplatesClient: ...
    @overload
    def compute(self, client: Literal["Regions"]) -> compute_v1.RegionsClient: ...
    @overload
    def compute(self, client: Literal["ResourcePolicies"]) -> compute_v1.ResourcePoliciesClient: ...
    @overload
    def compute(self, client: Literal["Routers"]) -> compute_v1.RoutersClient: ...
    @overload
    def compute(self, client: Literal["SslCertificates"]) -> compute_v1.SslCertificatesClient: ...
    @overload
    def compute(self, client: Literal["Subnetworks"]) -> compute_v1.SubnetworksClient: ...
    @overload
    def compute(self, client: Literal["Zones"]) -> compute_v1.ZonesClient: ...
    @overload  # a name chosen at run time (the tables of kinds in inventory.py, lb_refs.py, ...)
    def compute(self, client: str) -> Any: ...
    def compute(self, client: str) -> Any:
        """A compute_v1 REST client by class name without `Client`, e.g. `compute("Networks")`."""
        with self._lock:
            if client not in self._compute:
                from google.api_core.client_options import ClientOptions
                from google.cloud import compute_v1

                opts = ClientOptions(api_endpoint=self.endpoint_url) if self.endpoint_url else None
                cls = getattr(compute_v1, f"{client}Client")
                self._compute[client] = cls(credentials=self._creds(), client_options=opts, transport="rest")
            return self._compute[client]

    def api(self, name: str, version: str) -> Any:
        """A google-api-python-client service (dns v1, iam v1, cloudresourcemanager v1) from the bundled
        discovery document: nothing is fetched at run time."""
        key = f"{name}.{version}"
        with self._lock:
            if key not in self._discovery:
                import google_auth_httplib2
                import httplib2
                from googleapiclient import discovery

                http = google_auth_httplib2.AuthorizedHttp(self._creds(), http=httplib2.Http(timeout=CALL_TIMEOUT))
                opts = {"api_endpoint": self.endpoint_url} if self.endpoint_url else None
                self._discovery[key] = discovery.build(
                    name, version, http=http, static_discovery=True, cache_discovery=False, client_options=opts
                )
            return self._discovery[key]

    # The typed faces of the discovery clients vmplane calls (discovery.py): the client itself is untyped.
    @property
    def dns(self) -> DnsApi:
        return cast("DnsApi", self.api("dns", "v1"))

    @property
    def iam(self) -> IamApi:
        return cast("IamApi", self.api("iam", "v1"))

    @property
    def crm(self) -> CrmApi:
        return cast("CrmApi", self.api("cloudresourcemanager", "v1"))

    @property
    def secretmanager(self) -> SecretManagerApi:
        return cast("SecretManagerApi", self.api("secretmanager", "v1"))

    # ---- calls ----
    def _translate(self, e: Exception, method: str) -> CloudError:
        return translate(e, method, endpoint=self._endpoint(method), credentials=self._source)

    def _endpoint(self, method: str) -> str:
        return self.endpoint_url or f"https://{method.split('.', 1)[0]}.googleapis.com"

    def call(self, method: str, fn: Callable[[], T]) -> T:
        """Run one API call named `api.collection.verb` (e.g. `compute.networks.insert`) through the
        transport: counted for the step, SDK errors translated into vmplane's CloudError tree, transient
        ones (429, 5xx, resets) retried with jittered backoff to a deadline. "In use" is left to the
        caller (teardown retries it on its own, longer deadline).

        Compute calls pass `timeout=CALL_TIMEOUT` themselves; discovery calls are bounded by the http's.
        """
        return self.transport.call(method, fn)


def _default_credentials() -> tuple[Any, str]:
    """Application Default Credentials, and where they came from; none at all is one AuthError naming the
    ways to provide them (google-auth's own sentence names neither the variable nor the gcloud command)."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    path = os.environ.get(ADC_ENV)
    try:
        creds, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError as err:
        if path:  # a file that is missing or not a credentials file: google-auth's sentence names it
            raise AuthError(f"{ADC_ENV} ({path}): {err}", code="DefaultCredentialsError") from err
        raise AuthError(
            f"no Google Cloud credentials found: set {ADC_ENV} to a service account key file, or run "
            "`gcloud auth application-default login` (Application Default Credentials); or use --sandbox",
            code="DefaultCredentialsError",
        ) from err
    if path:
        return creds, f"{ADC_ENV} ({path})"
    if type(creds).__module__.startswith("google.auth.compute_engine"):
        return creds, "the metadata server (the VM's service account)"
    return creds, "the Application Default Credentials (`gcloud auth application-default login`)"
