"""Per-cloud provider shapes, defaults and checks, as a spec file's author sees them (positioned issues)."""

import json

import pytest

from vmplane.clouds.aws.spec import AwsProvider
from vmplane.clouds.gcp.spec import GcpLoadBalancer, GcpProvider
from vmplane.clouds.proxmox.spec import ProxmoxProvider, pool_options
from vmplane.envspec.load import SpecError, SpecIssue, parse_spec_text
from vmplane.envspec.models import CertSource, Cloud, EnvSpec, ExecMode, FixedPool, spec_json
from vmplane.envspec.starter import render_starter
from vmplane.target import Target

GCP = '{ "cloud": "gcp", "project": "shop-prod-1", "region": "us-central1" }'
PVE = '{ "cloud": "proxmox", "endpoint": "https://pve.example:8006", "node": "pve1" }'
AWS = '{ "cloud": "aws", "region": "us-east-1" }'
PVE_POOL = '"web": { "mode": "fixed", "size": 2, "proxmox": { "template": 9000 } }'
FIXED = '"web": { "mode": "fixed", "size": 2 }'


def text(provider: str, pools: str = '"web": { "mode": "fixed", "size": 2 }', extra: str = "") -> str:
    """A spec whose provider is on line 4, pools on line 5 and `extra` members on line 6."""
    return f"""{{
  "name": "demo",
  "org": "acme",
  "provider": {provider},
  "pools": {{ {pools} }},
  {extra}
}}
"""


def load(provider: str, pools: str = '"web": { "mode": "fixed", "size": 2 }', extra: str = "") -> EnvSpec:
    return parse_spec_text(text(provider, pools, extra), "env.jsonc")


def issues(provider: str, pools: str = '"web": { "mode": "fixed", "size": 2 }', extra: str = "") -> list[SpecIssue]:
    with pytest.raises(SpecError) as exc:
        load(provider, pools, extra)
    return exc.value.issues


def one(provider: str, pools: str = '"web": { "mode": "fixed", "size": 2 }', extra: str = "") -> SpecIssue:
    found = issues(provider, pools, extra)
    assert len(found) == 1, found
    return found[0]


def pool(spec: EnvSpec, name: str = "web") -> FixedPool:
    p = spec.pools[name]
    assert isinstance(p, FixedPool)
    return p


# -- the provider union --------------------------------------------------------------------------


def test_unknown_cloud_lists_the_clouds_at_the_cloud_value():
    issue = one('{ "cloud": "gpc", "region": "x" }')
    assert issue == SpecIssue(
        "provider.cloud",
        "must be one of 'aws', 'gcp', 'azure', 'proxmox', got 'gpc'; did you mean 'gcp'?",
        4,
        26,
    )
    with pytest.raises(SpecError) as exc:
        load('{ "cloud": "gpc", "region": "x" }')
    assert exc.value.format().startswith("env.jsonc:4:26: provider.cloud: must be one of 'aws', 'gcp', 'azure'")


def test_missing_cloud_points_at_the_provider():
    assert one('{ "region": "x" }') == SpecIssue("provider", "missing required field 'cloud'", 4, 15)


def test_missing_gcp_project_names_it_without_the_union_tag():
    issue = one('{ "cloud": "gcp", "region": "us-central1" }')
    assert issue == SpecIssue("provider", "missing required field 'project'", 4, 15)


def test_fields_of_another_cloud_are_unknown_with_the_member_suggestions():
    issue = one('{ "cloud": "gcp", "project": "shop-prod-1", "region": "us-central1", "projet": "x" }')
    assert issue.path == "provider.projet"
    assert issue.message == "unknown field 'projet'; did you mean 'project'?"
    assert one(GCP.replace("}", ', "profile": "default" }')).message == "unknown field 'profile'"


@pytest.mark.parametrize(
    ("project", "ok"),
    [("shop-prod-1", True), ("abcdef", True), ("a" * 30, True), ("abcde", False), ("a" * 31, False),
     ("1shop-prod", False), ("shop-prod-", False), ("Shop-prod", False), ("shop_prod", False)],
)  # fmt: skip
def test_gcp_project_id_rules(project, ok):
    provider = GCP.replace("shop-prod-1", project)
    if ok:
        assert isinstance(load(provider).provider, GcpProvider)
    else:
        issue = one(provider)
        assert issue.path == "provider.project"
        assert issue.message.startswith("must be a Google Cloud project id")


def test_gcp_zone_is_not_a_region():
    issue = one(GCP.replace("us-central1", "us-central1-a"))
    assert issue.path == "provider.region"
    assert "not a zone" in issue.message


def test_azure_parses():
    spec = load('{ "cloud": "azure", "region": "westeurope" }')
    assert spec.provider.cloud is Cloud.azure
    assert spec.exec_mode is ExecMode.AzureRunCmd


def test_proxmox_provider_has_a_stable_region():
    spec = load(PVE, PVE_POOL)
    assert isinstance(spec.provider, ProxmoxProvider)
    assert spec.provider.region == "pve1" and spec.provider.verify_tls
    many = load(PVE.replace('"node": "pve1"', '"nodes": ["pve1", "pve2"]'), PVE_POOL)
    assert many.provider.region == "pve1,pve2"
    assert isinstance(many.provider, ProxmoxProvider) and many.provider.placement == ["pve1", "pve2"]


@pytest.mark.parametrize(
    ("members", "path", "message"),
    [
        ('"node": "pve1", "nodes": ["pve2"]', "provider", "give exactly one of node (one node) or nodes (a list)"),
        ("", "provider", "give exactly one of node (one node) or nodes (a list)"),
        ('"nodes": []', "provider.nodes", "must have at least 1 item after validation, not 0"),
        ('"nodes": ["a", "a"]', "provider.nodes", "node names must be unique"),
        ('"node": "pve_1"', "provider.node", "must match the pattern '^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$'"),
        ('"node": "a", "caFile": "/c", "verifyTls": false', "provider", "caFile is only used when verifyTls is true"),
    ],
)  # fmt: skip
def test_proxmox_placement_rules(members, path, message):
    provider = (
        '{ "cloud": "proxmox", "endpoint": "https://pve.example:8006"' + (f", {members}" if members else "") + " }"
    )
    issue = one(provider, PVE_POOL)
    assert (issue.path, issue.message) == (path, message)


@pytest.mark.parametrize(
    "endpoint", ["http://pve:8006", "pve.example:8006", "https://", "https://u:p@pve", "https://pve:x"]
)
def test_proxmox_endpoint_must_be_https(endpoint):
    issue = one(PVE.replace("https://pve.example:8006", endpoint), PVE_POOL)
    assert issue.path == "provider.endpoint"
    assert issue.message.startswith("must be an https URL")


# -- per-cloud defaults --------------------------------------------------------------------------


def test_aws_defaults_are_unchanged():
    spec = load(AWS, extra='"loadBalancer": { "domain": "a.example.com" }')
    assert (pool(spec).instance_type, pool(spec).image) == ("t3.small", "al2023")
    assert spec.exec_mode is ExecMode.SSM
    assert spec.load_balancer is not None and spec.load_balancer.cert_source is CertSource.AWSACM
    # No Proxmox keys and no exec mode are written into an AWS spec: recorded specs stay as they were.
    doc = spec_json(spec)
    assert doc["exec"] == {}
    assert not {"template", "cores", "memoryMb", "proxmox"} & set(doc["pools"]["web"])


def test_gcp_defaults():
    spec = load(GCP, extra='"loadBalancer": { "domain": "a.example.com" }')
    assert (pool(spec).instance_type, pool(spec).image) == ("e2-small", "ubuntu-24.04")
    assert spec.exec_mode is ExecMode.OSConfig
    assert spec.load_balancer is not None and spec.load_balancer.cert_source is CertSource.GCPManaged


def test_proxmox_defaults_and_derived_labels():
    spec = load(PVE, PVE_POOL + ', "big": { "mode": "fixed", "size": 1, "proxmox": { "template": "deb-12", '
                '"cores": 8 }, "instanceType": "large" }')  # fmt: skip
    web, big = pool(spec), pool(spec, "big")
    web_opts, big_opts = pool_options(web), pool_options(big)
    assert (web_opts.template, web_opts.cores, web_opts.memory_mb) == (9000, 2, 2048)
    assert (web.image, web.instance_type) == ("9000", "2vcpu-2048mb")  # labels for code that prints them
    assert (big_opts.template, big_opts.cores, big.image, big.instance_type) == ("deb-12", 8, "deb-12", "large")
    assert spec.exec_mode is ExecMode.QemuGuestAgent


def test_defaults_round_trip_through_the_recorded_spec():
    for spec in (load(AWS), load(GCP), load(PVE, PVE_POOL)):
        assert EnvSpec.model_validate(spec_json(spec)) == spec


def test_proxmox_pool_needs_a_template():
    assert one(PVE) == SpecIssue("pools.web", "missing required field 'template'", 5, 21)


@pytest.mark.parametrize(
    ("template", "message"),
    [("5", "a Proxmox VMID is between 100 and 999999999"),
     ('"bad name"', "must be a VMID or a VM name (letters, digits, '.' and '-')")],
)  # fmt: skip
def test_proxmox_template_values(template, message):
    issue = one(PVE, f'"web": {{ "mode": "fixed", "size": 2, "proxmox": {{ "template": {template} }} }}')
    assert (issue.path, issue.message) == ("pools.web.proxmox.template", message)
    # At its old place, the error points at the key the file wrote.
    old = one(PVE, f'"web": {{ "mode": "fixed", "size": 2, "template": {template} }}')
    assert (old.path, old.message) == ("pools.web.template", message)


def test_proxmox_sizes_are_only_for_proxmox():
    issue = one(AWS, '"web": { "mode": "fixed", "size": 2, "proxmox": { "cores": 4 } }')
    assert issue == SpecIssue("pools.web.proxmox", "this environment runs on aws", 5, 62)
    # Written at the old place: refused there, naming the new one.
    old = one(AWS, '"web": { "mode": "fixed", "size": 2, "cores": 4 }')
    assert old == SpecIssue(
        "pools.web.cores", "a proxmox setting (now pools.web.proxmox.cores); this environment runs on aws", 5, 60
    )


# -- settings that belong to another cloud -------------------------------------------------------


def test_exec_mode_of_another_cloud():
    issue = one(AWS, extra='"exec": { "mode": "OSConfig" }')
    assert issue == SpecIssue("exec.mode", "OSConfig is the gcp exec channel; aws uses SSM", 6, 21)
    assert load(PVE, PVE_POOL, '"exec": { "mode": "QemuGuestAgent" }').exec_mode is ExecMode.QemuGuestAgent


def test_cert_source_of_another_cloud():
    issue = one(AWS, extra='"loadBalancer": { "domain": "a.example.com", "certSource": "GCPManaged" }')
    assert issue == SpecIssue("loadBalancer.certSource", "GCPManaged is not available on aws; use AWSACM", 6, 62)


def test_proxmox_has_no_load_balancer():
    issue = one(PVE, PVE_POOL, '"loadBalancer": { "domain": "a.example.com" }')
    assert issue.path == "loadBalancer"
    assert issue.message == "proxmox has no managed load balancer; leave loadBalancer out"


def test_certificate_arn_is_checked_on_aws_only():
    lb = '"loadBalancer": { "domain": "a.example.com", "certificateArn": "my-cert" }'
    assert one(AWS, extra=lb).path == "loadBalancer.certificateArn"
    assert load(GCP, extra=lb).load_balancer is not None


def test_dns_zones_per_cloud():
    gcp = load(GCP, extra='"loadBalancer": { "domain": "a.example.com", "gcp": { "dnsZone": "shop-zone" } }')
    assert gcp.load_balancer is not None
    zone = gcp.load_balancer.options(GcpLoadBalancer)
    assert zone is not None and zone.dns_zone == "shop-zone"
    route53 = one(GCP, extra='"loadBalancer": { "domain": "a.example.com", "aws": { "hostedZoneId": "Z1" } }')
    assert (route53.path, route53.message) == ("loadBalancer.aws", "this environment runs on gcp")
    cloud_dns = one(AWS, extra='"loadBalancer": { "domain": "a.example.com", "dnsZone": "shop-zone" }')
    assert (cloud_dns.path, cloud_dns.message) == (
        "loadBalancer.dnsZone",
        "a gcp setting (now loadBalancer.gcp.dnsZone); this environment runs on aws",
    )


# -- existing networks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "pools", "network"),
    [
        (AWS, FIXED, '"existingVpcId": "vpc-0abc", "existingPrivateSubnetIds": ["subnet-01"]'),
        (AWS, FIXED, '"existingNetwork": "vpc-0abc", "existingSubnets": ["subnet-01"]'),
        (GCP, FIXED, '"existingNetwork": "shared-vpc", "existingSubnets": ["app"]'),
        (GCP, FIXED,
         '"existingNetwork": "projects/host-proj/global/networks/shared", '
         '"existingSubnets": ["projects/host-proj/regions/us-central1/subnetworks/app"]'),
        (PVE, PVE_POOL, '"existingNetwork": "vmbr0"'),
    ],
)  # fmt: skip
def test_existing_networks_per_cloud(provider, pools, network):
    spec = load(provider, pools, f'"network": {{ {network} }}')
    assert spec.network.existing_network == spec.network.existing_vpc_id
    assert spec.network.existing_vpc_id in json.dumps(spec_json(spec)["network"]["existingVpcId"])


@pytest.mark.parametrize(
    ("provider", "pools", "network", "path", "message"),
    [
        (AWS, FIXED, '"existingNetwork": "shared", "existingSubnets": ["subnet-1"]',
         "network.existingNetwork", "must be a VPC id (vpc-...) on aws"),
        (AWS, FIXED, '"existingVpcId": "vpc-1", "existingPrivateSubnetIds": ["sn-1"]',
         "network.existingPrivateSubnetIds[0]", "must be a subnet id (subnet-...) on aws"),
        (GCP, FIXED, '"existingVpcId": "vpc-0abc", "existingSubnets": ["App_1"]',
         "network.existingSubnets[0]", "must be a subnetwork name on gcp"),
        (GCP, FIXED, '"existingNetwork": "Shared_VPC", "existingSubnets": ["a"]',
         "network.existingNetwork", "must be a VPC network name or self-link on gcp"),
        (GCP, FIXED, '"existingNetwork": "shared"',
         "network", "existingPrivateSubnetIds is required when existingVpcId is set"),
        (PVE, PVE_POOL, '"existingNetwork": "vmbr0", "existingSubnets": ["a"]',
         "network.existingSubnets", "not used on proxmox: VMs attach to existingNetwork directly"),
        (PVE, PVE_POOL, '"existingNetwork": "0bridge"',
         "network.existingNetwork", "must be a bridge or SDN VNet name (e.g. vmbr0) on proxmox"),
        (AWS, FIXED, '"existingNetwork": "vpc-1", "existingVpcId": "vpc-1"',
         "network", "give existingNetwork or existingVpcId, not both (they are the same setting)"),
    ],
)  # fmt: skip
def test_existing_network_errors_point_at_the_key_written(provider, pools, network, path, message):
    issue = one(provider, pools, f'"network": {{ {network} }}')
    assert (issue.path, issue.message) == (path, message)
    assert issue.line == 6


# -- target and starter --------------------------------------------------------------------------


def test_target_for_each_cloud():
    aws = Target.for_spec(load(AWS.replace("}", ', "profile": "prod" }')), None)
    assert (aws.cloud, aws.region, aws.profile, aws.project, aws.api_endpoint) == (
        Cloud.aws,
        "us-east-1",
        "prod",
        None,
        None,
    )
    assert Target.for_spec(load(AWS.replace("}", ', "profile": "prod" }')), "http://127.0.0.1:4566").profile is None
    gcp = Target.for_spec(load(GCP), None)
    assert (gcp.project, gcp.region, gcp.profile, gcp.sandbox) == ("shop-prod-1", "us-central1", None, False)
    pve = Target.for_spec(load(PVE, PVE_POOL), None)
    assert (pve.api_endpoint, pve.endpoint_url, pve.region, pve.sandbox) == (
        "https://pve.example:8006",
        None,
        "pve1",
        False,
    )
    assert pve.describe() == "https://pve.example:8006 (pve1)"
    assert Target.model_validate(pve.model_dump(mode="json")) == pve  # recorded on the job and read back


@pytest.mark.parametrize("cloud", [Cloud.aws, Cloud.gcp, Cloud.proxmox])
def test_starter_for_each_cloud_loads(cloud):
    spec = parse_spec_text(render_starter("shop", "acme", cloud=cloud), "starter.jsonc")
    assert spec.provider.cloud is cloud
    assert isinstance(
        spec.provider, {Cloud.aws: AwsProvider, Cloud.gcp: GcpProvider, Cloud.proxmox: ProxmoxProvider}[cloud]
    )


def test_starter_refuses_bad_cloud_input():
    with pytest.raises(ValueError, match="no starter for azure"):
        render_starter("shop", "acme", cloud=Cloud.azure)
    with pytest.raises(ValueError, match="not a Google Cloud project id"):
        render_starter("shop", "acme", cloud=Cloud.gcp, project="X")
    with pytest.raises(ValueError, match="like 'us-central1'"):
        render_starter("shop", "acme", "us central", cloud=Cloud.gcp)
