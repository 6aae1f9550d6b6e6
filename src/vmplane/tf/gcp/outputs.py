"""The GCP stack's outputs."""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.tf.gcp.common import E
from vmplane.tf.hcl import Block, Item


def outputs_tf(spec: EnvSpec) -> list[Item]:
    outs: list[tuple[str, str, str]] = [
        ("network", "google_compute_network.this.name", "The environment's VPC network."),
        ("subnetwork", "google_compute_subnetwork.vms.name", "The VMs' subnetwork: no external addresses."),
        ("vm_network_tag", "local.vm_tag", "The network tag the firewall rules select the VMs by."),
        ("service_account_email", "google_service_account.vm.email", "The VMs' service account."),
        (
            "instance_templates",
            "{ for k, t in google_compute_region_instance_template.pool : k => t.name }",
            "Regional instance template per pool.",
        ),
    ]
    if any(p.mode == "fixed" for p in spec.pools.values()):
        outs.append(
            ("instances", "{ for k, i in google_compute_instance.vm : k => i.zone }", "Fixed-pool VMs by name: zone.")
        )
    if any(p.mode == "asg" for p in spec.pools.values()):
        outs.append(
            (
                "instance_group_managers",
                "{ for k, g in google_compute_region_instance_group_manager.pool : k => g.name }",
                "Regional managed instance group per auto-scaled pool.",
            )
        )
    if spec.load_balancer is not None:
        outs.append(("lb_address", "google_compute_global_address.this.address", "The load balancer's address."))
        outs.append(("domain", "local.lb.domain", "The domain the load balancer answers on."))
        outs.append(("url", '"https://${local.lb.domain}"', "Where the environment answers."))
    return [Block("output", [n]).attr("description", d).attr("value", E(v)) for n, v, d in outs]
