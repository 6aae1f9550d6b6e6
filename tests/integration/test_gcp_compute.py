"""The GCP compute modules against the GCP sandbox: templates, Fixed pools, a regional MIG with its
autoscaler, readiness, the exec mailbox, rotation and teardown. Prerequisites (network, subnetwork,
service account) are made directly with the official clients; every assertion reads the sandbox with
google-cloud-compute, not with vmplane's code."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from google.cloud import compute_v1 as c
from tests.helpers import Sandbox

from vmplane.clouds.base import CommandStatus, Context, Tagger
from vmplane.clouds.errors import DeadlineExceededError
from vmplane.clouds.gcp import compute, rotation, templates
from vmplane.clouds.gcp import exec as gcp_exec
from vmplane.clouds.gcp.ids import gcp_ids
from vmplane.clouds.gcp.readiness import SIMULATED_NOTE, wait_bootstrapped
from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig, VMState

REGION, ZONES = "us-central1", ["us-central1-a", "us-central1-b"]


@dataclass
class Env:
    sandbox: Sandbox
    project: str
    gcp: GcpClients
    spec_data: dict[str, Any]
    infra: InfraConfig = field(default_factory=InfraConfig)
    logs: list[str] = field(default_factory=list)
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def ctx(self) -> Context:
        spec = EnvSpec.model_validate(self.spec_data)
        return Context(
            job_id=self.job_id,
            spec=spec,
            infra=self.infra,
            tagger=Tagger.for_spec(spec, self.job_id),
            log=self.logs.append,
        )

    def client(self, cls: type[Any]) -> Any:
        return self.sandbox.gcp_compute(cls)

    def instances(self) -> list[Any]:
        region = self.client(c.RegionsClient).get(project=self.project, region=REGION)
        zones = [z.rsplit("/", 1)[1] for z in region.zones]
        client = self.client(c.InstancesClient)
        return [i for z in zones for i in client.list(project=self.project, zone=z)]

    def templates(self) -> list[Any]:
        return list(self.client(c.RegionInstanceTemplatesClient).list(project=self.project, region=REGION))


def _wait(sandbox: Sandbox, project: str, op: Any) -> None:
    if op.region:
        sandbox.gcp_compute(c.RegionOperationsClient).wait(project=project, region=REGION, operation=op.name)
    else:
        sandbox.gcp_compute(c.GlobalOperationsClient).wait(project=project, operation=op.name)


def make_env(sandbox: Sandbox, pools: dict[str, Any], **extra: Any) -> Env:
    project = f"t-{uuid.uuid4().hex[:12]}"
    net = c.Network(name="demo-net", auto_create_subnetworks=False)
    _wait(sandbox, project, sandbox.gcp_compute(c.NetworksClient).insert_unary(project=project, network_resource=net))
    sub = c.Subnetwork(name="demo-vms", network="global/networks/demo-net", ip_cidr_range="10.50.0.0/20")
    op = sandbox.gcp_compute(c.SubnetworksClient).insert_unary(project=project, region=REGION, subnetwork_resource=sub)
    _wait(sandbox, project, op)
    iam = sandbox.gcp_discovery("iam")
    account = (
        iam.projects()
        .serviceAccounts()
        .create(
            name=f"projects/{project}", body={"accountId": "vmp-demo-abc123", "serviceAccount": {"displayName": "demo"}}
        )
    )
    email = account.execute()["email"]
    data = {
        "name": "demo",
        "org": "acme",
        "provider": {"cloud": "gcp", "project": project, "region": REGION},
        "network": {"zones": 2},
        "pools": pools,
        "bootstrap": {"timeoutSeconds": 10},
        "tags": {"team": "platform"},
        **extra,
    }
    gcp = GcpClients(GcpTarget(project=project, region=REGION, endpoint_url=sandbox.gcp_endpoint))
    env = Env(sandbox, project, gcp, data)
    env.infra.NetworkID, env.infra.VMSubnetIDs, env.infra.Zones = "demo-net", ["demo-vms"], list(ZONES)
    gcp_ids(env.infra).ServiceAccountEmail = email
    return env


@pytest.fixture
def guest_off(sandbox: Sandbox) -> Iterator[None]:
    sandbox.gcp_control("guest", {"mode": "off"})
    try:
        yield
    finally:
        sandbox.gcp_control("guest", {"mode": "auto"})


def assert_shape(env: Env, props: Any) -> None:
    """What every template and every VM must be: no external IP, OS Login, no keys, labels."""
    assert all(not nic.access_configs for nic in props.network_interfaces)
    meta = {i.key: i.value for i in props.metadata.items}
    assert meta["enable-oslogin"] == meta["block-project-ssh-keys"] == meta["enable-guest-attributes"] == "TRUE"
    assert meta["serial-port-enable"] == "FALSE" and "ssh-keys" not in meta
    assert meta["user-data"].startswith("#cloud-config") and "vmplane-mailbox" in meta["user-data"]
    assert props.labels["zop_job_id"] == env.job_id and props.labels["team"] == "platform"


def test_fixed_pool_create_change_rotate_exec_delete(sandbox: Sandbox) -> None:
    env = make_env(sandbox, {"web": {"mode": "fixed", "size": 2}})
    templates.ensure_templates(env.gcp, env.ctx())
    compute.ensure_vms(env.gcp, env.ctx())

    [tpl] = env.templates()
    assert tpl.name == "demo-web-v1"
    assert_shape(env, tpl.properties)
    assert tpl.properties.service_accounts[0].email == gcp_ids(env.infra).ServiceAccountEmail
    assert tpl.properties.disks[0].initialize_params.source_image.startswith(
        "https://www.googleapis.com/compute/v1/projects/ubuntu-os-cloud/global/images/ubuntu-2404-"
    )
    vms = sorted(env.instances(), key=lambda i: i.name)
    assert [(v.name, v.zone.rsplit("/", 1)[1]) for v in vms] == [("demo-web-0", ZONES[0]), ("demo-web-1", ZONES[1])]
    for vm in vms:
        assert vm.status == "RUNNING"
        assert_shape(env, vm)
    assert [(v.Name, v.ID, v.AZ, v.State, v.LaunchTemplateVersion) for v in env.infra.VMs] == [
        ("demo-web-0", "demo-web-0", ZONES[0], VMState.ready, 1),
        ("demo-web-1", "demo-web-1", ZONES[1], VMState.ready, 1),
    ]
    assert all(v.PrivateIP for v in env.infra.VMs)
    assert any(SIMULATED_NOTE in line for line in env.logs)

    # Re-running changes nothing: same template, same VMs.
    templates.ensure_templates(env.gcp, env.ctx())
    compute.ensure_vms(env.gcp, env.ctx())
    assert len(env.templates()) == 1 and len(env.instances()) == 2

    # A disk change is v2: the VMs keep running from v1 and are outdated, nothing is replaced.
    ids_before = {v.name: v.id for v in env.instances()}
    env.spec_data["pools"]["web"]["diskGb"] = 30
    templates.ensure_templates(env.gcp, env.ctx())
    assert sorted(t.name for t in env.templates()) == ["demo-web-v1", "demo-web-v2"]
    assert env.infra.LaunchTemplateVersion == {"web": 2} and len(env.infra.outdated_vms()) == 2
    compute.ensure_vms(env.gcp, env.ctx())
    assert {v.name: v.id for v in env.instances()} == ids_before

    notes = rotation.rotate_pool(env.gcp, env.ctx(), "web")
    assert "replaced 2 VMs" in notes[0]
    after = {v.name: v for v in env.instances()}
    # New instances beside the old ones, under the slot's name plus the template version.
    assert sorted(after) == ["demo-web-0-v2", "demo-web-1-v2"]
    assert all(v.disks and v.status == "RUNNING" for v in after.values())
    assert env.infra.outdated_vms() == [] and all(v.State is VMState.ready for v in env.infra.VMs)
    assert [(v.Name, v.ID) for v in env.infra.VMs] == [("demo-web-0", "demo-web-0-v2"), ("demo-web-1", "demo-web-1-v2")]

    # The exec mailbox with the simulated guest: success, nothing fake in stdout, stderr says why.
    [result] = gcp_exec.run(env.gcp, ["demo-web-0-v2"], ["echo hi"], comment="t", timeout=20)
    assert result.status is CommandStatus.success and result.stdout == ""
    assert result.stderr == gcp_exec.SIMULATED_STDERR
    vm0 = env.client(c.InstancesClient).get(project=env.project, zone=ZONES[0], instance="demo-web-0-v2")
    assert {"user-data", "vmplane-exec", "enable-oslogin"} <= {i.key for i in vm0.metadata.items}
    hint = gcp_exec.session_hint(env.gcp, "demo-web-1-v2")
    assert hint.argv[-3:] == ["--zone", ZONES[1], "--tunnel-through-iap"] and hint.needs == "gcloud"

    compute.delete_vms(env.gcp, env.ctx())
    templates.delete_templates(env.gcp, env.ctx())
    assert env.instances() == [] and env.templates() == [] and env.infra.VMs == []


def test_label_only_change_makes_a_version_without_outdating(sandbox: Sandbox) -> None:
    env = make_env(sandbox, {"web": {"mode": "fixed", "size": 1}})
    templates.ensure_templates(env.gcp, env.ctx())
    compute.ensure_vms(env.gcp, env.ctx())
    env.spec_data["tags"] = {"team": "web"}
    templates.ensure_templates(env.gcp, env.ctx())
    assert env.infra.LaunchTemplateVersion == {"web": 2} and len(env.templates()) == 2
    assert env.infra.outdated_vms() == []
    compute.delete_vms(env.gcp, env.ctx())
    templates.delete_templates(env.gcp, env.ctx())


def test_mig_pool_autoscaler_scale_rotate_delete(sandbox: Sandbox) -> None:
    pool = {"mode": "asg", "min": 1, "desired": 2, "max": 4, "targetCpuPercent": 60}
    env = make_env(sandbox, {"web": pool})
    templates.ensure_templates(env.gcp, env.ctx())
    compute.ensure_vms(env.gcp, env.ctx())

    migs = env.client(c.RegionInstanceGroupManagersClient)
    scalers = env.client(c.RegionAutoscalersClient)
    group = migs.get(project=env.project, region=REGION, instance_group_manager="demo-web-mig")
    assert group.target_size == 2 and group.base_instance_name == "demo-web"
    assert [z.zone.rsplit("/", 1)[1] for z in group.distribution_policy.zones] == ZONES
    assert group.update_policy.max_surge.fixed == 2 and group.update_policy.max_unavailable.fixed == 0
    scaler = scalers.get(project=env.project, region=REGION, autoscaler="demo-web-as")
    assert scaler.target.endswith("/instanceGroupManagers/demo-web-mig")
    policy = scaler.autoscaling_policy
    assert (policy.min_num_replicas, policy.max_num_replicas) == (1, 4)
    assert policy.cpu_utilization.utilization_target == pytest.approx(0.6)
    assert env.infra.ScalingGroupID == {"web": "demo-web-mig"} and gcp_ids(env.infra).Autoscalers == {
        "web": "demo-web-as"
    }
    assert len(env.infra.VMs) == 2 and all(v.State is VMState.ready and v.PrivateIP for v in env.infra.VMs)
    for vm in env.instances():
        assert_shape(env, vm)
    assert any("never scales" in line for line in env.logs)

    # Scale: the autoscaler's bounds patched and the group resized.
    env.spec_data["pools"]["web"].update(desired=3, max=5)
    compute.ensure_vms(env.gcp, env.ctx())
    scaler = scalers.get(project=env.project, region=REGION, autoscaler="demo-web-as")
    assert scaler.autoscaling_policy.max_num_replicas == 5
    assert migs.get(project=env.project, region=REGION, instance_group_manager="demo-web-mig").target_size == 3
    assert len(env.infra.VMs) == 3

    # A new template version is not rolled out by apply; rotate rolls it.
    env.spec_data["pools"]["web"]["instanceType"] = "e2-medium"
    templates.ensure_templates(env.gcp, env.ctx())
    compute.ensure_vms(env.gcp, env.ctx())
    assert len(env.infra.outdated_vms()) == 3
    rotation.rotate_pool(env.gcp, env.ctx(), "web")
    managed = migs.list_managed_instances(project=env.project, region=REGION, instance_group_manager="demo-web-mig")
    assert {m.version.instance_template.rsplit("/", 1)[1] for m in managed} == {"demo-web-v2"}
    assert env.infra.outdated_vms() == [] and len(env.infra.VMs) == 3

    compute.delete_vms(env.gcp, env.ctx())
    templates.delete_templates(env.gcp, env.ctx())
    assert env.instances() == [] and env.templates() == []
    assert list(migs.list(project=env.project, region=REGION)) == []
    assert list(scalers.list(project=env.project, region=REGION)) == []


def test_readiness_times_out_honestly_then_sees_the_guest(sandbox: Sandbox, guest_off: None) -> None:
    env = make_env(sandbox, {"web": {"mode": "fixed", "size": 1}})
    templates.ensure_templates(env.gcp, env.ctx())
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError, match="bootstrap sentinel not seen within 10s on demo-web-0"):
        compute.ensure_vms(env.gcp, env.ctx())
    assert time.monotonic() - started >= 10
    assert env.infra.VMs[0].State is VMState.failed

    sandbox.gcp_control(
        "guest-attributes",
        {
            "project": env.project,
            "zone": ZONES[0],
            "instance": "demo-web-0",
            "namespace": "vmplane",
            "key": "bootstrap",
            "value": "ready",
        },
    )
    env.infra.VMs[0].State = VMState.bootstrap
    wait_bootstrapped(env.gcp, env.ctx())
    assert env.infra.VMs[0].State is VMState.ready
    assert not any(SIMULATED_NOTE in line for line in env.logs)  # a real (test-played) guest said so


def test_exec_mailbox_round_trip_with_the_test_as_guest(sandbox: Sandbox, guest_off: None) -> None:
    env = make_env(sandbox, {"web": {"mode": "fixed", "size": 1}})
    templates.ensure_templates(env.gcp, env.ctx())
    with pytest.raises(DeadlineExceededError):
        compute.ensure_vms(env.gcp, env.ctx())  # nobody reports readiness here; the VM exists
    instances = env.client(c.InstancesClient)
    seen: dict[str, Any] = {}

    def guest() -> None:
        for _ in range(100):
            vm = instances.get(project=env.project, zone=ZONES[0], instance="demo-web-0")
            raw = next((i.value for i in vm.metadata.items if i.key == "vmplane-exec"), None)
            if raw:
                msg = json.loads(raw)
                seen.update(msg, script_text=base64.b64decode(msg["script"]).decode())
                answer = {"exitCode": 2, "stdout": "out\n", "stderr": "bad\n"}
                sandbox.gcp_control(
                    "guest-attributes",
                    {
                        "project": env.project,
                        "zone": ZONES[0],
                        "instance": "demo-web-0",
                        "namespace": "vmplane-exec",
                        "key": msg["id"],
                        "value": json.dumps(answer),
                    },
                )
                return
            time.sleep(0.1)

    thread = threading.Thread(target=guest)
    thread.start()
    [result] = gcp_exec.run(env.gcp, ["demo-web-0"], ["echo a", "false"], comment="t", timeout=30)
    thread.join()
    assert seen["script_text"] == "echo a\nfalse\n" and seen["timeout"] == 30
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (
        CommandStatus.failed,
        2,
        "out\n",
        "bad\n",
    )

    # No answer at all: timed out, saying so.
    [late] = gcp_exec.run(env.gcp, ["demo-web-0"], ["true"], comment="t", timeout=3)
    assert late.status is CommandStatus.timed_out and "no answer" in late.stderr
    compute.delete_vms(env.gcp, env.ctx())
    templates.delete_templates(env.gcp, env.ctx())
