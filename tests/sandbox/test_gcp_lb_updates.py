"""The load balancer's in-place changes through the official client: one address behind the 443 rule and
the :80 redirect (never two rules on one port), a proxy's certificate and URL map switched, a rule's
target switched, health checks and URL maps patched, a regional MIG's named ports, a service account's
description."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gexc
from google.cloud import compute_v1 as c
from tests.sandbox.conftest import Gcp, boot_disk

REGION = "us-central1"


def _chain(gcp: Gcp) -> None:
    p, w = gcp.project, gcp.wait
    hc = c.HealthCheck(name="hc", type_="HTTP", http_health_check=c.HTTPHealthCheck(port=80, request_path="/healthz"))
    w(gcp.health_checks.insert_unary(project=p, health_check_resource=hc))
    bs = c.BackendService(name="bs", load_balancing_scheme="EXTERNAL_MANAGED", health_checks=["global/healthChecks/hc"])
    w(gcp.backend_services.insert_unary(project=p, backend_service_resource=bs))
    for name in ("um", "um2"):
        w(
            gcp.url_maps.insert_unary(
                project=p, url_map_resource=c.UrlMap(name=name, default_service="global/backendServices/bs")
            )
        )
    for name, domain in (("cert-a", "a.example.test"), ("cert-b", "b.example.test")):
        cert = c.SslCertificate(
            name=name, type_="MANAGED", managed=c.SslCertificateManagedSslCertificate(domains=[domain])
        )
        w(gcp.ssl_certificates.insert_unary(project=p, ssl_certificate_resource=cert))
    https = c.TargetHttpsProxy(
        name="px", url_map="global/urlMaps/um", ssl_certificates=["global/sslCertificates/cert-a"]
    )
    w(gcp.target_https_proxies.insert_unary(project=p, target_https_proxy_resource=https))
    w(
        gcp.target_http_proxies.insert_unary(
            project=p, target_http_proxy_resource=c.TargetHttpProxy(name="hp", url_map="global/urlMaps/um2")
        )
    )
    w(gcp.global_addresses.insert_unary(project=p, address_resource=c.Address(name="ip")))


def test_one_address_serves_443_and_80_but_not_one_port_twice(gcp: Gcp) -> None:
    _chain(gcp)
    p, w = gcp.project, gcp.wait
    ip = gcp.global_addresses.get(project=p, address="ip").address
    for name, port, target in (("r443", "443", "targetHttpsProxies/px"), ("r80", "80", "targetHttpProxies/hp")):
        rule = c.ForwardingRule(
            name=name,
            I_p_address="global/addresses/ip",
            port_range=port,
            target=f"global/{target}",
            load_balancing_scheme="EXTERNAL_MANAGED",
        )
        w(gcp.global_forwarding_rules.insert_unary(project=p, forwarding_rule_resource=rule))
    address = gcp.global_addresses.get(project=p, address="ip")
    assert address.status == "IN_USE" and len(address.users) == 2
    assert {r.I_p_address for r in gcp.global_forwarding_rules.list(project=p)} == {ip}
    twice = c.ForwardingRule(name="again", I_p_address=ip, port_range="443", target="global/targetHttpsProxies/px")
    with pytest.raises(gexc.BadRequest, match="already serves this port range"):
        gcp.global_forwarding_rules.insert_unary(project=p, forwarding_rule_resource=twice)
    w(gcp.global_forwarding_rules.delete_unary(project=p, forwarding_rule="r443"))
    assert gcp.global_addresses.get(project=p, address="ip").status == "IN_USE"  # r80 still uses it
    w(gcp.global_forwarding_rules.delete_unary(project=p, forwarding_rule="r80"))
    assert gcp.global_addresses.get(project=p, address="ip").status == "RESERVED"


def test_proxies_rules_health_checks_and_url_maps_change_in_place(gcp: Gcp) -> None:
    _chain(gcp)
    p, w = gcp.project, gcp.wait
    certs = c.TargetHttpsProxiesSetSslCertificatesRequest(ssl_certificates=["global/sslCertificates/cert-b"])
    w(
        gcp.target_https_proxies.set_ssl_certificates_unary(
            project=p, target_https_proxy="px", target_https_proxies_set_ssl_certificates_request_resource=certs
        )
    )
    px = gcp.target_https_proxies.get(project=p, target_https_proxy="px")
    assert [s.rsplit("/", 1)[1] for s in px.ssl_certificates] == ["cert-b"]
    w(gcp.ssl_certificates.delete_unary(project=p, ssl_certificate="cert-a"))  # no longer in use
    code, _ = gcp.failure(gcp.ssl_certificates.delete_unary(project=p, ssl_certificate="cert-b"))  # in use
    assert code == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
    w(
        gcp.target_https_proxies.set_url_map_unary(
            project=p,
            target_https_proxy="px",
            url_map_reference_resource=c.UrlMapReference(url_map="global/urlMaps/um2"),
        )
    )
    assert gcp.target_https_proxies.get(project=p, target_https_proxy="px").url_map.endswith("/urlMaps/um2")
    with pytest.raises(gexc.BadRequest, match="cannot be found"):
        gcp.target_http_proxies.set_url_map_unary(
            project=p,
            target_http_proxy="hp",
            url_map_reference_resource=c.UrlMapReference(url_map="global/urlMaps/nope"),
        )
    rule = c.ForwardingRule(
        name="r", I_p_address="global/addresses/ip", port_range="80", target="global/targetHttpProxies/hp"
    )
    w(gcp.global_forwarding_rules.insert_unary(project=p, forwarding_rule_resource=rule))
    w(
        gcp.global_forwarding_rules.set_target_unary(
            project=p,
            forwarding_rule="r",
            target_reference_resource=c.TargetReference(target="global/targetHttpsProxies/px"),
        )
    )
    assert gcp.global_forwarding_rules.get(project=p, forwarding_rule="r").target.endswith("/targetHttpsProxies/px")
    hc = c.HealthCheck(http_health_check=c.HTTPHealthCheck(port=8080, request_path="/ready"), type_="HTTP")
    w(gcp.health_checks.patch_unary(project=p, health_check="hc", health_check_resource=hc))
    assert gcp.health_checks.get(project=p, health_check="hc").http_health_check.request_path == "/ready"
    with pytest.raises(gexc.PreconditionFailed):  # Google: an up-to-date fingerprint is required (412)
        gcp.url_maps.patch_unary(project=p, url_map="um", url_map_resource=c.UrlMap(description="patched"))
    current = gcp.url_maps.get(project=p, url_map="um").fingerprint
    w(
        gcp.url_maps.patch_unary(
            project=p, url_map="um", url_map_resource=c.UrlMap(description="patched", fingerprint=current)
        )
    )
    assert gcp.url_maps.get(project=p, url_map="um").fingerprint != current  # each change makes a new one
    assert gcp.url_maps.get(project=p, url_map="um").description == "patched"


def test_a_regional_migs_group_view_and_its_named_ports(gcp: Gcp) -> None:
    p, w = gcp.project, gcp.wait
    w(gcp.networks.insert_unary(project=p, network_resource=c.Network(name="n", auto_create_subnetworks=False)))
    sub = c.Subnetwork(name="s", network="global/networks/n", ip_cidr_range="10.4.0.0/24")
    w(gcp.subnetworks.insert_unary(project=p, region=REGION, subnetwork_resource=sub))
    props = c.InstanceProperties(
        disks=[boot_disk()],
        machine_type="e2-small",
        network_interfaces=[c.NetworkInterface(subnetwork=f"regions/{REGION}/subnetworks/s")],
    )
    w(
        gcp.region_instance_templates.insert_unary(
            project=p, region=REGION, instance_template_resource=c.InstanceTemplate(name="t", properties=props)
        )
    )
    mig = c.InstanceGroupManager(
        name="m", base_instance_name="w", instance_template=f"regions/{REGION}/instanceTemplates/t", target_size=2
    )
    w(gcp.region_instance_group_managers.insert_unary(project=p, region=REGION, instance_group_manager_resource=mig))
    group = gcp.region_instance_groups.get(project=p, region=REGION, instance_group="m")
    assert group.size == 2
    req = c.RegionInstanceGroupsSetNamedPortsRequest(
        named_ports=[c.NamedPort(name="http", port=8080)], fingerprint=group.fingerprint
    )
    w(
        gcp.region_instance_groups.set_named_ports_unary(
            project=p, region=REGION, instance_group="m", region_instance_groups_set_named_ports_request_resource=req
        )
    )
    got = gcp.region_instance_group_managers.get(project=p, region=REGION, instance_group_manager="m")
    assert [(n.name, n.port) for n in got.named_ports] == [("http", 8080)]
    with pytest.raises(gexc.PreconditionFailed):
        gcp.region_instance_groups.set_named_ports_unary(
            project=p, region=REGION, instance_group="m", region_instance_groups_set_named_ports_request_resource=req
        )  # the old fingerprint


def test_a_service_accounts_description_is_patched(gcp: Gcp) -> None:
    iam = gcp.sandbox.gcp_discovery("iam")
    p = gcp.project
    made = (
        iam.projects()
        .serviceAccounts()
        .create(name=f"projects/{p}", body={"accountId": "vmp-patch", "serviceAccount": {"description": "old"}})
        .execute()
    )
    name = f"projects/{p}/serviceAccounts/{made['email']}"
    body = {"serviceAccount": {"description": "new"}, "updateMask": "description"}
    assert iam.projects().serviceAccounts().patch(name=name, body=body).execute()["description"] == "new"
    assert iam.projects().serviceAccounts().get(name=name).execute()["description"] == "new"


def test_an_address_is_relabelled_and_private_google_access_is_set(gcp: Gcp) -> None:
    _chain(gcp)
    p, w = gcp.project, gcp.wait
    ip = gcp.global_addresses.get(project=p, address="ip")
    req = c.GlobalSetLabelsRequest(labels={"zop_role": "lb"}, label_fingerprint=ip.label_fingerprint)
    w(gcp.global_addresses.set_labels_unary(project=p, resource="ip", global_set_labels_request_resource=req))
    assert gcp.global_addresses.get(project=p, address="ip").labels == {"zop_role": "lb"}
    with pytest.raises(gexc.PreconditionFailed):
        gcp.global_addresses.set_labels_unary(project=p, resource="ip", global_set_labels_request_resource=req)
    w(gcp.networks.insert_unary(project=p, network_resource=c.Network(name="n", auto_create_subnetworks=False)))
    sub = c.Subnetwork(name="s", network="global/networks/n", ip_cidr_range="10.5.0.0/24")
    w(gcp.subnetworks.insert_unary(project=p, region=REGION, subnetwork_resource=sub))
    body = c.SubnetworksSetPrivateIpGoogleAccessRequest(private_ip_google_access=True)
    w(
        gcp.subnetworks.set_private_ip_google_access_unary(
            project=p, region=REGION, subnetwork="s", subnetworks_set_private_ip_google_access_request_resource=body
        )
    )
    assert gcp.subnetworks.get(project=p, region=REGION, subnetwork="s").private_ip_google_access is True
