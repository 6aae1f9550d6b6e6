"""The GCP network, firewall and identity steps against the GCP sandbox, called directly with a Context
built as pipeline/runner.py builds one. The shape is read back with google-cloud-compute and the raw
Resource Manager / IAM APIs (not vmplane's code): custom-mode network, private subnetwork with Private
Google Access, router + NAT, no rule from 0.0.0.0/0, 22 only from IAP or not at all, exactly two roles.
A second ensure makes no insert; teardown leaves nothing (vmplane's leftover scan and a raw list agree)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from functools import partial
from typing import Any

import pytest
from tests.helpers import Sandbox

from vmplane.clouds.base import API_CALLS, Context, Tagger
from vmplane.clouds.interfaces.composition import create_identity, delete_identity
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig

ROLES = ["roles/logging.logWriter", "roles/monitoring.metricWriter"]
IAP = "35.235.240.0/20"


def _spec(project: str, name: str, interactive: bool, ports: list[int]) -> EnvSpec:
    return EnvSpec.model_validate(
        {
            "name": name,
            "org": "acme",
            "provider": {"cloud": "gcp", "project": project, "region": "us-central1"},
            "network": {"cidr": "10.50.0.0/16", "zones": 2, "ingressPorts": ports},
            "pools": {"web": {"mode": "fixed", "size": 1}},
            "exec": {"interactive": interactive},
            "tags": {"team": "platform"},
        }
    )


def _ctx(spec: EnvSpec, infra: InfraConfig, job_id: str) -> Context:
    return Context(job_id=job_id, spec=spec, infra=infra, tagger=Tagger.for_spec(spec, job_id))


def _driver(sb: Sandbox, project: str) -> Any:
    from vmplane.clouds.gcp.driver import GcpDriver
    from vmplane.clouds.gcp.session import GcpTarget

    return GcpDriver(GcpTarget(project=project, region="us-central1", endpoint_url=sb.gcp_endpoint))


def _counted(fn: Any, ctx: Context) -> Counter[str]:
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        fn(ctx)
    finally:
        API_CALLS.reset(token)
    return tally


def _raw(sb: Sandbox, project: str) -> dict[str, list[Any]]:
    from google.cloud import compute_v1

    region = "us-central1"
    return {
        "networks": list(sb.gcp_compute(compute_v1.NetworksClient).list(project=project)),
        "subnetworks": list(sb.gcp_compute(compute_v1.SubnetworksClient).list(project=project, region=region)),
        "routers": list(sb.gcp_compute(compute_v1.RoutersClient).list(project=project, region=region)),
        "firewalls": list(sb.gcp_compute(compute_v1.FirewallsClient).list(project=project)),
    }


def _member_roles(sb: Sandbox, project: str, email: str) -> list[str]:
    crm = sb.gcp_discovery("cloudresourcemanager")
    policy = crm.projects().getIamPolicy(resource=project, body={}).execute()
    return sorted(b["role"] for b in policy.get("bindings", []) if any(email in m for m in b.get("members", [])))


@pytest.mark.sandbox
def test_network_firewall_identity_shape_rerun_and_teardown(sandbox: Sandbox) -> None:
    project = f"vmp-net-{uuid.uuid4().hex[:8]}"
    job_id = str(uuid.uuid4())
    spec = _spec(project, "itest-gnet", interactive=True, ports=[80, 8080])
    infra = InfraConfig()
    ctx = _ctx(spec, infra, job_id)
    driver = _driver(sandbox, project)

    # Someone else's binding on the project must survive our edits.
    crm = sandbox.gcp_discovery("cloudresourcemanager")
    policy = crm.projects().getIamPolicy(resource=project, body={}).execute()
    other = {"role": "roles/viewer", "members": ["user:someone@example.com"]}
    policy["bindings"] = [*policy.get("bindings", []), other]
    crm.projects().setIamPolicy(resource=project, body={"policy": policy}).execute()

    driver.preflight(ctx)
    first = _counted(driver.network.ensure, ctx)
    first += _counted(partial(create_identity, driver), ctx)
    assert first["compute.networks.insert"] == 1 and first["compute.routers.insert"] == 1

    raw = _raw(sandbox, project)
    (net,) = raw["networks"]
    assert net.name == infra.NetworkID and net.auto_create_subnetworks is False
    assert net.routing_config.routing_mode == "REGIONAL"
    (sub,) = raw["subnetworks"]
    assert sub.ip_cidr_range == "10.50.0.0/20" and sub.private_ip_google_access is True
    assert infra.VMSubnetIDs == [sub.name] and len(infra.Zones) == 2 and infra.NetworkCreated
    (router,) = raw["routers"]
    (nat,) = router.nats
    assert nat.nat_ip_allocate_option == "AUTO_ONLY"
    assert nat.source_subnetwork_ip_ranges_to_nat == "ALL_SUBNETWORKS_ALL_IP_RANGES"
    rules = {r.name: r for r in raw["firewalls"]}
    assert all("0.0.0.0/0" not in r.source_ranges for r in rules.values())
    assert all(r.target_tags == [f"{spec.name}-vm"] for r in rules.values())
    vpc = rules[str(infra.VMSecurityGroupID)]
    assert list(vpc.source_ranges) == ["10.50.0.0/16"]
    assert sorted(p for a in vpc.allowed for p in a.ports) == ["80", "8080"]
    with22 = [r for r in rules.values() if any("22" in a.ports for a in r.allowed)]
    assert [list(r.source_ranges) for r in with22] == [[IAP]]

    # The plan names exactly what the step made.
    planned = {
        (r.type, r.name) for r in driver.provision_resources(spec, InfraConfig()) if r.step == "stepCreateNetwork"
    }
    made = {("google_compute_network", net.name), ("google_compute_subnetwork", sub.name)}
    made |= {("google_compute_router", router.name), ("google_compute_router_nat", nat.name)}
    made |= {("google_compute_firewall", name) for name in rules}
    assert planned == made

    email = infra.Cloud.model_dump()["ServiceAccountEmail"]
    sa = sandbox.gcp_discovery("iam").projects().serviceAccounts()
    assert sa.get(name=f"projects/{project}/serviceAccounts/{email}").execute()["email"] == email
    assert _member_roles(sandbox, project, email) == ROLES

    # Re-run: a no-op (nothing inserted or patched).
    again = _counted(driver.network.ensure, ctx) + _counted(partial(create_identity, driver), ctx)
    assert not [m for m, n in again.items() if n and m.rsplit(".", 1)[-1] in ("insert", "patch", "create")], again

    # Drift: the NAT removed by hand comes back; exec.interactive false removes port 22; ports change in place.
    from google.cloud import compute_v1

    routers = sandbox.gcp_compute(compute_v1.RoutersClient)
    bare = compute_v1.Router(name=router.name, network=router.network, description=router.description)
    routers.update_unary(project=project, region="us-central1", router=router.name, router_resource=bare)
    assert not list(routers.get(project=project, region="us-central1", router=router.name).nats)
    ctx.spec = _spec(project, "itest-gnet", interactive=False, ports=[80])
    driver.network.ensure(ctx)
    raw = _raw(sandbox, project)
    assert [n.name for n in raw["routers"][0].nats] == [nat.name]
    rules = {r.name: r for r in raw["firewalls"]}
    assert not [r for r in rules.values() if any("22" in a.ports for a in r.allowed)]
    assert [p for a in rules[str(infra.VMSecurityGroupID)].allowed for p in a.ports] == ["80"]

    # Teardown in the pipeline's order; nothing of the job remains, and a raw listing agrees.
    for step in (driver.network.delete_firewall, partial(delete_identity, driver), driver.network.delete):
        step(ctx)
    assert driver.inventory.leftovers(ctx) == []
    assert {k: v for k, v in _raw(sandbox, project).items() if v} == {}
    assert _member_roles(sandbox, project, email) == []
    policy = crm.projects().getIamPolicy(resource=project, body={}).execute()
    assert other in policy["bindings"]
    # Deleting twice is done, not an error (NotFound).
    driver.network.delete_firewall(ctx)
    driver.network.delete(ctx)


class _Crash(Exception):
    pass


@pytest.mark.sandbox
@pytest.mark.parametrize("method", ["compute.networks.insert", "compute.routers.insert", "compute.firewalls.insert"])
def test_a_crash_right_after_a_create_converges_on_rerun(sandbox: Sandbox, method: str) -> None:
    """The process dies just after the insert returned (before anything else is recorded): the re-run
    finds the resource by name instead of creating a second one, and teardown still removes it."""
    project = f"vmp-crash-{uuid.uuid4().hex[:8]}"
    job_id = str(uuid.uuid4())
    spec = _spec(project, "itest-gcrash", interactive=True, ports=[80])
    infra = InfraConfig()
    saved: list[dict[str, Any]] = []
    ctx = Context(
        job_id=job_id,
        spec=spec,
        infra=infra,
        tagger=Tagger.for_spec(spec, job_id),
        save=lambda: saved.append(infra.model_dump(mode="json")),
    )
    driver = _driver(sandbox, project)
    real_call = driver.gcp.call

    def dying(name: str, fn: Any) -> Any:
        out = real_call(name, fn)
        if name == method:
            raise _Crash(name)
        return out

    driver.gcp.call = dying
    with pytest.raises(_Crash):
        driver.network.ensure(ctx)
    driver.gcp.call = real_call
    # Resume from what was last saved, as a restarted worker would.
    infra = InfraConfig.model_validate(saved[-1])
    ctx.infra = infra
    rerun = _counted(driver.network.ensure, ctx)
    # Only what the crash kept from being made is inserted: not the resource whose insert returned.
    # (The firewall crash hits the first of the two rules; the second is still to make.)
    assert rerun[method] == (1 if method == "compute.firewalls.insert" else 0), rerun
    raw = _raw(sandbox, project)
    assert len(raw["networks"]) == 1 and len(raw["routers"]) == 1 and len(raw["subnetworks"]) == 1
    assert len(raw["firewalls"]) == 2

    # A tag change reaches the mutable descriptions (firewalls, router) in place.
    ctx.spec = _spec(project, "itest-gcrash", interactive=True, ports=[80]).model_copy(update={"tags": {"team": "x"}})
    ctx.tagger = Tagger.for_spec(ctx.spec, job_id)
    driver.inventory.retag(ctx)
    raw = _raw(sandbox, project)
    for r in [*raw["firewalls"], *raw["routers"]]:
        assert json.loads(r.description)["team"] == "x", r.name

    for step in (driver.network.delete_firewall, partial(delete_identity, driver), driver.network.delete):
        step(ctx)
    assert {k: v for k, v in _raw(sandbox, project).items() if v} == {}
    assert driver.inventory.leftovers(ctx) == []
