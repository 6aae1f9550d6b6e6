"""The GCP plans are pure (no cloud calls), name resources as the steps name them (naming.py), put each
under a step the pipeline runs, and mirror the AWS plan's split: apply lists the network, identity,
templates, VMs and the LB chain; destroy lists the LB first and the network last, only if vmplane made it."""

from __future__ import annotations

import re
from pathlib import Path

from vmplane.clouds.base import Action
from vmplane.clouds.gcp import naming, plan
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.envspec.load import load_spec
from vmplane.pipeline.runner import STEPS
from vmplane.state import InfraConfig, VMRecord

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
UNNAMED = {"google_project_iam_member", "google_dns_record_set"}  # not compute names


def test_fixed_example_plan_names_steps_and_no_port_22() -> None:
    spec = load_spec(EXAMPLES / "gcp-fixed.jsonc")
    out = plan.provision_resources(spec, InfraConfig(Zones=["us-central1-a", "us-central1-b"]), "vmplane-sandbox")
    assert all(r.action is Action.create and r.step in STEPS for r in out)
    assert all(NAME_RE.fullmatch(r.name) for r in out if r.type not in UNNAMED), [r.name for r in out]
    by_type = {(r.type, r.name) for r in out}
    assert ("google_compute_network", naming.network(spec)) in by_type
    assert ("google_compute_subnetwork", naming.subnetwork(spec)) in by_type
    assert ("google_compute_router", naming.router(spec)) in by_type
    assert ("google_compute_firewall", naming.firewall(spec, "vpc")) in by_type
    assert ("google_compute_firewall", naming.firewall(spec, "iap")) not in by_type  # interactive: false
    assert ("google_service_account", naming.service_account_id(spec)) in by_type
    assert ("google_compute_region_instance_template", naming.template(spec, "web", 1)) in by_type
    vms = [r for r in out if r.type == "google_compute_instance"]
    assert [r.name for r in vms] == [naming.instance(spec, "web", i) for i in range(2)]
    assert [r.detail for r in vms] == ["us-central1-a", "us-central1-b"]  # spread over the zones
    roles = sorted(r.name.split("/", 1)[1] for r in out if r.type == "google_project_iam_member")
    assert roles == ["roles/logging.logWriter", "roles/monitoring.metricWriter"]


def test_a_changed_template_is_the_next_version() -> None:
    spec = load_spec(EXAMPLES / "gcp-fixed.jsonc")
    infra = InfraConfig(LaunchTemplateVersion={"web": 3})
    names = [r.name for r in plan.provision_resources(spec, infra, "p") if "template" in r.type]
    assert names == [naming.template(spec, "web", 4)]


def test_web_example_lists_the_lb_chain_and_the_mig() -> None:
    spec = load_spec(EXAMPLES / "gcp-web.jsonc")
    out = plan.provision_resources(spec, InfraConfig(), "vmplane-sandbox")
    lb = plan.lb_resources(spec)
    assert [r for r in out if r.step.startswith(("stepCreateLoadBalancer", "stepCreateTarget", "stepCreateList"))] == [
        r for r in lb if r.step != "stepCreateDNSRecord"
    ]
    types = {r.type for r in lb}
    for t in (
        "google_compute_health_check",
        "google_compute_backend_service",
        "google_compute_url_map",
        "google_compute_managed_ssl_certificate",
        "google_compute_target_https_proxy",
        "google_compute_target_http_proxy",
        "google_compute_global_address",
        "google_compute_global_forwarding_rule",
        "google_dns_record_set",
    ):
        assert t in types
    assert ("google_compute_firewall", naming.firewall(spec, "iap")) in {(r.type, r.name) for r in out}
    assert {r.type for r in out if r.step == "stepCreateVMs"} == {
        "google_compute_region_instance_group_manager",
        "google_compute_region_autoscaler",
    }


def _recorded(created: bool) -> InfraConfig:
    infra = InfraConfig(
        NetworkID="demo-net",
        NetworkCreated=created,
        VMSubnetIDs=["demo-vms"],
        VMSecurityGroupID="demo-allow-vpc",
        LaunchTemplateID={"web": "demo-web-v2"},
        VMs=[VMRecord(Name="demo-web-0", Pool="web", Index=0, ID="demo-web-0", AZ="us-central1-a")],
    )
    ids = gcp_ids(infra)
    ids.Project, ids.RouterName, ids.NatName = "p", "demo-router", "demo-nat"
    ids.FirewallRules = {"vpc": "demo-allow-vpc", "health": "demo-allow-health"}
    ids.Templates = {"web": ["demo-web-v1", "demo-web-v2"]}
    ids.ServiceAccountEmail = "vmp-demo-abc123@p.iam.gserviceaccount.com"
    ids.ServiceAccountRoles = ["roles/logging.logWriter"]
    ids.HealthCheck, ids.Address = "demo-hc", "demo-ip"
    return infra


def test_teardown_lists_lb_first_network_last_and_every_template() -> None:
    out = plan.teardown_resources(_recorded(created=True))
    assert all(r.action is Action.destroy and r.step in STEPS for r in out)
    steps = [r.step for r in out]
    order = ["stepDetachLoadBalancer", "stepTerminateVMs", "stepDeleteLaunchTemplate", "stepDeleteSecurityGroup"]
    order += ["stepDeleteIAM", "stepDeleteNetwork"]
    assert sorted(set(steps), key=steps.index) == order
    assert [r.name for r in out if r.type == "google_compute_region_instance_template"] == [
        "demo-web-v1",
        "demo-web-v2",
    ]
    assert [r.name for r in out if r.step == "stepDeleteNetwork"] == ["demo-router", "demo-vms", "demo-net"]
    assert plan.lb_teardown_resources(_recorded(True)) == [r for r in out if r.step == "stepDetachLoadBalancer"]


def test_teardown_never_lists_an_existing_network() -> None:
    out = plan.teardown_resources(_recorded(created=False))
    assert not [r for r in out if r.step == "stepDeleteNetwork"]
