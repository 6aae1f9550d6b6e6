"""The whole shape vmplane's GCP driver builds, created and deleted in dependency order through the
official clients (google-cloud-compute REST, googleapiclient for DNS/IAM/Resource Manager)."""

from __future__ import annotations

from google.cloud import compute_v1 as c
from tests.sandbox.conftest import Gcp

REGION, ZONES = "us-central1", ("us-central1-a", "us-central1-b")


def test_whole_shape_created_and_deleted(gcp: Gcp) -> None:
    p = gcp.project
    w = gcp.wait
    net = c.Network(
        name="vmp-net", auto_create_subnetworks=False, routing_config=c.NetworkRoutingConfig(routing_mode="REGIONAL")
    )
    w(gcp.networks.insert_unary(project=p, network_resource=net))
    sub = c.Subnetwork(
        name="vmp-sub", network="global/networks/vmp-net", ip_cidr_range="10.10.0.0/20", private_ip_google_access=True
    )
    w(gcp.subnetworks.insert_unary(project=p, region=REGION, subnetwork_resource=sub))
    nat = c.RouterNat(
        name="vmp-nat",
        nat_ip_allocate_option="AUTO_ONLY",
        source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
    )
    router = c.Router(name="vmp-router", network=gcp.link("global/networks/vmp-net"), nats=[nat])
    w(gcp.routers.insert_unary(project=p, region=REGION, router_resource=router))
    fw = c.Firewall(
        name="vmp-hc",
        network="global/networks/vmp-net",
        source_ranges=["35.191.0.0/16", "130.211.0.0/22"],
        allowed=[c.Allowed(I_p_protocol="tcp", ports=["80"])],
        target_tags=["vmp"],
    )
    w(gcp.firewalls.insert_unary(project=p, firewall_resource=fw))
    sa = gcp.sandbox.gcp_discovery("iam").projects().serviceAccounts()
    account = sa.create(
        name=f"projects/{p}", body={"accountId": "vmp-vm", "serviceAccount": {"displayName": "vm"}}
    ).execute()
    assert account["email"] == f"vmp-vm@{p}.iam.gserviceaccount.com"

    props = c.InstanceProperties(
        machine_type="e2-small",
        labels={"zop_org_id": "acme"},
        tags=c.Tags(items=["vmp"]),
        metadata=c.Metadata(items=[c.Items(key="enable-guest-attributes", value="TRUE")]),
        disks=[
            c.AttachedDisk(
                boot=True,
                auto_delete=True,
                initialize_params=c.AttachedDiskInitializeParams(
                    source_image="projects/debian-cloud/global/images/family/debian-12", disk_size_gb=20
                ),
            )
        ],
        network_interfaces=[c.NetworkInterface(subnetwork=gcp.link(f"regions/{REGION}/subnetworks/vmp-sub"))],
        service_accounts=[
            c.ServiceAccount(email=account["email"], scopes=["https://www.googleapis.com/auth/cloud-platform"])
        ],
    )
    tpl = c.InstanceTemplate(name="vmp-tpl-1", properties=props)
    w(gcp.region_instance_templates.insert_unary(project=p, region=REGION, instance_template_resource=tpl))
    hc = c.HealthCheck(
        name="vmp-hc", type_="HTTP", http_health_check=c.HTTPHealthCheck(port=80, request_path="/healthz")
    )
    w(gcp.health_checks.insert_unary(project=p, health_check_resource=hc))
    mig = c.InstanceGroupManager(
        name="vmp-mig",
        base_instance_name="vmp-web",
        instance_template=gcp.link(f"regions/{REGION}/instanceTemplates/vmp-tpl-1"),
        target_size=2,
        named_ports=[c.NamedPort(name="http", port=80)],
        distribution_policy=c.DistributionPolicy(
            zones=[c.DistributionPolicyZoneConfiguration(zone=f"zones/{z}") for z in ZONES]
        ),
        auto_healing_policies=[
            c.InstanceGroupManagerAutoHealingPolicy(health_check="global/healthChecks/vmp-hc", initial_delay_sec=300)
        ],
    )
    w(gcp.region_instance_group_managers.insert_unary(project=p, region=REGION, instance_group_manager_resource=mig))
    scaler = c.Autoscaler(
        name="vmp-as",
        target=gcp.link(f"regions/{REGION}/instanceGroupManagers/vmp-mig"),
        autoscaling_policy=c.AutoscalingPolicy(
            min_num_replicas=2,
            max_num_replicas=4,
            cpu_utilization=c.AutoscalingPolicyCpuUtilization(utilization_target=0.6),
        ),
    )
    w(gcp.region_autoscalers.insert_unary(project=p, region=REGION, autoscaler_resource=scaler))

    fixed = c.Instance(
        name="vmp-web-0",
        machine_type=f"zones/{ZONES[0]}/machineTypes/e2-small",
        labels={"zop_org_id": "acme"},
        disks=props.disks,
        network_interfaces=props.network_interfaces,
        service_accounts=props.service_accounts,
    )
    w(gcp.instances.insert_unary(project=p, zone=ZONES[0], instance_resource=fixed))
    ig = c.InstanceGroup(name="vmp-ig", network=gcp.link("global/networks/vmp-net"))
    w(gcp.instance_groups.insert_unary(project=p, zone=ZONES[0], instance_group_resource=ig))
    add = c.InstanceGroupsAddInstancesRequest(
        instances=[c.InstanceReference(instance=gcp.link(f"zones/{ZONES[0]}/instances/vmp-web-0"))]
    )
    w(
        gcp.instance_groups.add_instances_unary(
            project=p, zone=ZONES[0], instance_group="vmp-ig", instance_groups_add_instances_request_resource=add
        )
    )
    ports = c.InstanceGroupsSetNamedPortsRequest(named_ports=[c.NamedPort(name="http", port=80)])
    w(
        gcp.instance_groups.set_named_ports_unary(
            project=p, zone=ZONES[0], instance_group="vmp-ig", instance_groups_set_named_ports_request_resource=ports
        )
    )
    members = gcp.instance_groups.list_instances(
        project=p,
        zone=ZONES[0],
        instance_group="vmp-ig",
        instance_groups_list_instances_request_resource=c.InstanceGroupsListInstancesRequest(),
    )
    assert [m.instance.rsplit("/", 1)[1] for m in members] == ["vmp-web-0"]

    bs = c.BackendService(
        name="vmp-bs",
        protocol="HTTP",
        port_name="http",
        load_balancing_scheme="EXTERNAL_MANAGED",
        health_checks=["global/healthChecks/vmp-hc"],
        backends=[
            c.Backend(group=gcp.link(f"regions/{REGION}/instanceGroups/vmp-mig"), balancing_mode="UTILIZATION"),
            c.Backend(group=f"zones/{ZONES[0]}/instanceGroups/vmp-ig"),
        ],
    )
    w(gcp.backend_services.insert_unary(project=p, backend_service_resource=bs))
    w(
        gcp.url_maps.insert_unary(
            project=p, url_map_resource=c.UrlMap(name="vmp-map", default_service="global/backendServices/vmp-bs")
        )
    )
    redirect = c.UrlMap(
        name="vmp-redirect", default_url_redirect=c.HttpRedirectAction(https_redirect=True, strip_query=False)
    )
    w(gcp.url_maps.insert_unary(project=p, url_map_resource=redirect))
    cert = c.SslCertificate(
        name="vmp-cert",
        type_="MANAGED",
        managed=c.SslCertificateManagedSslCertificate(domains=["web.sandbox.vmplane.test"]),
    )
    w(gcp.ssl_certificates.insert_unary(project=p, ssl_certificate_resource=cert))
    got = gcp.ssl_certificates.get(project=p, ssl_certificate="vmp-cert")
    assert got.managed.status == "PROVISIONING" and got.managed.domain_status == {
        "web.sandbox.vmplane.test": "PROVISIONING"
    }
    https = c.TargetHttpsProxy(
        name="vmp-https", url_map="global/urlMaps/vmp-map", ssl_certificates=["global/sslCertificates/vmp-cert"]
    )
    w(gcp.target_https_proxies.insert_unary(project=p, target_https_proxy_resource=https))
    w(
        gcp.target_http_proxies.insert_unary(
            project=p,
            target_http_proxy_resource=c.TargetHttpProxy(name="vmp-http", url_map="global/urlMaps/vmp-redirect"),
        )
    )
    w(gcp.global_addresses.insert_unary(project=p, address_resource=c.Address(name="vmp-ip")))
    address = gcp.global_addresses.get(project=p, address="vmp-ip")
    assert address.address.startswith("203.0.113.") and address.status == "RESERVED"
    for name, target, port in (
        ("vmp-443", "targetHttpsProxies/vmp-https", "443"),
        ("vmp-80", "targetHttpProxies/vmp-http", "80"),
    ):
        rule = c.ForwardingRule(
            name=name,
            target=f"global/{target}",
            I_p_address=address.address if port == "80" else "global/addresses/vmp-ip",
            port_range=port,
            load_balancing_scheme="EXTERNAL_MANAGED",
            labels={"zop_org_id": "acme"},
        )
        if port == "80":
            w(gcp.global_addresses.insert_unary(project=p, address_resource=c.Address(name="vmp-ip-80")))
            rule.I_p_address = "global/addresses/vmp-ip-80"
        w(gcp.global_forwarding_rules.insert_unary(project=p, forwarding_rule_resource=rule))
    assert gcp.global_addresses.get(project=p, address="vmp-ip").status == "IN_USE"
    assert gcp.global_forwarding_rules.get(project=p, forwarding_rule="vmp-443").I_p_address == address.address

    dns = gcp.sandbox.gcp_discovery("dns")
    zones = dns.managedZones().list(project=p, dnsName="sandbox.vmplane.test.").execute()["managedZones"]
    assert [z["name"] for z in zones] == ["sandbox-vmplane-test"]
    a = {"name": "web.sandbox.vmplane.test.", "type": "A", "ttl": 300, "rrdatas": [address.address]}
    dns.changes().create(project=p, managedZone="sandbox-vmplane-test", body={"additions": [a]}).execute()

    # Everything is there and shaped as Google shapes it.
    instances = [i for z in ZONES for i in gcp.instances.list(project=p, zone=z)]
    assert "vmp-web-0" in {i.name for i in instances} and len(instances) == 3
    for i in instances:
        assert i.status == "RUNNING" and i.network_interfaces[0].network_i_p.startswith("10.10.")
        assert list(i.network_interfaces[0].access_configs) == []  # no external IP
        assert i.self_link.startswith("https://www.googleapis.com/compute/v1/projects/") and int(i.id) > 0
    assert len({i.network_interfaces[0].network_i_p for i in instances}) == 3

    # Teardown in dependency order; every delete is an operation that completes.
    dns.changes().create(project=p, managedZone="sandbox-vmplane-test", body={"deletions": [a]}).execute()
    for rule in ("vmp-443", "vmp-80"):
        w(gcp.global_forwarding_rules.delete_unary(project=p, forwarding_rule=rule))
    for addr in ("vmp-ip", "vmp-ip-80"):
        w(gcp.global_addresses.delete_unary(project=p, address=addr))
    w(gcp.target_https_proxies.delete_unary(project=p, target_https_proxy="vmp-https"))
    w(gcp.target_http_proxies.delete_unary(project=p, target_http_proxy="vmp-http"))
    w(gcp.ssl_certificates.delete_unary(project=p, ssl_certificate="vmp-cert"))
    for m in ("vmp-map", "vmp-redirect"):
        w(gcp.url_maps.delete_unary(project=p, url_map=m))
    w(gcp.backend_services.delete_unary(project=p, backend_service="vmp-bs"))
    w(gcp.region_autoscalers.delete_unary(project=p, region=REGION, autoscaler="vmp-as"))
    w(gcp.region_instance_group_managers.delete_unary(project=p, region=REGION, instance_group_manager="vmp-mig"))
    w(gcp.instance_groups.delete_unary(project=p, zone=ZONES[0], instance_group="vmp-ig"))
    w(gcp.instances.delete_unary(project=p, zone=ZONES[0], instance="vmp-web-0"))
    w(gcp.health_checks.delete_unary(project=p, health_check="vmp-hc"))
    w(gcp.region_instance_templates.delete_unary(project=p, region=REGION, instance_template="vmp-tpl-1"))
    sa.delete(name=f"projects/{p}/serviceAccounts/{account['email']}").execute()
    w(gcp.firewalls.delete_unary(project=p, firewall="vmp-hc"))
    w(gcp.routers.delete_unary(project=p, region=REGION, router="vmp-router"))
    w(gcp.subnetworks.delete_unary(project=p, region=REGION, subnetwork="vmp-sub"))
    w(gcp.networks.delete_unary(project=p, network="vmp-net"))
    state = gcp.sandbox.gcp_control(f"state?project={p}", method="GET")
    assert state["compute"] == {} and state["revisions"]["compute"]
