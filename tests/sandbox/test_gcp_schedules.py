"""Resource policies (instance schedules), the instances that follow them, stop/start, and the autoscaler's
scaling schedules, through google-cloud-compute: what the sandbox stores and what it refuses as Google
does. It fires no schedule: nothing here waits for 08:00."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gexc
from google.cloud import compute_v1 as c
from tests.sandbox.conftest import Gcp, boot_disk

REGION, ZONE = "us-central1", "us-central1-a"
BERLIN_WORKDAYS = c.ResourcePolicyInstanceSchedulePolicy(
    time_zone="Europe/Berlin",
    vm_start_schedule=c.ResourcePolicyInstanceSchedulePolicySchedule(schedule="0 8 * * 1-5"),
    vm_stop_schedule=c.ResourcePolicyInstanceSchedulePolicySchedule(schedule="0 19 * * 1-5"),
)


def _network(gcp: Gcp) -> None:
    p = gcp.project
    gcp.wait(gcp.networks.insert_unary(project=p, network_resource=c.Network(name="n", auto_create_subnetworks=False)))
    sub = c.Subnetwork(name="s", network="global/networks/n", ip_cidr_range="10.4.0.0/24")
    gcp.wait(gcp.subnetworks.insert_unary(project=p, region=REGION, subnetwork_resource=sub))


def _vm(gcp: Gcp, name: str) -> None:
    vm = c.Instance(
        disks=[boot_disk()],
        name=name,
        machine_type="e2-small",
        network_interfaces=[c.NetworkInterface(subnetwork=f"regions/{REGION}/subnetworks/s")],
    )
    gcp.wait(gcp.instances.insert_unary(project=gcp.project, zone=ZONE, instance_resource=vm))


def _policy(
    gcp: Gcp, name: str, region: str = REGION, schedule: c.ResourcePolicyInstanceSchedulePolicy = BERLIN_WORKDAYS
) -> None:
    body = c.ResourcePolicy(name=name, instance_schedule_policy=schedule)
    gcp.wait(gcp.resource_policies.insert_unary(project=gcp.project, region=region, resource_policy_resource=body))


def _attach(gcp: Gcp, vm: str, *policies: str) -> c.Operation:
    body = c.InstancesAddResourcePoliciesRequest(resource_policies=list(policies))
    return gcp.instances.add_resource_policies_unary(
        project=gcp.project, zone=ZONE, instance=vm, instances_add_resource_policies_request_resource=body
    )


def test_instance_schedules_attach_detach_and_what_google_refuses(gcp: Gcp) -> None:
    p, policies = gcp.project, gcp.resource_policies
    _network(gcp)
    _vm(gcp, "vm")
    _policy(gcp, "office")
    got = policies.get(project=p, region=REGION, resource_policy="office")
    assert got.status == "READY" and got.instance_schedule_policy.vm_stop_schedule.schedule == "0 19 * * 1-5"
    assert [x.name for x in policies.list(project=p, region=REGION)] == ["office"]

    bad_cron = c.ResourcePolicyInstanceSchedulePolicy(
        time_zone="UTC", vm_start_schedule=c.ResourcePolicyInstanceSchedulePolicySchedule(schedule="0 25 * * *")
    )
    bad_zone = c.ResourcePolicyInstanceSchedulePolicy(
        time_zone="Mars/Olympus", vm_start_schedule=c.ResourcePolicyInstanceSchedulePolicySchedule(schedule="0 8 * * *")
    )
    for name, schedule in (("bad-cron", bad_cron), ("bad-zone", bad_zone)):
        with pytest.raises(gexc.BadRequest):
            _policy(gcp, name, schedule=schedule)

    with pytest.raises(gexc.NotFound):  # a policy that does not exist
        _attach(gcp, "vm", f"regions/{REGION}/resourcePolicies/missing")
    _policy(gcp, "elsewhere", region="europe-west1")
    with pytest.raises(gexc.BadRequest):  # not the instance's region
        _attach(gcp, "vm", "regions/europe-west1/resourcePolicies/elsewhere")

    gcp.wait(_attach(gcp, "vm", f"regions/{REGION}/resourcePolicies/office"))
    vm = gcp.instances.get(project=p, zone=ZONE, instance="vm")
    assert list(vm.resource_policies) == [gcp.link(f"regions/{REGION}/resourcePolicies/office")]
    _policy(gcp, "night")
    with pytest.raises(gexc.BadRequest):  # one instance schedule per VM
        _attach(gcp, "vm", f"regions/{REGION}/resourcePolicies/night")
    code, _ = gcp.failure(policies.delete_unary(project=p, region=REGION, resource_policy="office"))  # in use
    assert code == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"

    detach = c.InstancesRemoveResourcePoliciesRequest(resource_policies=[f"regions/{REGION}/resourcePolicies/office"])
    gcp.wait(
        gcp.instances.remove_resource_policies_unary(
            project=p, zone=ZONE, instance="vm", instances_remove_resource_policies_request_resource=detach
        )
    )
    assert not gcp.instances.get(project=p, zone=ZONE, instance="vm").resource_policies
    gcp.wait(policies.delete_unary(project=p, region=REGION, resource_policy="office"))
    with pytest.raises(gexc.NotFound):
        policies.get(project=p, region=REGION, resource_policy="office")

    # stop and start: TERMINATED (GCP's stopped state) and RUNNING again.
    gcp.wait(gcp.instances.stop_unary(project=p, zone=ZONE, instance="vm"))
    assert gcp.instances.get(project=p, zone=ZONE, instance="vm").status == "TERMINATED"
    gcp.wait(gcp.instances.start_unary(project=p, zone=ZONE, instance="vm"))
    assert gcp.instances.get(project=p, zone=ZONE, instance="vm").status == "RUNNING"


def _autoscaler(gcp: Gcp, schedules: dict[str, c.AutoscalingPolicyScalingSchedule], cpu: bool = True) -> c.Autoscaler:
    return c.Autoscaler(
        name="as",
        target=f"regions/{REGION}/instanceGroupManagers/m",
        autoscaling_policy=c.AutoscalingPolicy(
            min_num_replicas=0,
            max_num_replicas=3,
            cpu_utilization=c.AutoscalingPolicyCpuUtilization(utilization_target=0.6) if cpu else None,
            scaling_schedules=schedules,
        ),
    )


def test_scaling_schedules_are_kept_merged_by_patch_dropped_by_update_and_checked(gcp: Gcp) -> None:
    p, scalers = gcp.project, gcp.region_autoscalers
    _network(gcp)
    props = c.InstanceProperties(
        disks=[boot_disk()],
        machine_type="e2-small",
        network_interfaces=[c.NetworkInterface(subnetwork=f"regions/{REGION}/subnetworks/s")],
    )
    tpl = c.InstanceTemplate(name="t", properties=props)
    gcp.wait(gcp.region_instance_templates.insert_unary(project=p, region=REGION, instance_template_resource=tpl))
    mig = c.InstanceGroupManager(
        name="m", base_instance_name="w", instance_template=f"regions/{REGION}/instanceTemplates/t", target_size=1
    )
    gcp.wait(
        gcp.region_instance_group_managers.insert_unary(project=p, region=REGION, instance_group_manager_resource=mig)
    )
    day = c.AutoscalingPolicyScalingSchedule(
        schedule="30 7 * * 1-5", duration_sec=37800, min_required_replicas=2, time_zone="America/New_York"
    )
    for wrong in (
        _autoscaler(gcp, {"day": day}, cpu=False),  # a scaling schedule needs another signal beside it
        _autoscaler(
            gcp,
            {"day": c.AutoscalingPolicyScalingSchedule(schedule="0 8 * * *", duration_sec=60, min_required_replicas=1)},
        ),
        _autoscaler(
            gcp,
            {"day": c.AutoscalingPolicyScalingSchedule(schedule="0 8 * *", duration_sec=600, min_required_replicas=1)},
        ),
    ):
        with pytest.raises(gexc.BadRequest):
            scalers.insert_unary(project=p, region=REGION, autoscaler_resource=wrong)

    gcp.wait(scalers.insert_unary(project=p, region=REGION, autoscaler_resource=_autoscaler(gcp, {"day": day})))
    got = scalers.get(project=p, region=REGION, autoscaler="as")
    assert got.autoscaling_policy.min_num_replicas == 0
    assert dict(got.autoscaling_policy.scaling_schedules)["day"].duration_sec == 37800
    assert got.scaling_schedule_status["day"].state == "READY"

    # PATCH is a JSON merge patch: the schedule not named in it stays, a new one joins.
    night = c.AutoscalingPolicyScalingSchedule(schedule="0 22 * * *", duration_sec=3600, min_required_replicas=1)
    patch = c.Autoscaler(autoscaling_policy=c.AutoscalingPolicy(max_num_replicas=3, scaling_schedules={"night": night}))
    request = c.PatchRegionAutoscalerRequest(project=p, region=REGION, autoscaler="as", autoscaler_resource=patch)
    gcp.wait(scalers.patch_unary(request=request))
    schedules = dict(scalers.get(project=p, region=REGION, autoscaler="as").autoscaling_policy.scaling_schedules)
    assert sorted(schedules) == ["day", "night"]
    # PUT replaces the autoscaler: what it leaves out goes.
    put = c.UpdateRegionAutoscalerRequest(
        project=p, region=REGION, autoscaler="as", autoscaler_resource=_autoscaler(gcp, {})
    )
    gcp.wait(scalers.update_unary(request=put))
    got = scalers.get(project=p, region=REGION, autoscaler="as")
    assert not got.autoscaling_policy.scaling_schedules and not got.scaling_schedule_status
