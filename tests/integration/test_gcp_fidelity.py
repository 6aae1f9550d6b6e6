"""The GCP driver against what the stricter sandbox now answers as Google does: operation errors mapped
like synchronous ones (in use retried to the deadline, quota and capacity named), the fingerprint
read-modify-write surviving a concurrent change, and the preflight refusing a disk smaller than its image.
Resources are set up with google-cloud-compute directly, never with the code under test."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1 as c
from tests.helpers import gcp_sandbox_alone

from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import (
    CloudError,
    DeadlineExceededError,
    DependencyViolationError,
    InvalidRequestError,
    QuotaError,
)
from vmplane.clouds.gcp import lb_refs, operations, preflight
from vmplane.clouds.gcp.errors import operation_error
from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig

REGION = "us-central1"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    yield from gcp_sandbox_alone()


def _client(endpoint: str, name: str) -> Any:
    cls = getattr(c, f"{name}Client")
    options = ClientOptions(api_endpoint=endpoint)
    return cls(credentials=AnonymousCredentials(), client_options=options, transport="rest")


def _gcp(endpoint: str) -> GcpClients:
    return GcpClients(GcpTarget(project=f"fid-{uuid.uuid4().hex[:10]}", region=REGION, endpoint_url=endpoint))


def _wait(endpoint: str, project: str, op: Any) -> Any:
    return _client(endpoint, "GlobalOperations").wait(project=project, operation=op.name)


def _op(code: str, zone: str = "") -> c.Operation:
    error = c.Error(errors=[c.Errors(code=code, message=f"the {code} message")])
    return c.Operation(name="operation-1", status=c.Operation.Status.DONE, error=error, zone=zone)


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", DependencyViolationError),
        ("resourceInUseByAnotherResource", DependencyViolationError),
        ("RESOURCE_NOT_READY", DependencyViolationError),
        ("QUOTA_EXCEEDED", QuotaError),
        ("ZONE_RESOURCE_POOL_EXHAUSTED", QuotaError),
        ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", QuotaError),
        ("SOMETHING_ELSE", CloudError),
    ],
)
def test_operation_errors_map_like_synchronous_ones(code: str, kind: type[CloudError]) -> None:
    """Before: RESOURCE_IN_USE_BY_ANOTHER_RESOURCE in an operation was a plain CloudError (never retried)."""
    err = operation_error(_op(code), "delete network n1")
    assert type(err) is kind and err.code == code


def test_capacity_error_names_the_zone_and_the_fix() -> None:
    zone = "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a"
    err = operation_error(_op("ZONE_RESOURCE_POOL_EXHAUSTED", zone), "create VM web-0")
    assert "zone us-central1-a" in str(err) and "another zone or another machine type" in str(err)
    assert not isinstance(err, DependencyViolationError)  # not retried by the teardown rule


def _network_with_firewall(endpoint: str, project: str) -> None:
    nets, fws = _client(endpoint, "Networks"), _client(endpoint, "Firewalls")
    _wait(
        endpoint,
        project,
        nets.insert_unary(project=project, network_resource=c.Network(name="n1", auto_create_subnetworks=False)),
    )
    rule = c.Firewall(name="oob", network="global/networks/n1", allowed=[c.Allowed(I_p_protocol="tcp", ports=["22"])])
    _wait(endpoint, project, fws.insert_unary(project=project, firewall_resource=rule))


def _delete_network(gcp: GcpClients, sleep: Callable[[float], None], timeout: float) -> bool:
    nets = gcp.compute("Networks")
    call = lambda: nets.delete_unary(project=gcp.project, network="n1")  # noqa: E731
    return operations.remove(gcp, "compute.networks.delete", call, what="network n1", timeout=timeout, sleep=sleep)


def test_teardown_retries_an_in_use_network_then_fails_naming_the_user(endpoint: str) -> None:
    """A firewall made out of band keeps the network in use: the delete's operation fails each time, the
    teardown rule retries it to the deadline and then names the firewall. The old sandbox answered a
    synchronous 400 and operation_error mapped the operation's code to a plain CloudError (no retry)."""
    gcp = _gcp(endpoint)
    _network_with_firewall(endpoint, gcp.project)
    naps: list[float] = []
    with pytest.raises(DeadlineExceededError) as info:
        _delete_network(gcp, naps.append, timeout=0.0)
    assert f"projects/{gcp.project}/global/firewalls/oob" in str(info.value)
    assert _client(endpoint, "Networks").get(project=gcp.project, network="n1").name == "n1"


def test_teardown_succeeds_once_the_user_is_removed(endpoint: str) -> None:
    gcp = _gcp(endpoint)
    _network_with_firewall(endpoint, gcp.project)
    naps: list[float] = []

    def sleep(seconds: float) -> None:  # someone removes the firewall while teardown waits
        naps.append(seconds)
        if len(naps) == 2:
            fws = _client(endpoint, "Firewalls")
            _wait(endpoint, gcp.project, fws.delete_unary(project=gcp.project, firewall="oob"))

    assert _delete_network(gcp, sleep, timeout=300.0) is True
    assert len(naps) == 2  # two in-use failures, then the delete went through
    assert [n.name for n in _client(endpoint, "Networks").list(project=gcp.project)] == []


def test_url_map_patch_survives_a_concurrent_change(endpoint: str) -> None:
    """Between vmplane's read and its patch someone else changes the URL map: the fingerprint vmplane read
    is stale, Google answers 412, vmplane reads again and patches once more. The old sandbox ignored
    fingerprints, and lb.py patched with none."""
    gcp = _gcp(endpoint)
    p = gcp.project
    hc = c.HealthCheck(name="h1", type_="HTTP", http_health_check=c.HTTPHealthCheck(port=80))
    _wait(endpoint, p, _client(endpoint, "HealthChecks").insert_unary(project=p, health_check_resource=hc))
    bs = c.BackendService(name="b1", health_checks=["global/healthChecks/h1"], load_balancing_scheme="EXTERNAL_MANAGED")
    _wait(endpoint, p, _client(endpoint, "BackendServices").insert_unary(project=p, backend_service_resource=bs))
    maps = _client(endpoint, "UrlMaps")
    _wait(
        endpoint,
        p,
        maps.insert_unary(project=p, url_map_resource=c.UrlMap(name="u1", default_service="global/backendServices/b1")),
    )
    real, reads, sent = gcp.call, [], []

    def racing(method: str, fn: Callable[[], Any], **kw: Any) -> Any:
        out = real(method, fn, **kw)
        if method == "compute.urlMaps.get":
            reads.append(out.fingerprint)
            if len(reads) == 1:  # the concurrent change lands right after vmplane's first read
                fp = maps.get(project=p, url_map="u1").fingerprint
                other = c.UrlMap(description="someone else", fingerprint=fp)
                _wait(endpoint, p, maps.patch_unary(project=p, url_map="u1", url_map_resource=other))
        elif method == "compute.urlMaps.patch":
            sent.append(method)
        return out

    gcp.call = racing  # type: ignore[method-assign]
    body = c.UrlMap(
        default_url_redirect=c.HttpRedirectAction(
            https_redirect=True, redirect_response_code="MOVED_PERMANENTLY_DEFAULT"
        )
    )
    body.default_service = ""
    lb_refs.modify(
        gcp, "urlMaps", "UrlMaps", "url_map", "u1", "patch", url_map_resource=c.UrlMap(description="vmplane's")
    )
    assert len(reads) == 2 and reads[0] != reads[1]  # read, 412, read again
    assert maps.get(project=p, url_map="u1").description == "vmplane's"


def _spec(disk_gb: int) -> EnvSpec:
    pool = {"mode": "fixed", "size": 1, "instanceType": "e2-small", "image": "debian-12", "diskGb": disk_gb}
    provider = {"cloud": "gcp", "project": "fid-project", "region": REGION}
    return EnvSpec.model_validate({"name": "shop", "org": "acme", "provider": provider, "pools": {"web": pool}})


@pytest.mark.parametrize("disk_gb", [8, 10])
def test_preflight_refuses_a_disk_smaller_than_its_image(endpoint: str, disk_gb: int) -> None:
    """The file allows diskGb 8, Debian's image is 10 GB: Google would refuse the VM only when the MIG or
    instance is created; the preflight refuses the file before anything exists (the old sandbox and
    preflight accepted it)."""
    gcp, spec = _gcp(endpoint), _spec(disk_gb)
    ctx = Context(
        job_id="job-fid-1", spec=spec, infra=InfraConfig(), tagger=Tagger.for_spec(spec, "job-fid-1"), log=[].append
    )
    if disk_gb < 10:
        with pytest.raises(
            InvalidRequestError, match=r"pools\.web\.diskGb: 8 GB is smaller than the image debian-12 \(10 GB\)"
        ):
            preflight.preflight(gcp, ctx)
    else:
        preflight.preflight(gcp, ctx)
    assert list(_client(endpoint, "Networks").list(project=gcp.project)) == []  # preflight creates nothing


def test_a_transient_retry_sends_the_same_request_id(endpoint: str) -> None:
    """Google (and now the sandbox) takes only a UUID, not the zero one, as requestId; a retry after a lost
    answer must reuse it so the insert happens once. The id is made once per call (a random UUID, not a
    hash of the job: replaying the id of a *failed* operation would return that failure again)."""
    from google.api_core.exceptions import ServiceUnavailable

    gcp = _gcp(endpoint)
    nets, seen = gcp.compute("Networks"), []

    def insert(request_id: str) -> Any:
        seen.append(request_id)
        if len(seen) == 1:
            raise ServiceUnavailable("the answer was lost")
        req = c.InsertNetworkRequest(
            project=gcp.project,
            network_resource=c.Network(name="n1", auto_create_subnetworks=False),
            request_id=request_id,
        )
        return nets.insert_unary(request=req)

    operations.create(gcp, "compute.networks.insert", insert, what="network n1")
    assert len(seen) == 2 and seen[0] == seen[1] and uuid.UUID(seen[0]).int != 0
    ops = _client(endpoint, "GlobalOperations").list(project=gcp.project)
    assert [o.client_operation_id for o in ops if o.operation_type == "insert"] == [seen[0]]


def test_quota_in_an_operation_is_a_quota_error(endpoint: str) -> None:
    """Past the region's CPUS quota the insert's operation fails QUOTA_EXCEEDED (the old sandbox had no quota):
    vmplane raises QuotaError with Google's message, and no instance is left."""
    gcp = _gcp(endpoint)
    p, zone = gcp.project, "us-central1-a"
    _wait(
        endpoint,
        p,
        _client(endpoint, "Networks").insert_unary(
            project=p, network_resource=c.Network(name="n1", auto_create_subnetworks=False)
        ),
    )
    sub = c.Subnetwork(name="s1", network="global/networks/n1", ip_cidr_range="10.0.0.0/24")
    _client(endpoint, "Subnetworks").insert_unary(project=p, region=REGION, subnetwork_resource=sub)
    vms = gcp.compute("Instances")

    def vm(name: str) -> c.Instance:
        image = "projects/debian-cloud/global/images/family/debian-12"
        disk = c.AttachedDisk(boot=True, initialize_params=c.AttachedDiskInitializeParams(source_image=image))
        nic = c.NetworkInterface(subnetwork=f"regions/{REGION}/subnetworks/s1")
        return c.Instance(
            name=name, machine_type=f"zones/{zone}/machineTypes/e2-standard-4", disks=[disk], network_interfaces=[nic]
        )

    for i in range(6):  # 24 vCPUs: the sandbox's regional quota, used up
        vms.insert_unary(project=p, zone=zone, instance_resource=vm(f"vm{i}"))

    def insert(request_id: str) -> Any:
        return vms.insert_unary(
            request=c.InsertInstanceRequest(project=p, zone=zone, instance_resource=vm("vm6"), request_id=request_id)
        )

    with pytest.raises(QuotaError, match=r"Quota 'CPUS' exceeded\.  Limit: 24\.0 in region us-central1"):
        operations.create(gcp, "compute.instances.insert", insert, what="VM vm6")
    assert "vm6" not in {v.name for v in vms.list(project=p, zone=zone)}
