"""clouds/gcp/lb*.py against the GCP sandbox: the four LB steps build the whole global external
Application Load Balancer, re-runs insert nothing, the certificate's PROVISIONING/ACTIVE paths, a
partial state converges, and detach leaves nothing of the LB (and a second attach works).

The network, the Fixed VMs and the MIG are made here directly with google-cloud-compute (not with
the other GCP modules), and every assertion reads the sandbox with google-cloud-compute or the raw
Cloud DNS REST API, never with vmplane's code.
"""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from google.api_core.client_options import ClientOptions
from google.api_core.exceptions import NotFound
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1
from tests.helpers import gcp_sandbox_alone

from vmplane.clouds.base import API_CALLS, Context, Tagger
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.gcp import lb, lb_teardown, naming
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig, VMRecord, VMState

REGION = "us-central1"
ZONES = ["us-central1-a", "us-central1-b"]
DOMAIN = "shop.sandbox.vmplane.test"
HC_RANGES = {"35.191.0.0/16", "130.211.0.0/22"}
JOB = "job-gcp-lb-1"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    yield from gcp_sandbox_alone()


_projects = iter(range(1, 1000))


def _boot() -> compute_v1.AttachedDisk:
    """Google requires a boot disk (rule compute.disk-boot-required)."""
    image = "projects/debian-cloud/global/images/family/debian-12"
    params = compute_v1.AttachedDiskInitializeParams(source_image=image)
    return compute_v1.AttachedDisk(boot=True, auto_delete=True, initialize_params=params)


@pytest.fixture(autouse=True)
def _one_certificate_look(monkeypatch: pytest.MonkeyPatch) -> None:
    from vmplane.clouds.gcp import certs

    monkeypatch.setattr(certs, "SANDBOX_CERT_DEADLINE", 0.0)  # one look: the sandbox never activates it alone


@pytest.fixture
def project(endpoint: str) -> str:
    return f"lb-test-{next(_projects)}"  # a fresh sandbox project per test (created on first use)


def _client(endpoint: str, name: str) -> Any:
    cls = getattr(compute_v1, f"{name}Client")
    return cls(
        credentials=AnonymousCredentials(), client_options=ClientOptions(api_endpoint=endpoint), transport="rest"
    )


def _done(endpoint: str, project: str, op: Any) -> None:
    if op.zone:
        _client(endpoint, "ZoneOperations").wait(project=project, zone=op.zone.rsplit("/", 1)[-1], operation=op.name)
    elif op.region:
        _client(endpoint, "RegionOperations").wait(project=project, region=REGION, operation=op.name)
    else:
        _client(endpoint, "GlobalOperations").wait(project=project, operation=op.name)


def _spec(**lb_block: Any) -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": "shop",
            "org": "acme",
            "provider": {"cloud": "gcp", "project": "lb-test-project", "region": REGION},
            "pools": {
                "web": {"mode": "fixed", "size": 2, "instanceType": "e2-small", "image": "debian-12"},
                "api": {"mode": "asg", "min": 1, "desired": 1, "max": 2, "instanceType": "e2-small"},
            },
            "exec": {"mode": "OSConfig"},
            "loadBalancer": {"domain": DOMAIN, "certSource": "GCPManaged", **lb_block},
        }
    )


def _provision(endpoint: str, project: str, spec: EnvSpec) -> tuple[GcpClients, Context]:
    """A network, two Fixed VMs (one per zone) and a regional MIG with its named port, made directly."""
    net, sub = naming.network(spec), naming.subnetwork(spec)
    _done(
        endpoint,
        project,
        _client(endpoint, "Networks").insert_unary(
            project=project, network_resource=compute_v1.Network(name=net, auto_create_subnetworks=False)
        ),
    )
    subnet = compute_v1.Subnetwork(
        name=sub, network=f"projects/{project}/global/networks/{net}", ip_cidr_range="10.9.0.0/24"
    )
    _done(
        endpoint,
        project,
        _client(endpoint, "Subnetworks").insert_unary(project=project, region=REGION, subnetwork_resource=subnet),
    )
    nic = compute_v1.NetworkInterface(subnetwork=f"projects/{project}/regions/{REGION}/subnetworks/{sub}")
    vms = []
    for i, zone in enumerate(ZONES):
        name = naming.instance(spec, "web", i)
        vm = compute_v1.Instance(
            name=name, machine_type=f"zones/{zone}/machineTypes/e2-small", network_interfaces=[nic], disks=[_boot()],
            tags=compute_v1.Tags(items=[naming.network_tag(spec)]),
        )  # fmt: skip
        _done(
            endpoint,
            project,
            _client(endpoint, "Instances").insert_unary(project=project, zone=zone, instance_resource=vm),
        )
        vms.append(VMRecord(Name=name, Pool="web", Index=i, ID=name, AZ=zone, State=VMState.ready))
    template = compute_v1.InstanceTemplate(
        name="shop-api-v1",
        properties=compute_v1.InstanceProperties(machine_type="e2-small", network_interfaces=[nic], disks=[_boot()]),
    )
    _done(
        endpoint,
        project,
        _client(endpoint, "InstanceTemplates").insert_unary(project=project, instance_template_resource=template),
    )
    mig = compute_v1.InstanceGroupManager(
        name=naming.mig(spec, "api"), base_instance_name="shop-api", target_size=1,
        instance_template=f"projects/{project}/global/instanceTemplates/shop-api-v1",
        named_ports=[compute_v1.NamedPort(name="http", port=80)],
    )  # fmt: skip
    _done(
        endpoint,
        project,
        _client(endpoint, "RegionInstanceGroupManagers").insert_unary(
            project=project, region=REGION, instance_group_manager_resource=mig
        ),
    )
    infra = InfraConfig(
        NetworkID=net, Zones=list(ZONES), Region=REGION, VMs=vms, ScalingGroupID={"api": naming.mig(spec, "api")}
    )
    ctx = Context(job_id=JOB, spec=spec, infra=infra, tagger=Tagger.for_spec(spec, JOB), log=LOG.append)
    return GcpClients(GcpTarget(project=project, region=REGION, endpoint_url=endpoint)), ctx


LOG: list[str] = []


def _attach(gcp: GcpClients, ctx: Context) -> Counter[str]:
    """The four LB steps as the pipeline runs them, with the pipeline's per-step call tally."""
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        for step in (lb.ensure_frontend, lb.ensure_backend, lb.ensure_listeners, lb.ensure_dns_record):
            step(gcp, ctx)
    finally:
        API_CALLS.reset(token)
    return tally


def _get(endpoint: str, project: str, client: str, **name: str) -> Any:
    return _client(endpoint, client).get(project=project, **name)


def _gone(endpoint: str, project: str, client: str, **name: str) -> bool:
    try:
        _get(endpoint, project, client, **name)
    except NotFound:
        return True
    return False


def _rrsets(endpoint: str, project: str, zone: str = "sandbox-vmplane-test") -> list[dict[str, Any]]:
    url = f"{endpoint}/dns/v1/projects/{project}/managedZones/{zone}/rrsets"
    with urllib.request.urlopen(url) as resp:
        return list(json.load(resp).get("rrsets", []))


def _activate(endpoint: str, project: str, name: str) -> None:
    req = urllib.request.Request(
        f"{endpoint}/_sandbox/certificates/activate",
        data=json.dumps({"project": project, "name": name}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(req).read()


def _tail(url: str) -> str:
    return url[url.find("projects/") :]


def _tags(resource: Any) -> dict[str, str]:
    return dict(json.loads(resource.description))


def test_attach_builds_the_whole_chain_and_reruns_insert_nothing(endpoint: str, project: str) -> None:
    spec = _spec()
    gcp, ctx = _provision(endpoint, project, spec)
    LOG.clear()
    _attach(gcp, ctx)
    p, ids = project, gcp_ids(ctx.infra)

    hc = _get(endpoint, p, "HealthChecks", health_check=naming.health_check(spec))
    assert (hc.type_, hc.http_health_check.port, hc.http_health_check.request_path) == ("HTTP", 80, "/healthz")
    assert (hc.check_interval_sec, hc.healthy_threshold, hc.unhealthy_threshold) == (15, 3, 3)
    rule = _get(endpoint, p, "Firewalls", firewall=naming.firewall(spec, "health"))
    assert set(rule.source_ranges) == HC_RANGES and len(rule.source_ranges) == 2
    assert list(rule.target_tags) == [naming.network_tag(spec)]
    assert [(a.I_p_protocol, list(a.ports)) for a in rule.allowed] == [("tcp", ["80"])]
    assert ids.FirewallRules["health"] == rule.name

    bs = _get(endpoint, p, "BackendServices", backend_service=naming.backend_service(spec))
    assert (bs.load_balancing_scheme, bs.protocol, bs.port_name) == ("EXTERNAL_MANAGED", "HTTP", "http")
    assert [_tail(h) for h in bs.health_checks] == [_tail(hc.self_link)]
    groups = sorted(_tail(b.group) for b in bs.backends)
    assert groups == sorted(
        [f"projects/{p}/regions/{REGION}/instanceGroups/{naming.mig(spec, 'api')}"]
        + [f"projects/{p}/zones/{z}/instanceGroups/{naming.instance_group(spec, z)}" for z in ZONES]
    )
    assert {(b.balancing_mode, b.capacity_scaler) for b in bs.backends} == {("UTILIZATION", 1.0)}
    for i, zone in enumerate(ZONES):
        ig = _get(endpoint, p, "InstanceGroups", zone=zone, instance_group=naming.instance_group(spec, zone))
        assert [(n.name, n.port) for n in ig.named_ports] == [("http", 80)]
        members = _client(endpoint, "InstanceGroups").list_instances(
            project=p, zone=zone, instance_group=ig.name,
            instance_groups_list_instances_request_resource=compute_v1.InstanceGroupsListInstancesRequest(),
        )  # fmt: skip
        assert [m.instance.rsplit("/", 1)[-1] for m in members] == [naming.instance(spec, "web", i)]

    um = _get(endpoint, p, "UrlMaps", url_map=naming.url_map(spec))
    assert _tail(um.default_service) == _tail(bs.self_link)
    cert = _get(endpoint, p, "SslCertificates", ssl_certificate=naming.certificate(spec, DOMAIN))
    assert (cert.type_, list(cert.managed.domains)) == ("MANAGED", [DOMAIN])
    proxy = _get(endpoint, p, "TargetHttpsProxies", target_https_proxy=naming.https_proxy(spec))
    assert _tail(proxy.url_map) == _tail(um.self_link)
    assert [_tail(c) for c in proxy.ssl_certificates] == [_tail(cert.self_link)]
    address = _get(endpoint, p, "GlobalAddresses", address=naming.address(spec))
    https = _get(endpoint, p, "GlobalForwardingRules", forwarding_rule=naming.https_rule(spec))
    http = _get(endpoint, p, "GlobalForwardingRules", forwarding_rule=naming.http_rule(spec))
    assert (https.I_p_address, https.port_range, https.load_balancing_scheme) == (
        address.address,
        "443-443",
        "EXTERNAL_MANAGED",
    )
    assert _tail(https.target) == _tail(proxy.self_link)
    assert (http.I_p_address, http.port_range) == (address.address, "80-80")
    http_proxy = _get(endpoint, p, "TargetHttpProxies", target_http_proxy=naming.http_proxy(spec))
    assert _tail(http.target) == _tail(http_proxy.self_link)
    redirect = _get(endpoint, p, "UrlMaps", url_map=_tail(http_proxy.url_map).rsplit("/", 1)[-1])
    r = redirect.default_url_redirect
    assert (r.https_redirect, r.redirect_response_code, r.strip_query) == (True, "MOVED_PERMANENTLY_DEFAULT", False)
    assert not redirect.default_service

    # Ownership: labels where the resource takes them, the tag set in every description.
    for labelled in (address, https, http):
        assert labelled.labels["zop_job_id"] == JOB
    for described in (hc, rule, bs, um, cert, proxy, http_proxy, redirect, address, https, http):
        assert _tags(described)["zop:jobId"] == JOB
    a_records = [x for x in _rrsets(endpoint, p) if x["type"] == "A"]
    assert a_records == [{"kind": "dns#resourceRecordSet", "name": DOMAIN + ".", "type": "A", "ttl": 300,
                          "rrdatas": [address.address]}]  # fmt: skip
    assert ctx.infra.LoadBalancerID == https.name and ctx.infra.LoadBalancerDNSName == address.address
    assert ids.CertificateStatus == "PROVISIONING"
    assert any(
        "sandbox: the managed certificate stays PROVISIONING" in line and address.address in line for line in LOG
    )

    again = _attach(gcp, ctx)
    writes = {m: n for m, n in again.items() if not m.endswith((".get", ".list", ".listInstances", ".wait"))}
    assert writes == {}, writes

    # The certificate turns ACTIVE once "DNS resolves": the next run records it.
    _activate(endpoint, p, cert.name)
    lb.ensure_dns_record(gcp, ctx)
    assert ids.CertificateStatus == "ACTIVE"


def test_no_zone_for_the_domain_fails_before_writing_the_record(endpoint: str, project: str) -> None:
    spec = _spec(domain="shop.example.org")
    gcp, ctx = _provision(endpoint, project, spec)
    for step in (lb.ensure_frontend, lb.ensure_backend, lb.ensure_listeners):
        step(gcp, ctx)
    with pytest.raises(InvalidRequestError, match=r"loadBalancer\.domain"):
        lb.ensure_dns_record(gcp, ctx)
    assert gcp_ids(ctx.infra).DnsRecords == []
    assert [x for x in _rrsets(endpoint, project) if x["type"] == "A"] == []


def test_partial_state_converges_and_detach_then_attach_again(endpoint: str, project: str) -> None:
    spec = _spec()
    gcp, ctx = _provision(endpoint, project, spec)
    _attach(gcp, ctx)
    p = project
    # A crash-like partial state: the HTTPS rule and its proxy deleted by hand.
    for client, key, name in (
        ("GlobalForwardingRules", "forwarding_rule", naming.https_rule(spec)),
        ("TargetHttpsProxies", "target_https_proxy", naming.https_proxy(spec)),
    ):
        _done(endpoint, p, _client(endpoint, client).delete_unary(project=p, **{key: name}))
    tally = _attach(gcp, ctx)
    assert tally["compute.targetHttpsProxies.insert"] == 1 and tally["compute.globalForwardingRules.insert"] == 1
    assert not _gone(endpoint, p, "TargetHttpsProxies", target_https_proxy=naming.https_proxy(spec))

    lb_teardown.detach(gcp, ctx, keep_vms=True)
    _assert_no_lb(endpoint, p, spec)
    ids = gcp_ids(ctx.infra)
    assert ctx.infra.LoadBalancerID is None and ctx.infra.LoadBalancerDNSName is None
    assert (ids.HealthCheck, ids.BackendService, ids.Certificate, ids.Address, ids.InstanceGroups) == (
        None, None, None, None, {},
    )  # fmt: skip
    assert "health" not in ids.FirewallRules and ids.DnsRecords == []
    # The VMs and the MIG stay.
    assert not _gone(endpoint, p, "Instances", zone=ZONES[0], instance=naming.instance(spec, "web", 0))
    assert not _gone(
        endpoint, p, "RegionInstanceGroupManagers", region=REGION, instance_group_manager=naming.mig(spec, "api")
    )

    _attach(gcp, ctx)  # deterministic names are reusable once deleted
    assert ctx.infra.LoadBalancerID == naming.https_rule(spec)
    lb_teardown.detach(gcp, ctx, keep_vms=False)
    lb_teardown.detach(gcp, ctx, keep_vms=False)  # a re-run after a finished detach does nothing
    _assert_no_lb(endpoint, p, spec)


def _assert_no_lb(endpoint: str, p: str, spec: EnvSpec) -> None:
    for client, key, name in (
        ("GlobalForwardingRules", "forwarding_rule", naming.https_rule(spec)),
        ("GlobalForwardingRules", "forwarding_rule", naming.http_rule(spec)),
        ("TargetHttpsProxies", "target_https_proxy", naming.https_proxy(spec)),
        ("TargetHttpProxies", "target_http_proxy", naming.http_proxy(spec)),
        ("UrlMaps", "url_map", naming.url_map(spec)),
        ("UrlMaps", "url_map", naming.redirect_url_map(spec)),
        ("BackendServices", "backend_service", naming.backend_service(spec)),
        ("HealthChecks", "health_check", naming.health_check(spec)),
        ("Firewalls", "firewall", naming.firewall(spec, "health")),
        ("GlobalAddresses", "address", naming.address(spec)),
    ):
        assert _gone(endpoint, p, client, **{key: name}), name
    certs = list(_client(endpoint, "SslCertificates").list(project=p))
    assert certs == []
    for zone in ZONES:
        assert _gone(endpoint, p, "InstanceGroups", zone=zone, instance_group=naming.instance_group(spec, zone))
    assert [x for x in _rrsets(endpoint, p) if x["type"] == "A"] == []


def _members(endpoint: str, p: str, zone: str, group: str) -> list[str]:
    found = _client(endpoint, "InstanceGroups").list_instances(
        project=p, zone=zone, instance_group=group,
        instance_groups_list_instances_request_resource=compute_v1.InstanceGroupsListInstancesRequest(),
    )  # fmt: skip
    return sorted(m.instance.rsplit("/", 1)[-1] for m in found)


def test_scale_of_a_fixed_pool_reconciles_the_groups_and_the_backends(endpoint: str, project: str) -> None:
    """stepCreateTargetGroup also runs after `vmplane scale`: new Fixed VMs join, removed ones leave."""
    spec = _spec()
    gcp, ctx = _provision(endpoint, project, spec)
    _attach(gcp, ctx)
    p, zone_a, zone_b = project, ZONES[0], ZONES[1]
    extra = naming.instance(spec, "web", 2)
    nic = compute_v1.NetworkInterface(subnetwork=f"projects/{p}/regions/{REGION}/subnetworks/{naming.subnetwork(spec)}")
    vm = compute_v1.Instance(
        name=extra,
        machine_type=f"zones/{zone_a}/machineTypes/e2-small",
        network_interfaces=[nic],
        disks=[_boot()],
    )
    _done(endpoint, p, _client(endpoint, "Instances").insert_unary(project=p, zone=zone_a, instance_resource=vm))
    ctx.infra.VMs.append(VMRecord(Name=extra, Pool="web", Index=2, ID=extra, AZ=zone_a, State=VMState.ready))

    tally = _tally(lambda: lb.ensure_backend(gcp, ctx))
    assert tally["compute.instanceGroups.addInstances"] == 1
    assert not any(m.endswith(".insert") for m in tally), tally
    group_a, group_b = naming.instance_group(spec, zone_a), naming.instance_group(spec, zone_b)
    assert _members(endpoint, p, zone_a, group_a) == sorted([naming.instance(spec, "web", 0), extra])

    # Scale down to zone a only: the VM in zone b leaves, its group leaves the backend service and goes.
    ctx.infra.VMs = [v for v in ctx.infra.VMs if v.Name != naming.instance(spec, "web", 1)]
    lb.ensure_backend(gcp, ctx)
    bs = _get(endpoint, p, "BackendServices", backend_service=naming.backend_service(spec))
    assert sorted(b.group.rsplit("/", 1)[-1] for b in bs.backends) == sorted([group_a, naming.mig(spec, "api")])
    assert _gone(endpoint, p, "InstanceGroups", zone=zone_b, instance_group=group_b)
    assert gcp_ids(ctx.infra).InstanceGroups == {zone_a: group_a}
    lb_teardown.detach(gcp, ctx, keep_vms=False)
    _assert_no_lb(endpoint, p, spec)


def _tally(fn: Any) -> Counter[str]:
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        fn()
    finally:
        API_CALLS.reset(token)
    return tally


def test_a_domain_change_makes_a_new_certificate_switches_the_proxy_then_deletes_the_old(
    endpoint: str, project: str
) -> None:
    spec = _spec()
    gcp, ctx = _provision(endpoint, project, spec)
    _attach(gcp, ctx)
    old = naming.certificate(spec, DOMAIN)
    moved = _spec(domain="shop2.sandbox.vmplane.test")
    ctx.spec = moved
    lb.ensure_listeners(gcp, ctx)
    lb.ensure_dns_record(gcp, ctx)
    new = naming.certificate(moved, "shop2.sandbox.vmplane.test")
    proxy = _get(endpoint, project, "TargetHttpsProxies", target_https_proxy=naming.https_proxy(spec))
    assert [c.rsplit("/", 1)[-1] for c in proxy.ssl_certificates] == [new]
    assert _gone(endpoint, project, "SslCertificates", ssl_certificate=old)
    assert [x["name"] for x in _rrsets(endpoint, project) if x["type"] == "A"] == ["shop2.sandbox.vmplane.test."]


def test_a_rotation_joins_and_leaves_a_group_once_even_after_a_crash(endpoint: str, project: str) -> None:
    """Rotation puts a replacement in its zone's group and takes the old VM out, each checked against
    the group first: a crash between the two and the re-run never adds or removes a member twice."""
    from vmplane.clouds.gcp import rotation

    spec = _spec()
    gcp, ctx = _provision(endpoint, project, spec)
    _attach(gcp, ctx)
    zone, vm = ZONES[0], naming.instance(spec, "web", 0)
    group = naming.instance_group(spec, zone)
    body = compute_v1.InstanceGroupsRemoveInstancesRequest(
        instances=[compute_v1.InstanceReference(instance=f"projects/{project}/zones/{zone}/instances/{vm}")]
    )
    op = _client(endpoint, "InstanceGroups").remove_instances_unary(
        project=project, zone=zone, instance_group=group, instance_groups_remove_instances_request_resource=body
    )
    _done(endpoint, project, op)
    assert _members(endpoint, project, zone, group) == []

    first = _tally(lambda: rotation._join_group(gcp, ctx, zone, vm))
    assert first["compute.instanceGroups.addInstances"] == 1
    again = _tally(lambda: rotation._join_group(gcp, ctx, zone, vm))
    assert again["compute.instanceGroups.addInstances"] == 0
    assert _members(endpoint, project, zone, group) == [vm]
    out = _tally(lambda: rotation._leave_group(gcp, ctx, zone, vm))
    assert out["compute.instanceGroups.removeInstances"] == 1
    out_again = _tally(lambda: rotation._leave_group(gcp, ctx, zone, vm))
    assert out_again["compute.instanceGroups.removeInstances"] == 0
    assert _members(endpoint, project, zone, group) == []
    lb_teardown.detach(gcp, ctx, keep_vms=False)


def _mig(endpoint: str, project: str, spec: EnvSpec) -> Any:
    return _get(
        endpoint, project, "RegionInstanceGroupManagers", region=REGION, instance_group_manager=naming.mig(spec, "api")
    )


def test_the_mig_behind_the_lb_heals_on_its_health_check_and_detach_and_attach_follow(
    endpoint: str, project: str
) -> None:
    """The MIG recreates VMs that fail the LB's health check, after the bootstrap timeout; detach takes
    the policy off before the health check goes (the sandbox, as Google, refuses to delete a health check
    a MIG heals on), and attach puts it back."""
    spec = _spec()
    gcp, ctx = _provision(endpoint, project, spec)
    assert list(_mig(endpoint, project, spec).auto_healing_policies) == []
    _attach(gcp, ctx)
    [policy] = _mig(endpoint, project, spec).auto_healing_policies
    assert _tail(policy.health_check) == f"projects/{project}/global/healthChecks/{naming.health_check(spec)}"
    assert policy.initial_delay_sec == spec.bootstrap.timeout_seconds == 900  # the default bootstrap timeout
    assert _attach(gcp, ctx)["compute.regionInstanceGroupManagers.patch"] == 0  # a re-run sends nothing

    # A bootstrap timeout over Google's hour: the delay is the hour.
    ctx.spec = spec.model_copy(update={"bootstrap": spec.bootstrap.model_copy(update={"timeout_seconds": 7200})})
    assert _tally(lambda: lb.ensure_backend(gcp, ctx))["compute.regionInstanceGroupManagers.patch"] == 1
    assert [p.initial_delay_sec for p in _mig(endpoint, project, spec).auto_healing_policies] == [3600]
    ctx.spec = spec

    lb_teardown.detach(gcp, ctx, keep_vms=False)
    assert not any(p.health_check for p in _mig(endpoint, project, spec).auto_healing_policies)
    assert _gone(endpoint, project, "HealthChecks", health_check=naming.health_check(spec))
    _attach(gcp, ctx)
    assert [
        (p.health_check.rsplit("/", 1)[1], p.initial_delay_sec)
        for p in _mig(endpoint, project, spec).auto_healing_policies
    ] == [(naming.health_check(spec), 900)]
    lb_teardown.detach(gcp, ctx, keep_vms=False)
    _assert_no_lb(endpoint, project, spec)


def test_the_sandbox_checks_autohealing_policies_as_google_does(endpoint: str, project: str) -> None:
    from google.api_core.exceptions import BadRequest

    spec = _spec()
    _provision(endpoint, project, spec)
    hcs = _client(endpoint, "HealthChecks")
    hc = compute_v1.HealthCheck(
        name="heal-hc", type_="HTTP", http_health_check=compute_v1.HTTPHealthCheck(port=80, request_path="/")
    )
    _done(endpoint, project, hcs.insert_unary(project=project, health_check_resource=hc))
    migs = _client(endpoint, "RegionInstanceGroupManagers")
    here = f"projects/{project}/global/healthChecks/heal-hc"

    def patch(*policies: compute_v1.InstanceGroupManagerAutoHealingPolicy) -> None:
        name = naming.mig(spec, "api")
        current = migs.get(project=project, region=REGION, instance_group_manager=name).fingerprint
        body = compute_v1.InstanceGroupManager(auto_healing_policies=list(policies), fingerprint=current)
        op = migs.patch_unary(
            project=project, region=REGION, instance_group_manager=naming.mig(spec, "api"),
            instance_group_manager_resource=body,
        )  # fmt: skip
        _done(endpoint, project, op)

    refused = {
        "initialDelaySec": [
            compute_v1.InstanceGroupManagerAutoHealingPolicy(health_check=here, initial_delay_sec=3601)
        ],
        "only one": [compute_v1.InstanceGroupManagerAutoHealingPolicy(health_check=here, initial_delay_sec=60)] * 2,
        "cannot be found": [
            compute_v1.InstanceGroupManagerAutoHealingPolicy(
                health_check=f"projects/{project}/global/healthChecks/none", initial_delay_sec=60
            )
        ],
    }
    for why, policies in refused.items():
        with pytest.raises(BadRequest, match=why):
            patch(*policies)
    assert list(_mig(endpoint, project, spec).auto_healing_policies) == []

    patch(compute_v1.InstanceGroupManagerAutoHealingPolicy(health_check=here, initial_delay_sec=3600))
    [kept] = _mig(endpoint, project, spec).auto_healing_policies
    assert (_tail(kept.health_check), kept.initial_delay_sec) == (here, 3600)
    # in use: Google accepts the delete and fails its operation (the old sandbox answered a synchronous 400)
    failed = hcs.delete_unary(project=project, health_check="heal-hc")
    done = _client(endpoint, "GlobalOperations").wait(project=project, operation=failed.name)
    assert done.error.errors[0].code == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
    assert "being used" in done.error.errors[0].message
    patch(compute_v1.InstanceGroupManagerAutoHealingPolicy())  # one empty policy turns it off
    assert list(_mig(endpoint, project, spec).auto_healing_policies) == []
    _done(endpoint, project, hcs.delete_unary(project=project, health_check="heal-hc"))
