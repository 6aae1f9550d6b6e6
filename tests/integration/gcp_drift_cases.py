"""The drift the GCP drift test and the repair sweep make out of band on an applied gcp-fixed environment,
with the official client (google-cloud-compute): a VM deleted, a VM stopped with its `team` label removed,
a rule allowing 22 from 0.0.0.0/0 added on the job's network (untagged, outside the environment's name
prefix), vmplane's VPC rule deleted, the Cloud Router (and its NAT) deleted, the instance template deleted.
The sandbox applies each change at once (its operations only complete later), so no wait is needed."""

from __future__ import annotations

from dataclasses import dataclass

from google.cloud import compute_v1 as c
from tests.integration.gcp_inventory import PROJECT, REGION, Gcp, job_resources

from vmplane.clouds.gcp import naming
from vmplane.envspec.models import EnvSpec


@dataclass(frozen=True)
class FixedDrift:
    gone: str  # the deleted VM
    stopped: str  # the stopped, unlabelled VM
    world_rule: str  # the rule someone added
    vpc_rule: str
    router: str
    template: str

    def expected(self, spec: EnvSpec) -> dict[str, tuple[str, str]]:
        """Plan address -> (kind, change) `vmplane drift` must report."""
        return {
            f"google_compute_instance.{self.gone}": ("instance", "missing"),
            f"google_compute_instance.{self.stopped}": ("instance", "changed"),
            f"google_compute_firewall.{self.world_rule}": ("firewall", "extra"),
            f"google_compute_firewall.{self.vpc_rule}": ("firewall", "missing"),
            f"google_compute_router.{self.router}": ("router", "missing"),
            f"google_compute_router_nat.{naming.nat(spec)}": ("router-nat", "missing"),
            f"google_compute_region_instance_template.{self.template}": ("region-instance-template", "missing"),
        }


def break_fixed(gcp: Gcp, spec: EnvSpec, job_id: str) -> FixedDrift:
    vms = {v["name"]: v for v in job_resources(gcp, job_id)["instances"]}
    zone_of = {n: v["zone"].rsplit("/", 1)[-1] for n, v in vms.items()}
    made = FixedDrift(
        gone=naming.instance(spec, "web", 0),
        stopped=naming.instance(spec, "web", 1),
        world_rule=f"ops-ssh-{spec.name}",  # not `<env>-...`: found because it is on the job's network
        vpc_rule=naming.firewall(spec, "vpc"),
        router=naming.router(spec),
        template=naming.template(spec, "web", 1),
    )
    instances = gcp.compute("Instances")
    instances.delete_unary(project=PROJECT, zone=zone_of[made.gone], instance=made.gone)
    instances.stop_unary(project=PROJECT, zone=zone_of[made.stopped], instance=made.stopped)
    live = instances.get(project=PROJECT, zone=zone_of[made.stopped], instance=made.stopped)
    labels = {k: v for k, v in live.labels.items() if k != "team"}
    body = c.InstancesSetLabelsRequest(labels=labels, label_fingerprint=live.label_fingerprint)
    instances.set_labels_unary(
        project=PROJECT, zone=zone_of[made.stopped], instance=made.stopped, instances_set_labels_request_resource=body
    )
    world = c.Firewall(
        name=made.world_rule,
        network=f"projects/{PROJECT}/global/networks/{naming.network(spec)}",
        direction="INGRESS",
        source_ranges=["0.0.0.0/0"],
        allowed=[c.Allowed(I_p_protocol="tcp", ports=["22"])],
    )
    firewalls = gcp.compute("Firewalls")
    firewalls.insert_unary(project=PROJECT, firewall_resource=world)
    firewalls.delete_unary(project=PROJECT, firewall=made.vpc_rule)
    gcp.compute("Routers").delete_unary(project=PROJECT, region=REGION, router=made.router)
    gcp.compute("RegionInstanceTemplates").delete_unary(project=PROJECT, region=REGION, instance_template=made.template)
    return made
