"""Rules the handlers enforce while doing the work: deletes of what is in use and quotas fail the
*operation* (compute.delete, compute_instances), and a patch/update without the current fingerprint is
refused (compute.patch, compute_groups)."""

from __future__ import annotations

from vmplane.sandbox.gcp.compute_instances import CPUS_PER_REGION
from vmplane.sandbox.gcp.rules import rule
from vmplane.sandbox.gcp.rules.examples import (
    LB,
    REGION,
    ZONE,
    bs,
    cert,
    delete,
    firewall,
    hc,
    https_proxy,
    mig,
    net,
    patch,
    post,
    rule_,
    sub,
    template,
    urlmap,
    vm,
)

IN_USE = "op RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
_OLD_IN_USE = "a synchronous 400 resourceInUseByAnotherResource"
_TF_NETWORK = "https://github.com/hashicorp/terraform-provider-google/issues/5423"
_KOPS = "https://github.com/kubernetes/kops/issues/13855"
_LEFTOVERS = "https://github.com/genevieve/leftovers/issues/6"
_OPS = "https://cloud.google.com/compute/docs/reference/rest/v1/globalOperations"
_WHERE = "sandbox/gcp/compute.py delete"
_ROUTER = {"name": "r1", "network": "global/networks/n1"}
_GROUP = f"zones/{ZONE}/instanceGroups/g1"

for _id, _summary, _source, _example in (
    (
        "network-firewall",
        "a network a firewall rule still uses",
        _TF_NETWORK,
        (net(), firewall(), delete("/global/networks/n1")),
    ),
    ("network-subnetwork", "a network a subnetwork still uses", _KOPS, (net(), sub(), delete("/global/networks/n1"))),
    (
        "network-router",
        "a network a Cloud Router still uses",
        _KOPS,
        (net(), post(f"/regions/{REGION}/routers", _ROUTER), delete("/global/networks/n1")),
    ),
    (
        "subnetwork-instance",
        "a subnetwork an instance still uses",
        _LEFTOVERS,
        (net(), sub(), vm(), delete(f"/regions/{REGION}/subnetworks/s1")),
    ),
    (
        "subnetwork-template",
        "a subnetwork an instance template still names",
        _LEFTOVERS,
        (net(), sub(), template(), delete(f"/regions/{REGION}/subnetworks/s1")),
    ),
    (
        "template-mig",
        "an instance template a managed instance group still uses",
        _OPS,
        (net(), sub(), template(), mig(), delete("/global/instanceTemplates/t1")),
    ),
    (
        "health-check-backend",
        "a health check a backend service still uses",
        _OPS,
        (hc(), bs(), delete("/global/healthChecks/h1")),
    ),
    (
        "backend-url-map",
        "a backend service a URL map still uses",
        _OPS,
        (hc(), bs(), urlmap(), delete("/global/backendServices/b1")),
    ),
    (
        "url-map-proxy",
        "a URL map a target proxy still uses",
        _OPS,
        (*LB, delete("/global/urlMaps/u1")),
    ),
    (
        "certificate-proxy",
        "an SSL certificate a target HTTPS proxy still uses",
        _OPS,
        (hc(), bs(), urlmap(), cert(), https_proxy(), delete("/global/sslCertificates/c1")),
    ),
    (
        "proxy-rule",
        "a target proxy a forwarding rule still uses",
        _OPS,
        (*LB, rule_(), delete("/global/targetHttpProxies/x1")),
    ),
    ("address-rule", "an address a forwarding rule still uses", _OPS, (*LB, rule_(), delete("/global/addresses/a1"))),
    (
        "instance-group-backend",
        "an instance group a backend service still uses",
        _OPS,
        (
            net(),
            post(f"/zones/{ZONE}/instanceGroups", {"name": "g1", "network": "global/networks/n1"}),
            hc(),
            bs(backends=[{"group": _GROUP}]),
            delete(f"/{_GROUP}"),
        ),
    ),
    (
        "policy-instance",
        "a resource policy an instance still follows",
        _OPS,
        (
            net(),
            sub(),
            post(
                f"/regions/{REGION}/resourcePolicies",
                {
                    "name": "rp1",
                    "instanceSchedulePolicy": {"vmStopSchedule": {"schedule": "0 20 * * *"}, "timeZone": "UTC"},
                },
            ),
            vm(),
            post(
                f"/zones/{ZONE}/instances/vm1/addResourcePolicies",
                {"resourcePolicies": [f"regions/{REGION}/resourcePolicies/rp1"]},
            ),
            delete(f"/regions/{REGION}/resourcePolicies/rp1"),
        ),
    ),
):
    rule(
        f"compute.in-use-{_id}",
        ("compute.*.delete",),
        f"deleting {_summary}: accepted, and the operation fails naming the user; nothing is deleted",
        _source,
        IN_USE,
        _OLD_IN_USE,
        _example,
        where=_WHERE,
    )

rule(
    "compute.quota-cpus-region",
    ("compute.instances.insert",),
    f"an instance that takes the region past its CPUS quota ({CPUS_PER_REGION}): the insert operation fails",
    "https://github.com/mesosphere-backup/terraform-dcos/issues/61",
    "op QUOTA_EXCEEDED",
    "200: no quota at all",
    (
        net(),
        sub(),
        *(vm(f"vm{i}", machineType=f"zones/{ZONE}/machineTypes/e2-standard-4") for i in range(6)),
        vm("vm6", machineType=f"zones/{ZONE}/machineTypes/e2-standard-4"),
    ),
    where="sandbox/gcp/compute_instances.py _quota",
)

FP = "412 conditionNotMet"
_FP_WHERE = "sandbox/gcp/compute.py patch"
_BS_DOC = "https://github.com/ansible-collections/google.cloud/pull/327"
_REF = "https://cloud.google.com/compute/docs/reference/rest/v1/"
_MIGS = f"/regions/{REGION}/instanceGroupManagers/m1"
for _id, _methods, _summary, _source, _example in (
    (
        "fingerprint-backend-service",
        ("compute.backendServices.patch", "compute.backendServices.update"),
        "a backend service patch/update without the current fingerprint",
        _BS_DOC,
        (hc(), bs(), patch("/global/backendServices/b1", {"timeoutSec": 60})),
    ),
    (
        "fingerprint-backend-service-stale",
        ("compute.backendServices.patch", "compute.backendServices.update"),
        "a backend service patch/update with a stale fingerprint",
        _BS_DOC,
        (hc(), bs(), patch("/global/backendServices/b1", {"timeoutSec": 60, "fingerprint": "AAAAAAAAAAA="})),
    ),
    (
        "fingerprint-url-map",
        ("compute.urlMaps.patch", "compute.urlMaps.update"),
        "a URL map patch/update without the current fingerprint",
        _REF + "urlMaps",
        (hc(), bs(), urlmap(), patch("/global/urlMaps/u1", {"defaultService": "global/backendServices/b1"})),
    ),
    (
        "fingerprint-mig",
        ("compute.regionInstanceGroupManagers.patch", "compute.regionInstanceGroupManagers.update"),
        "a managed instance group patch/update without the current fingerprint",
        _REF + "regionInstanceGroupManagers",
        (net(), sub(), template(), mig(), patch(_MIGS, {"targetSize": 1})),
    ),
    (
        "fingerprint-subnetwork",
        ("compute.subnetworks.patch",),
        "a subnetwork patch without the current fingerprint",
        _REF + "subnetworks",
        (net(), sub(), patch(f"/regions/{REGION}/subnetworks/s1", {"description": "x"})),
    ),
):
    rule(f"compute.{_id}", _methods, _summary, _source, FP, "200: the change was applied", _example, where=_FP_WHERE)
