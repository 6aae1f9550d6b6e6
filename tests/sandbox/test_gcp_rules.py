"""What the GCP sandbox refuses, as Google would: fields and values the discovery documents do not allow,
bad path parameters and query parameters, and the hand-written rules (names, references, in-use deletes,
labels, fingerprints, requestId)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.cloud import compute_v1 as c
from tests.sandbox.conftest import Gcp, boot_disk

REGION = "us-central1"


def raw(gcp: Gcp, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{gcp.sandbox.gcp_endpoint}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def network(gcp: Gcp, name: str = "n1") -> None:
    gcp.wait(
        gcp.networks.insert_unary(
            project=gcp.project, network_resource=c.Network(name=name, auto_create_subnetworks=False)
        )
    )


def subnet(gcp: Gcp, name: str, cidr: str, net: str = "n1") -> Any:
    sub = c.Subnetwork(name=name, network=f"global/networks/{net}", ip_cidr_range=cidr)
    return gcp.subnetworks.insert_unary(project=gcp.project, region=REGION, subnetwork_resource=sub)


def test_unknown_field_is_refused_in_googles_shape(gcp: Gcp) -> None:
    status, body = raw(
        gcp,
        "POST",
        f"/compute/v1/projects/{gcp.project}/global/networks",
        {"name": "x", "autoCreateSubnetworks": False, "colour": "red"},
    )
    assert status == 400
    err = body["error"]
    assert err["status"] == "INVALID_ARGUMENT" and err["errors"][0]["reason"] == "invalid"
    assert err["message"] == "Invalid JSON payload received. Unknown name \"colour\" at 'resource': Cannot find field."
    status, body = raw(gcp, "POST", f"/compute/v1/projects/{gcp.project}/global/networks", {"name": "x", "mtu": "big"})
    assert status == 400 and "resource.mtu" in body["error"]["message"]


def test_enum_value_outside_the_document_is_refused_through_the_client(gcp: Gcp) -> None:
    scaler = c.Autoscaler(
        name="a",
        target="regions/us-central1/instanceGroupManagers/m",
        autoscaling_policy=c.AutoscalingPolicy(mode="SCALE_DOWN_ONLY", max_num_replicas=2),
    )
    with pytest.raises(gexc.BadRequest, match="SCALE_DOWN_ONLY"):
        gcp.region_autoscalers.insert_unary(project=gcp.project, region=REGION, autoscaler_resource=scaler)


def test_path_pattern_unknown_query_unknown_route(gcp: Gcp) -> None:
    assert raw(gcp, "GET", "/compute/v1/projects/My_Proj/global/networks")[0] == 400
    status, body = raw(gcp, "GET", f"/compute/v1/projects/{gcp.project}/global/networks?colour=red")
    assert status == 400 and "colour" in body["error"]["message"]
    status, body = raw(gcp, "PUT", f"/compute/v1/projects/{gcp.project}/global/networks")
    assert status == 404 and body["error"]["status"] == "NOT_FOUND"
    assert raw(gcp, "GET", f"/compute/v1/projects/{gcp.project}/global/networks?filter=name%20%3D%20%22x%22")[0] == 200


def test_names_duplicates_references_and_in_use(gcp: Gcp) -> None:
    bad = c.Network(name="Bad_Name!", auto_create_subnetworks=False)
    with pytest.raises(gexc.BadRequest, match=r"resource\.name"):
        gcp.networks.insert_unary(project=gcp.project, network_resource=bad)
    network(gcp)
    with pytest.raises(gexc.Conflict, match="already exists"):
        network(gcp)
    with pytest.raises(gexc.BadRequest, match="referenced network resource cannot be found"):
        subnet(gcp, "s0", "10.0.0.0/24", net="missing")
    gcp.wait(subnet(gcp, "s1", "10.0.0.0/24"))
    with pytest.raises(gexc.BadRequest, match="conflicts with existing subnetwork 's1'"):
        subnet(gcp, "s2", "10.0.0.128/25")
    with pytest.raises(gexc.BadRequest, match="Invalid IPCidrRange"):
        subnet(gcp, "s3", "10.0.0.1/24")
    # the old sandbox answered a synchronous 400 resourceInUseByAnotherResource; Google fails the operation
    code, message = gcp.failure(gcp.networks.delete_unary(project=gcp.project, network="n1"))
    assert code == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
    assert message.endswith(f"is already being used by 'projects/{gcp.project}/regions/{REGION}/subnetworks/s1'")
    assert gcp.networks.get(project=gcp.project, network="n1").name == "n1"  # not deleted
    with pytest.raises(gexc.NotFound):
        gcp.networks.get(project=gcp.project, network="nope")
    found = list(
        gcp.subnetworks.list(c.ListSubnetworksRequest(project=gcp.project, region=REGION, filter='name = "s1"'))
    )
    assert [s.name for s in found] == ["s1"] and found[0].network == gcp.link("global/networks/n1")
    assert (
        list(gcp.subnetworks.list(c.ListSubnetworksRequest(project=gcp.project, region=REGION, filter="name eq s9.*")))
        == []
    )


def test_operation_running_then_done_and_request_id_idempotent(gcp: Gcp) -> None:
    req = c.InsertNetworkRequest(
        project=gcp.project,
        network_resource=c.Network(name="n1", auto_create_subnetworks=False),
        request_id=str(uuid.uuid4()),
    )
    op = gcp.networks.insert_unary(request=req)
    assert op.status == c.Operation.Status.RUNNING and op.operation_type == "insert"
    assert op.target_link == gcp.link("global/networks/n1") and int(op.id) > 0
    again = gcp.networks.insert_unary(request=req)  # a retry with the same requestId: no second resource
    assert again.name == op.name
    assert gcp.global_operations.get(project=gcp.project, operation=op.name).status == c.Operation.Status.DONE
    assert [n.name for n in gcp.networks.list(project=gcp.project)] == ["n1"]
    listed = gcp.global_operations.list(project=gcp.project)
    assert op.name in {o.name for o in listed}


def _instance(gcp: Gcp, labels: dict[str, str] | None = None) -> c.Instance:
    network(gcp)
    gcp.wait(subnet(gcp, "s1", "10.1.0.0/24"))
    vm = c.Instance(
        name="vm-1",
        machine_type="zones/us-central1-a/machineTypes/e2-micro",
        labels=labels or {},
        disks=[
            c.AttachedDisk(
                boot=True,
                initialize_params=c.AttachedDiskInitializeParams(
                    source_image="projects/debian-cloud/global/images/family/debian-12"
                ),
            )
        ],
        network_interfaces=[c.NetworkInterface(subnetwork="regions/us-central1/subnetworks/s1")],
    )
    op = gcp.instances.insert_unary(project=gcp.project, zone="us-central1-a", instance_resource=vm)
    got = gcp.instances.get(project=gcp.project, zone="us-central1-a", instance="vm-1")
    assert got.status == "RUNNING"  # reading the instance completes its insert (Google is long done)
    assert (
        gcp.zone_operations.get(project=gcp.project, zone="us-central1-a", operation=op.name).status
        == c.Operation.Status.DONE
    )
    return got


def test_labels_and_fingerprints(gcp: Gcp) -> None:
    vm = _instance(gcp, {"zop_org_id": "acme"})
    assert vm.network_interfaces[0].network_i_p == "10.1.0.2"
    zone = "us-central1-a"
    stale = c.InstancesSetLabelsRequest(labels={"a": "b"}, label_fingerprint="AAAAAAAAAAA=")
    with pytest.raises(gexc.PreconditionFailed) as info:
        gcp.instances.set_labels_unary(
            project=gcp.project, zone=zone, instance="vm-1", instances_set_labels_request_resource=stale
        )
    assert info.value.errors[0]["reason"] == "conditionNotMet"
    for bad in ({"Zop:Org": "x"}, {"ok": "UPPER"}, {f"k{i}": "v" for i in range(65)}):
        req = c.InstancesSetLabelsRequest(labels=bad, label_fingerprint=vm.label_fingerprint)
        with pytest.raises(gexc.BadRequest):
            gcp.instances.set_labels_unary(
                project=gcp.project, zone=zone, instance="vm-1", instances_set_labels_request_resource=req
            )
    ok = c.InstancesSetLabelsRequest(
        labels={"zop_org_id": "acme", "zop_job_id": "j-1"}, label_fingerprint=vm.label_fingerprint
    )
    gcp.wait(
        gcp.instances.set_labels_unary(
            project=gcp.project, zone=zone, instance="vm-1", instances_set_labels_request_resource=ok
        )
    )
    assert [
        i.name
        for i in gcp.instances.list(
            c.ListInstancesRequest(project=gcp.project, zone=zone, filter='labels.zop_job_id = "j-1"')
        )
    ] == ["vm-1"]
    assert (
        list(
            gcp.instances.list(
                c.ListInstancesRequest(project=gcp.project, zone=zone, filter="labels.zop_job_id = other")
            )
        )
        == []
    )
    stale_md = c.Metadata(items=[c.Items(key="a", value="b")], fingerprint="AAAAAAAAAAA=")
    with pytest.raises(gexc.PreconditionFailed):
        gcp.instances.set_metadata_unary(project=gcp.project, zone=zone, instance="vm-1", metadata_resource=stale_md)
    with pytest.raises(gexc.PreconditionFailed):
        gcp.instances.set_tags_unary(
            project=gcp.project,
            zone=zone,
            instance="vm-1",
            tags_resource=c.Tags(items=["x"], fingerprint="AAAAAAAAAAA="),
        )
    gcp.wait(gcp.instances.stop_unary(project=gcp.project, zone=zone, instance="vm-1"))
    assert gcp.instances.get(project=gcp.project, zone=zone, instance="vm-1").status == "TERMINATED"
    gcp.wait(gcp.instances.start_unary(project=gcp.project, zone=zone, instance="vm-1"))
    assert gcp.instances.get(project=gcp.project, zone=zone, instance="vm-1").status == "RUNNING"


def test_instance_references_must_exist(gcp: Gcp) -> None:
    network(gcp)
    gcp.wait(subnet(gcp, "s1", "10.1.0.0/24"))
    base = {
        "name": "vm-x",
        "machineType": "zones/us-central1-a/machineTypes/e2-micro",
        "disks": [
            {"boot": True, "initializeParams": {"sourceImage": "projects/debian-cloud/global/images/family/debian-12"}}
        ],
        "networkInterfaces": [{"subnetwork": "regions/us-central1/subnetworks/s1"}],
    }
    path = f"/compute/v1/projects/{gcp.project}/zones/us-central1-a/instances"
    for change, where in (
        ({"serviceAccounts": [{"email": f"ghost@{gcp.project}.iam.gserviceaccount.com"}]}, "serviceAccounts[0].email"),
        (
            {"networkInterfaces": [{"subnetwork": "regions/us-central1/subnetworks/none"}]},
            "networkInterfaces[0].subnetwork",
        ),
        ({"machineType": "zones/us-central1-a/machineTypes/huge-1"}, "machineType"),
        (
            {
                "networkInterfaces": [
                    {"subnetwork": "regions/us-central1/subnetworks/s1", "accessConfigs": [{"flavour": "x"}]}
                ]
            },
            "accessConfigs[0]",
        ),
    ):
        status, body = raw(gcp, "POST", path, {**base, **change})
        assert status == 400 and where in body["error"]["message"], body


def test_template_in_use_by_a_mig_is_not_deleted(gcp: Gcp) -> None:
    network(gcp)
    gcp.wait(subnet(gcp, "s1", "10.2.0.0/24"))
    props = c.InstanceProperties(
        disks=[boot_disk()],
        machine_type="e2-small",
        network_interfaces=[c.NetworkInterface(subnetwork="regions/us-central1/subnetworks/s1")],
    )
    gcp.wait(
        gcp.instance_templates.insert_unary(
            project=gcp.project, instance_template_resource=c.InstanceTemplate(name="t1", properties=props)
        )
    )
    mig = c.InstanceGroupManager(
        name="m1", base_instance_name="m1", instance_template="global/instanceTemplates/t1", target_size=1
    )
    gcp.wait(
        gcp.region_instance_group_managers.insert_unary(
            project=gcp.project, region=REGION, instance_group_manager_resource=mig
        )
    )
    code, message = gcp.failure(gcp.instance_templates.delete_unary(project=gcp.project, instance_template="t1"))
    assert code == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE" and "instanceGroupManagers/m1" in message
    with pytest.raises(gexc.BadRequest, match="referenced instanceTemplate resource cannot be found"):
        missing = c.InstanceGroupManager(
            name="m2", base_instance_name="m2", instance_template="global/instanceTemplates/none", target_size=1
        )
        gcp.region_instance_group_managers.insert_unary(
            project=gcp.project, region=REGION, instance_group_manager_resource=missing
        )


def test_response_self_validation_catches_a_gcplocal_style_operation() -> None:
    from vmplane.sandbox.gcp import discovery
    from vmplane.sandbox.gcp.errors import ApiError
    from vmplane.sandbox.gcp.schema import check_response

    schemas = discovery.get().apis["compute"].schemas
    good = {"kind": "compute#operation", "id": "123", "name": "operation-1", "status": "DONE"}
    check_response(schemas, "Operation", good)
    for bad, where in (
        ({**good, "id": "e27e06d9"}, "response.id"),  # gcplocal's 8 hex characters
        ({**good, "id": 123}, "response.id"),  # a number where proto3 JSON wants a string of digits
        ({**good, "status": "FINISHED"}, "response.status"),
        ({**good, "colour": "red"}, "colour"),
        ({**good, "warnings": [{"data": [{"key": 1}]}]}, "response.warnings[0].data[0].key"),
    ):
        with pytest.raises(ApiError) as info:
            check_response(schemas, "Operation", bad)
        assert info.value.code == 500 and where in info.value.message
