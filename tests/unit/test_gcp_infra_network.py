"""Pure parts of the GCP network, firewall, leftover and retag modules: the subnetwork range, the rules a
spec asks for (never 0.0.0.0/0, 22 only from IAP and only when interactive), the NAT settings check,
what counts as this job's, and naming limits."""

from __future__ import annotations

import ipaddress
import json
import re
from types import SimpleNamespace
from typing import Any

import pytest
from google.cloud import compute_v1
from tests.unit.support import make_ctx

from vmplane.clouds.gcp import firewall, naming, network, ownership
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.inventory import is_ours
from vmplane.clouds.gcp.retag import _role
from vmplane.clouds.tags import gcp_labels
from vmplane.envspec.models import EnvSpec

NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def _spec(**over: Any) -> EnvSpec:
    data: dict[str, Any] = {
        "name": "demo-gcp",
        "org": "acme",
        "provider": {"cloud": "gcp", "project": "vmplane-sandbox", "region": "us-central1"},
        "network": {"cidr": "10.50.0.0/16", "ingressPorts": [80, 443]},
        "pools": {"web": {"mode": "fixed", "size": 2}},
    }
    data.update(over)
    return EnvSpec.model_validate(data)


@pytest.mark.parametrize(
    ("cidr", "want"),
    [("10.50.0.0/16", "10.50.0.0/20"), ("10.8.0.0/20", "10.8.0.0/20"), ("192.168.7.0/24", "192.168.7.0/24")],
)
def test_subnetwork_takes_the_first_slash20_or_the_whole_smaller_range(cidr: str, want: str) -> None:
    got = network.subnet_cidr(cidr)
    assert got == want
    assert ipaddress.ip_network(got).subnet_of(ipaddress.ip_network(cidr))  # type: ignore[arg-type]


def _rules(spec: EnvSpec, created: bool = True, ranges: list[str] | None = None) -> dict[str, Any]:
    ctx = make_ctx(spec)
    ctx.infra.NetworkID, ctx.infra.NetworkCreated = "demo-gcp-net", created
    ids = gcp_ids(ctx.infra)
    ids.NetworkCidr = spec.network.cidr
    ids.VpcSourceRanges = ranges if ranges is not None else [spec.network.cidr]
    return firewall.desired_rules(ctx)


def test_rules_open_ingress_ports_from_the_vpc_and_22_from_iap_only() -> None:
    rules = _rules(_spec())
    assert rules == {"vpc": ([80, 443], ["10.50.0.0/16"]), "iap": ([22], [firewall.IAP_RANGE])}


def test_interactive_false_leaves_no_port_22_and_no_rule_is_from_the_world() -> None:
    for spec in (_spec(exec={"interactive": False}), _spec(), _spec(network={"ingressPorts": []})):
        rules = _rules(spec)
        assert all("0.0.0.0/0" not in src for _, src in rules.values())
        assert ("iap" in rules) is spec.exec_interactive
        assert all(22 not in ports for purpose, (ports, _) in rules.items() if purpose != "iap")
    assert "vpc" not in _rules(_spec(network={"ingressPorts": []}))


def test_an_existing_network_admits_its_subnetworks_ranges() -> None:
    spec = _spec(network={"existingNetwork": "shared", "existingSubnets": ["a", "b"], "ingressPorts": [80]})
    rules = _rules(spec, created=False, ranges=["10.9.0.0/24", "10.1.0.0/24"])
    assert rules["vpc"] == ([80], ["10.1.0.0/24", "10.9.0.0/24"])


def test_rule_body_targets_the_vm_tag_and_compares_equal_to_itself() -> None:
    spec = _spec()
    ctx = make_ctx(spec)
    ctx.infra.NetworkID = "demo-gcp-net"
    body = firewall.rule_body(ctx, "p", "vpc", [80], ["10.50.0.0/16"])
    assert body.target_tags == [naming.network_tag(spec)] and body.direction == "INGRESS"
    assert body.network == "projects/p/global/networks/demo-gcp-net"
    assert firewall._same(body, body)
    wider = firewall.rule_body(ctx, "p", "vpc", [80, 8080], ["10.50.0.0/16"])
    assert not firewall._same(body, wider)


def test_nat_settings_check() -> None:
    nat = network.desired_nat("demo-gcp-nat")
    assert network.nat_ok(nat)
    assert nat.log_config.filter == "ERRORS_ONLY"
    manual = compute_v1.RouterNat(name="demo-gcp-nat", nat_ip_allocate_option="MANUAL_ONLY")
    assert not network.nat_ok(manual)


def test_ownership_by_description_or_labels_not_by_name() -> None:
    ctx = make_ctx(_spec())
    t = ctx.tagger
    mine = SimpleNamespace(name="demo-gcp-net", description=ownership.description(t, "network"), labels={})
    labelled = SimpleNamespace(name="demo-gcp-web-0", description="", labels=ownership.labels(t, "vm"))
    other = make_ctx(_spec(), job_id="another-job").tagger
    theirs = SimpleNamespace(name="demo-gcp-net", description=ownership.description(other, "network"), labels={})
    hand = SimpleNamespace(name="demo-gcp-net", description="made by hand", labels={"team": "x"})
    assert is_ours(mine, t) and is_ours(labelled, t)
    assert not is_ours(theirs, t) and not is_ours(hand, t)
    assert json.loads(mine.description)[t.job_key] == t.job_id


def test_retag_keeps_the_recorded_role() -> None:
    ctx = make_ctx(_spec())
    t = ctx.tagger
    described = SimpleNamespace(description=ownership.description(t, "firewall-vpc"), labels={})
    labelled = SimpleNamespace(description="", labels=gcp_labels(t.tags("vm")))
    assert _role(described, ctx, "x") == "firewall-vpc"
    assert _role(labelled, ctx, "x") == "vm"
    assert _role(SimpleNamespace(description="", labels={}), ctx, "x") == "x"


def test_names_fit_google_rules_even_for_the_longest_env_name() -> None:
    spec = _spec(name="a" * 31 + "z", pools={"p" * 30: {"mode": "fixed", "size": 1}})
    names = [
        naming.network(spec),
        naming.subnetwork(spec),
        naming.router(spec),
        naming.nat(spec),
        naming.network_tag(spec),
        *(naming.firewall(spec, p) for p in ("vpc", "iap", "health")),
        naming.template(spec, "p" * 30, 12),
        naming.instance(spec, "p" * 30, 99),
        naming.mig(spec, "p" * 30),
    ]
    assert all(NAME_RE.fullmatch(n) for n in names), names
    assert all(n.startswith(naming.prefix(spec)) for n in names)
    assert len(set(names)) == len(names)
