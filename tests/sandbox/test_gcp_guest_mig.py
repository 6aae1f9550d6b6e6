"""MIGs (create, resize, rolling template replacement), the simulated guest (auto/off), the exec
mailbox, and the certificate activation hook."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator

import pytest
from google.api_core import exceptions as gexc
from google.cloud import compute_v1 as c
from tests.sandbox.conftest import Gcp, boot_disk

REGION, ZONE = "us-central1", "us-central1-a"


def _base(gcp: Gcp, guest: bool = True) -> None:
    p = gcp.project
    gcp.wait(gcp.networks.insert_unary(project=p, network_resource=c.Network(name="n", auto_create_subnetworks=False)))
    sub = c.Subnetwork(name="s", network="global/networks/n", ip_cidr_range="10.3.0.0/24")
    gcp.wait(gcp.subnetworks.insert_unary(project=p, region=REGION, subnetwork_resource=sub))
    items = [c.Items(key="enable-guest-attributes", value="TRUE")] if guest else []
    for name in ("t1", "t2"):
        props = c.InstanceProperties(
            disks=[boot_disk()],
            machine_type="e2-small",
            labels={"zop_role": name},
            metadata=c.Metadata(items=items),
            network_interfaces=[c.NetworkInterface(subnetwork="regions/us-central1/subnetworks/s")],
        )
        tpl = c.InstanceTemplate(name=name, properties=props)
        gcp.wait(gcp.region_instance_templates.insert_unary(project=p, region=REGION, instance_template_resource=tpl))


def _managed(gcp: Gcp) -> list[c.ManagedInstance]:
    return list(
        gcp.region_instance_group_managers.list_managed_instances(
            project=gcp.project, region=REGION, instance_group_manager="m"
        )
    )


def test_mig_create_resize_and_rolling_replacement(gcp: Gcp) -> None:
    _base(gcp)
    p, migs = gcp.project, gcp.region_instance_group_managers
    mig = c.InstanceGroupManager(
        name="m",
        base_instance_name="web",
        versions=[c.InstanceGroupManagerVersion(instance_template=f"regions/{REGION}/instanceTemplates/t1")],
        target_size=3,
    )
    gcp.wait(migs.insert_unary(project=p, region=REGION, instance_group_manager_resource=mig))
    managed = _managed(gcp)
    assert len(managed) == 3 and all(re.fullmatch(r"web-[a-z0-9]{4}", m.name) for m in managed)
    assert len({m.instance.split("/zones/")[1].split("/")[0] for m in managed}) == 3  # spread over the zones
    vm = gcp.instances.get(project=p, zone=managed[0].instance.split("/")[-3], instance=managed[0].name)
    assert vm.labels == {"zop_role": "t1"} and vm.status == "RUNNING"
    gcp.wait(migs.resize_unary(project=p, region=REGION, instance_group_manager="m", size=5))
    assert len(_managed(gcp)) == 5
    gcp.wait(migs.resize_unary(project=p, region=REGION, instance_group_manager="m", size=2))
    assert len(_managed(gcp)) == 2

    set_tpl = c.RegionInstanceGroupManagersSetTemplateRequest(
        instance_template=f"regions/{REGION}/instanceTemplates/t2"
    )
    gcp.wait(
        migs.set_instance_template_unary(
            project=p,
            region=REGION,
            instance_group_manager="m",
            region_instance_group_managers_set_template_request_resource=set_tpl,
        )
    )
    assert {m.version.instance_template.rsplit("/", 1)[1] for m in _managed(gcp)} == {"t1"}  # only new VMs use it
    rolled = c.InstanceGroupManager(
        versions=[c.InstanceGroupManagerVersion(instance_template=f"regions/{REGION}/instanceTemplates/t2")],
        update_policy=c.InstanceGroupManagerUpdatePolicy(
            type_="PROACTIVE", max_surge=c.FixedOrPercent(fixed=4), max_unavailable=c.FixedOrPercent(fixed=0)
        ),
        fingerprint=migs.get(project=p, region=REGION, instance_group_manager="m").fingerprint,
    )
    before = {m.name for m in _managed(gcp)}
    gcp.wait(
        migs.patch_unary(project=p, region=REGION, instance_group_manager="m", instance_group_manager_resource=rolled)
    )
    after = _managed(gcp)
    assert {m.version.instance_template.rsplit("/", 1)[1] for m in after} == {"t2"} and len(after) == 2
    assert not before & {m.name for m in after}
    assert migs.get(project=p, region=REGION, instance_group_manager="m").instance_template.endswith("/t2")
    code, _ = gcp.failure(gcp.region_instance_templates.delete_unary(project=p, region=REGION, instance_template="t2"))
    assert code == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
    gcp.wait(migs.delete_unary(project=p, region=REGION, instance_group_manager="m"))
    assert [
        i
        for z in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")
        for i in gcp.instances.list(project=p, zone=z)
    ] == []


def _vm(gcp: Gcp, guest: bool = True) -> None:
    _base(gcp, guest)
    src = gcp.region_instance_templates.get(project=gcp.project, region=REGION, instance_template="t1").properties
    vm = c.Instance(
        disks=[boot_disk()],
        name="vm",
        machine_type=f"zones/{ZONE}/machineTypes/e2-small",
        metadata=src.metadata,
        network_interfaces=src.network_interfaces,
    )
    gcp.wait(gcp.instances.insert_unary(project=gcp.project, zone=ZONE, instance_resource=vm))


def _attributes(gcp: Gcp, path: str = "vmplane/") -> dict[str, str]:
    req = c.GetGuestAttributesInstanceRequest(project=gcp.project, zone=ZONE, instance="vm", query_path=path)
    got = gcp.instances.get_guest_attributes(req)
    return {f"{i.namespace}/{i.key}": i.value for i in got.query_value.items}


def _exec(gcp: Gcp, exec_id: str) -> None:
    vm = gcp.instances.get(project=gcp.project, zone=ZONE, instance="vm")
    script = base64.b64encode(b"docker ps").decode()
    items = [
        *vm.metadata.items,
        c.Items(key="vmplane-exec", value=json.dumps({"id": exec_id, "script": script, "timeout": 60})),
    ]
    md = c.Metadata(items=items, fingerprint=vm.metadata.fingerprint)
    gcp.wait(gcp.instances.set_metadata_unary(project=gcp.project, zone=ZONE, instance="vm", metadata_resource=md))


@pytest.fixture
def guest_off(gcp: Gcp) -> Iterator[None]:
    gcp.sandbox.gcp_control("guest", {"mode": "off"})
    yield
    gcp.sandbox.gcp_control("guest", {"mode": "auto"})


def test_simulated_guest_signals_ready_and_answers_exec(gcp: Gcp) -> None:
    _vm(gcp)
    assert _attributes(gcp) == {"vmplane/bootstrap": "ready", "vmplane/simulated": "true"}
    _exec(gcp, "ab12")
    answer = json.loads(_attributes(gcp, "vmplane-exec/")["vmplane-exec/ab12"])
    assert answer == {"exitCode": 0, "stdout": "", "stderr": "", "simulated": True}


def test_without_guest_attributes_enabled_nothing_is_written(gcp: Gcp) -> None:
    _vm(gcp, guest=False)
    with pytest.raises(gexc.NotFound):
        _attributes(gcp)


@pytest.mark.usefixtures("guest_off")
def test_guest_off_lets_the_test_play_the_guest(gcp: Gcp) -> None:
    _vm(gcp)
    with pytest.raises(gexc.NotFound):
        _attributes(gcp)
    _exec(gcp, "cd34")
    with pytest.raises(gexc.NotFound):
        _attributes(gcp, "vmplane-exec/")
    result = json.dumps({"exitCode": 3, "stdout": "out", "stderr": "err"})
    for ns, key, value in (("vmplane", "bootstrap", "ready"), ("vmplane-exec", "cd34", result)):
        body = {"project": gcp.project, "zone": ZONE, "instance": "vm", "namespace": ns, "key": key, "value": value}
        gcp.sandbox.gcp_control("guest-attributes", body)
    assert _attributes(gcp) == {"vmplane/bootstrap": "ready"}
    assert json.loads(_attributes(gcp, "vmplane-exec/cd34")["vmplane-exec/cd34"])["exitCode"] == 3


def test_managed_certificate_activates_only_when_told(gcp: Gcp) -> None:
    cert = c.SslCertificate(
        name="cert", type_="MANAGED", managed=c.SslCertificateManagedSslCertificate(domains=["a.sandbox.vmplane.test"])
    )
    gcp.wait(gcp.ssl_certificates.insert_unary(project=gcp.project, ssl_certificate_resource=cert))
    assert gcp.ssl_certificates.get(project=gcp.project, ssl_certificate="cert").managed.status == "PROVISIONING"
    gcp.sandbox.gcp_control("certificates/activate", {"project": gcp.project, "name": "cert"})
    got = gcp.ssl_certificates.get(project=gcp.project, ssl_certificate="cert")
    assert got.managed.status == "ACTIVE" and got.managed.domain_status == {"a.sandbox.vmplane.test": "ACTIVE"}


def test_instance_from_a_template_and_the_aggregated_list(gcp: Gcp) -> None:
    _base(gcp)
    p = gcp.project
    req = c.InsertInstanceRequest(
        project=p,
        zone=ZONE,
        instance_resource=c.Instance(name="vm-0", labels={"zop_role": "override"}),
        source_instance_template=f"projects/{p}/regions/{REGION}/instanceTemplates/t2",
    )
    gcp.wait(gcp.instances.insert_unary(request=req))
    vm = gcp.instances.get(project=p, zone=ZONE, instance="vm-0")
    assert vm.machine_type.endswith("/zones/us-central1-a/machineTypes/e2-small")  # from the template
    assert vm.labels == {"zop_role": "override"}  # the body wins
    meta = {i.key: i.value for i in vm.metadata.items}
    assert meta["instance-template"] == f"projects/{p}/regions/{REGION}/instanceTemplates/t2"
    assert (
        vm.network_interfaces[0].subnetwork.endswith("/subnetworks/s") and not vm.network_interfaces[0].access_configs
    )
    with pytest.raises(gexc.BadRequest, match="instanceTemplate resource cannot be found"):
        bad = c.InsertInstanceRequest(
            project=p,
            zone=ZONE,
            instance_resource=c.Instance(name="vm-1"),
            source_instance_template="global/instanceTemplates/nope",
        )
        gcp.instances.insert_unary(request=bad)

    agg = gcp.instances.aggregated_list(request=c.AggregatedListInstancesRequest(project=p, filter='name = "vm-0"'))
    found = {zone: [i.name for i in scoped.instances] for zone, scoped in agg if scoped.instances}
    assert found == {f"zones/{ZONE}": ["vm-0"]}
