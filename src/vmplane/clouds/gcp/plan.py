"""What the GCP steps create and delete, as plan resources named by `naming` (the names the steps use).

Pure: made from the spec and the recorded InfraConfig, no cloud calls. Resource types are the google
provider's Terraform types, so the direct pipeline and the generated stack compare line for line.
"""

from __future__ import annotations

from vmplane.clouds.base import Action, PlannedResource
from vmplane.clouds.gcp import identity, lb_firewall, naming, schedule_policy
from vmplane.clouds.gcp.firewall import IAP_RANGE
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.network import subnet_cidr
from vmplane.clouds.gcp.secrets import ACCESSOR, referenced_secrets
from vmplane.envspec.models import AsgPool, EnvSpec, FixedPool
from vmplane.state import InfraConfig

SECRET_MEMBER = "google_secret_manager_secret_iam_member"


def zones(spec: EnvSpec, infra: InfraConfig | None) -> list[str]:
    """The zones stepValidate picked, or placeholders before it ran (the names then show the pattern)."""
    if infra is not None and len(infra.Zones) == spec.network.zones:
        return list(infra.Zones)
    return [f"{spec.provider.region}-<zone {i + 1}>" for i in range(spec.network.zones)]


def provision_resources(spec: EnvSpec, infra: InfraConfig, project: str) -> list[PlannedResource]:
    add: list[PlannedResource] = []

    def plus(type_: str, name: str, step: str, detail: str = "") -> None:
        add.append(PlannedResource(Action.create, type_, name, step, detail))

    net, step = spec.network, "stepCreateNetwork"
    if not net.existing_vpc_id:
        plus("google_compute_network", naming.network(spec), step, "custom mode, regional routing")
        plus(
            "google_compute_subnetwork",
            naming.subnetwork(spec),
            step,
            f"{subnet_cidr(net.cidr)} in {spec.provider.region}, Private Google Access, no external IPs",
        )
        plus("google_compute_router", naming.router(spec), step)
        plus("google_compute_router_nat", naming.nat(spec), step, "egress for the subnetwork, auto-allocated IPs")
    if net.ingress_ports:
        ports = ",".join(map(str, net.ingress_ports))
        plus("google_compute_firewall", naming.firewall(spec, "vpc"), step, f"tcp/{ports} from the VPC range only")
    if spec.exec_interactive:
        plus("google_compute_firewall", naming.firewall(spec, "iap"), step, f"tcp/22 from IAP ({IAP_RANGE}) only")

    step = "stepCreateIAM"
    email = naming.service_account_email(spec, project)
    plus("google_service_account", naming.service_account_id(spec), step, email)
    for role in identity.ROLES:
        plus("google_project_iam_member", f"{project}/{role}", step, f"serviceAccount:{email}")
    for secret, field in referenced_secrets(project, spec).items():  # on the secret, not the project
        plus(SECRET_MEMBER, f"{secret}/{ACCESSOR}", step, f"serviceAccount:{email}, read by {field}")

    step = "stepCreateLaunchTemplate"
    for pool_name, pool in spec.pools.items():
        version = infra.LaunchTemplateVersion.get(pool_name, 0) + 1
        plus(
            "google_compute_region_instance_template",
            naming.template(spec, pool_name, version),
            step,
            f"{pool.image} {pool.instance_type}, {pool.disk_gb} GB, no external IP, Shielded VM, OS Login",
        )

    step, zs = "stepCreateVMs", zones(spec, infra)
    for pool_name, pool in spec.pools.items():
        if isinstance(pool, FixedPool):
            for i in range(pool.size):
                plus("google_compute_instance", naming.instance(spec, pool_name, i), step, zs[i % len(zs)])
            if pool.schedule is not None:
                sched = pool.schedule
                plus(
                    "google_compute_resource_policy",
                    schedule_policy.policy_name(spec, pool_name, sched),
                    step,
                    f"instance schedule: start '{sched.cron('start', 'unix')}', stop '{sched.cron('stop', 'unix')}' "
                    f"({sched.timezone}) for the pool's {pool.size} VMs",
                )
        elif isinstance(pool, AsgPool):
            plus(
                "google_compute_region_instance_group_manager",
                naming.mig(spec, pool_name),
                step,
                f"regional, target size {pool.desired}",
            )
            cpu = f", CPU {pool.target_cpu_percent:g}%" if pool.target_cpu_percent else ""
            sizes = f"min {pool.min} / max {pool.max}"
            if pool.schedule is not None:
                sched = pool.schedule
                sizes = (
                    f"min 0 / max {pool.max}, scaling schedule '{sched.cron('start', 'unix')}' ({sched.timezone}) "
                    f"for {sched.hours_per_day():g} h at min {schedule_policy.required_replicas(pool)}"
                )
            plus("google_compute_region_autoscaler", naming.autoscaler(spec, pool_name), step, f"{sizes}{cpu}")
    if spec.load_balancer is not None:
        add.extend(lb_resources(spec, infra))
    return add


def lb_resources(spec: EnvSpec, infra: InfraConfig | None = None) -> list[PlannedResource]:
    lb = spec.load_balancer
    assert lb is not None
    hc = lb.health_check
    front, backend, listener, dns = (
        "stepCreateLoadBalancer",
        "stepCreateTargetGroup",
        "stepCreateListener",
        "stepCreateDNSRecord",
    )
    out: list[PlannedResource] = []

    def plus(type_: str, name: str, step: str, detail: str = "") -> None:
        out.append(PlannedResource(Action.create, type_, name, step, detail))

    # The split lb.py makes: health check, health-checkers' rule and address first; then the backend
    # service over the pools' groups; then URL maps, certificate, proxies and forwarding rules.
    plus("google_compute_health_check", naming.health_check(spec), front, f"HTTP GET {hc.path} on {hc.port}")
    plus(
        "google_compute_firewall",
        naming.firewall(spec, "health"),
        front,
        f"tcp/{','.join(lb_firewall.health_ports(lb))} from Google's health checkers only",
    )
    plus("google_compute_global_address", naming.address(spec), front, "the load balancer's public IP")
    if any(isinstance(p, FixedPool) for p in spec.pools.values()):
        for zone in zones(spec, infra):
            plus("google_compute_instance_group", naming.instance_group(spec, zone), backend, f"Fixed VMs in {zone}")
    plus("google_compute_backend_service", naming.backend_service(spec), backend, f"HTTP:{lb.target_port}")
    plus("google_compute_url_map", naming.url_map(spec), listener, "all paths -> the backend service")
    cert = naming.certificate(spec, lb.domain)
    plus("google_compute_managed_ssl_certificate", cert, listener, f"Google-managed, {lb.domain}")
    plus("google_compute_target_https_proxy", naming.https_proxy(spec), listener)
    plus("google_compute_global_forwarding_rule", naming.https_rule(spec), listener, "HTTPS:443")
    plus("google_compute_url_map", naming.redirect_url_map(spec), listener, "HTTP -> 301 HTTPS")
    plus("google_compute_target_http_proxy", naming.http_proxy(spec), listener)
    plus("google_compute_global_forwarding_rule", naming.http_rule(spec), listener, "HTTP:80 (redirect)")
    plus("google_dns_record_set", f"{lb.domain}.", dns, "A -> the global address")
    return out


def lb_teardown_resources(infra: InfraConfig) -> list[PlannedResource]:
    step, ids = "stepDetachLoadBalancer", gcp_ids(infra)
    out: list[PlannedResource] = []

    def minus(type_: str, name: str | None, detail: str = "") -> None:
        if name:
            out.append(PlannedResource(Action.destroy, type_, name, step, detail))

    for rr in ids.DnsRecords:
        minus("google_dns_record_set", rr.Name, rr.Type)
    minus("google_compute_global_forwarding_rule", ids.HttpsForwardingRule)
    minus("google_compute_global_forwarding_rule", ids.HttpForwardingRule)
    minus("google_compute_target_https_proxy", ids.HttpsProxy)
    minus("google_compute_target_http_proxy", ids.HttpProxy)
    minus("google_compute_url_map", ids.UrlMap)
    minus("google_compute_url_map", ids.RedirectUrlMap)
    minus("google_compute_managed_ssl_certificate", ids.Certificate)
    minus("google_compute_global_address", ids.Address)
    minus("google_compute_backend_service", ids.BackendService)
    minus("google_compute_health_check", ids.HealthCheck)
    for zone, group in sorted(ids.InstanceGroups.items()):
        minus("google_compute_instance_group", group, zone)
    minus("google_compute_firewall", ids.FirewallRules.get("health"))
    return out


def teardown_resources(infra: InfraConfig) -> list[PlannedResource]:
    ids = gcp_ids(infra)
    out = lb_teardown_resources(infra)

    def minus(type_: str, name: str | None, step: str, detail: str = "") -> None:
        if name:
            out.append(PlannedResource(Action.destroy, type_, name, step, detail))

    step = "stepTerminateVMs"
    for pool, policy in sorted(ids.SchedulePolicies.items()):
        minus("google_compute_resource_policy", policy, step, f"{pool}: instance schedule, detached first")
    for pool, autoscaler in sorted(ids.Autoscalers.items()):
        minus("google_compute_region_autoscaler", autoscaler, step, pool)
    for pool, mig in sorted(infra.ScalingGroupID.items()):
        minus("google_compute_region_instance_group_manager", mig, step, f"{pool}: resized to 0, then deleted")
    for vm in infra.VMs:
        if vm.Pool not in infra.ScalingGroupID:
            minus("google_compute_instance", vm.ID, step, vm.AZ or "")
    step = "stepDeleteLaunchTemplate"
    templates = {p: list(names) for p, names in ids.Templates.items()}
    for pool, current in infra.LaunchTemplateID.items():
        if current not in templates.setdefault(pool, []):
            templates[pool].append(current)
    for pool, names in sorted(templates.items()):
        for name in names:
            minus("google_compute_region_instance_template", name, step, pool)
    step = "stepDeleteSecurityGroup"
    for purpose, name in sorted(ids.FirewallRules.items()):
        if purpose != "health":  # listed with the load balancer
            minus("google_compute_firewall", name, step)
    step = "stepDeleteIAM"
    if ids.ServiceAccountEmail:
        for secret in ids.SecretBindings:  # the member only: the secret is the user's
            minus(SECRET_MEMBER, f"{secret}/{ACCESSOR}", step, f"serviceAccount:{ids.ServiceAccountEmail}")
        for role in ids.ServiceAccountRoles:
            minus(
                "google_project_iam_member", f"{ids.Project}/{role}", step, f"serviceAccount:{ids.ServiceAccountEmail}"
            )
        minus("google_service_account", ids.ServiceAccountEmail.split("@", 1)[0], step, ids.ServiceAccountEmail)
    if infra.NetworkCreated:
        step = "stepDeleteNetwork"
        minus("google_compute_router", ids.RouterName, step, f"with NAT {ids.NatName}" if ids.NatName else "")
        for sub in infra.VMSubnetIDs:
            minus("google_compute_subnetwork", sub, step)
        minus("google_compute_network", infra.NetworkID, step)
    return out
