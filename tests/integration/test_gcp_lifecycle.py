"""Issue 10's acceptance on the GCP sandbox through the real CLI: examples/gcp-web.jsonc with its 11
steps, the production shape checked with google-cloud-compute (no external IP, no ingress from the
world, 22 only from IAP or not at all, NAT, labels, the service account's roles), LB detach/attach,
scale, and a destroy that leaves nothing of the job in the project; gcp-fixed.jsonc with exec, a
template change that only flags VMs outdated, rotate, and destroy."""

from __future__ import annotations

import json

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.gcp_inventory import Gcp, ingress, job_resources, records
from tests.integration.test_load_balancer import ELEVEN

pytestmark = pytest.mark.slow  # whole apply/destroy cycles through the CLI: started before the quick tests

IAP = "35.235.240.0/20"
HEALTH = {"35.191.0.0/16", "130.211.0.0/22"}
LB_KINDS = (
    "health_checks",
    "backend_services",
    "url_maps",
    "ssl_certificates",
    "https_proxies",
    "http_proxies",
    "addresses",
    "forwarding_rules",
)


@pytest.fixture
def gcp(sandbox: Sandbox) -> Gcp:
    return Gcp(sandbox.gcp_endpoint)


def assert_private_shape(gcp: Gcp, job_id: str, cidr: str, *, iap: bool) -> dict[str, list[dict]]:
    """The checks every GCP environment must pass, read from the sandbox with the official client."""
    res = job_resources(gcp, job_id)
    (net,) = res["networks"]
    assert net.get("autoCreateSubnetworks", False) is False
    (subnet,) = res["subnetworks"]
    assert subnet["privateIpGoogleAccess"] is True and subnet["network"].endswith(f"/networks/{net['name']}")
    (router,) = res["routers"]
    (nat,) = router["nats"]
    assert (nat["natIpAllocateOption"], nat["sourceSubnetworkIpRangesToNat"]) == (
        "AUTO_ONLY",
        "ALL_SUBNETWORKS_ALL_IP_RANGES",
    )
    assert res["instances"], "no VM of the job in the project"
    for vm in res["instances"]:
        for nic in vm["networkInterfaces"]:
            assert not nic.get("accessConfigs"), f"{vm['name']} has an external IP"
            assert nic["subnetwork"].endswith(f"/subnetworks/{subnet['name']}")
        assert vm["labels"]["zop_job_id"] == job_id.lower() and vm["labels"]["zop_managed_by"] == "vmplane"
        meta = {i["key"]: i.get("value") for i in vm.get("metadata", {}).get("items", [])}
        assert meta["enable-oslogin"] == "TRUE" and meta["block-project-ssh-keys"] == "TRUE"
        assert "ssh-keys" not in meta and "user-data" in meta
        (sa,) = vm["serviceAccounts"]
        assert sa["email"] == res["service_accounts"][0]["email"]
    for template in res["region_templates"] + res["instance_templates"]:
        for nic in template["properties"]["networkInterfaces"]:
            assert not nic.get("accessConfigs")
        assert template["properties"]["labels"]["zop_job_id"] == job_id.lower()
        # The disk type the estimate prices, named (Google's default for E2/N2 would be pd-standard).
        assert template["properties"]["disks"][0]["initializeParams"]["diskType"] == "pd-balanced"
    pairs = ingress(res["firewalls"])
    assert all(src != "0.0.0.0/0" for _, src in pairs), pairs
    assert ("80", cidr) in pairs
    ssh = {src for port, src in pairs if port == "22"}
    assert ssh == ({IAP} if iap else set())
    # The service account may write logs and metrics, nothing more.
    policy = gcp.api("cloudresourcemanager", "v1").projects().getIamPolicy(resource=gcp.project, body={}).execute()
    member = f"serviceAccount:{res['service_accounts'][0]['email']}"
    roles = sorted(b["role"] for b in policy.get("bindings", []) if member in b.get("members", []))
    assert roles == ["roles/logging.logWriter", "roles/monitoring.metricWriter"]
    return res


@pytest.mark.sandbox
def test_gcp_web_example_lb_lifecycle(cli: Cli, sandbox: Sandbox, gcp: Gcp, tmp_path) -> None:
    env_file = write_env(tmp_path, "gtest-web", example="gcp-web.jsonc")
    domain = "gtest-web.sandbox.vmplane.test"
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=300)
    assert job["status"] == "succeeded", job["error"]
    assert [s["name"] for s in job["steps"]] == ELEVEN
    infra, job_id = job["config"]["infra"], job["id"]
    res = assert_private_shape(gcp, job_id, "10.52.0.0/16", iap=True)

    # The neutral fields name the GCP resources.
    (mig,) = res["migs"]
    assert infra["ScalingGroupID"] == {"web": mig["name"]} and mig["targetSize"] == 2
    assert mig["instanceTemplate"].endswith("/" + infra["LaunchTemplateID"]["web"])
    (autoscaler,) = res["autoscalers"]
    assert autoscaler["autoscalingPolicy"]["cpuUtilization"]["utilizationTarget"] == pytest.approx(0.6)
    assert (autoscaler["autoscalingPolicy"]["minNumReplicas"], autoscaler["autoscalingPolicy"]["maxNumReplicas"]) == (
        2,
        4,
    )
    assert len(res["instances"]) == 2 and {v["zone"].rsplit("/", 1)[-1] for v in res["instances"]} == set(
        infra["Zones"]
    )
    assert infra["VMSecurityGroupID"] in {f["name"] for f in res["firewalls"]}

    # The load balancer chain: 443 with the managed certificate, 80 redirected, both on one address.
    (address,) = res["addresses"]
    assert infra["LoadBalancerDNSName"] == address["address"]
    rules = {r["portRange"].split("-")[0]: r for r in res["forwarding_rules"]}
    assert set(rules) == {"443", "80"} and {r["IPAddress"] for r in rules.values()} == {address["address"]}
    assert infra["LoadBalancerID"] == rules["443"]["name"]
    (cert,) = res["ssl_certificates"]
    assert cert["type"] == "MANAGED" and cert["managed"]["domains"] == [domain]
    assert cert["managed"]["status"] == "PROVISIONING"  # the sandbox cannot resolve DNS: said, not faked
    (https,) = res["https_proxies"]
    assert https["sslCertificates"][0].endswith("/" + cert["name"]) and rules["443"]["target"].endswith(https["name"])
    redirect = next(u for u in res["url_maps"] if "defaultUrlRedirect" in u)
    assert redirect["defaultUrlRedirect"]["httpsRedirect"] is True
    (backend,) = res["backend_services"]
    assert backend["loadBalancingScheme"] == "EXTERNAL_MANAGED"
    assert [b["group"].rsplit("/", 1)[-1] for b in backend["backends"]] == [mig["name"]]
    (hc,) = res["health_checks"]
    assert (hc["httpHealthCheck"]["requestPath"], hc["httpHealthCheck"]["port"]) == ("/healthz", 80)
    assert {src for _, src in ingress(res["firewalls"])} >= HEALTH
    (record,) = [r for r in records(gcp, domain) if r["type"] == "A"]
    assert record["rrdatas"] == [address["address"]]
    for labelled in (address, *rules.values()):
        assert labelled["labels"]["zop_job_id"] == job_id.lower()
    log = "\n".join(line for s in job["steps"] for line in s.get("log", []))
    assert "simulated" in log and "PROVISIONING" in log

    # detach: no LB part remains (nor the health-check rule); the VMs keep running.
    vms = sorted(v["name"] for v in res["instances"])
    detached = cli.json("lb", "detach", "gtest-web", "--yes")
    assert detached["status"] == "succeeded", detached["error"]
    after = job_resources(gcp, job_id)
    assert {k: len(after[k]) for k in LB_KINDS} == dict.fromkeys(LB_KINDS, 0)
    assert not records(gcp, domain)
    assert not HEALTH & {src for _, src in ingress(after["firewalls"])}
    assert sorted(v["name"] for v in after["instances"]) == vms

    # attach again: exactly one of each part.
    attached = cli.json("lb", "attach", "gtest-web", "--yes")
    assert attached["status"] == "succeeded", attached["error"]
    again = job_resources(gcp, job_id)
    assert {k: len(again[k]) for k in LB_KINDS} == {
        **dict.fromkeys(LB_KINDS, 1),
        "url_maps": 2,
        "https_proxies": 1,
        "http_proxies": 1,
        "forwarding_rules": 2,
    }
    assert len([r for r in records(gcp, domain) if r["type"] == "A"]) == 1

    # scale: the MIG and its autoscaler change; the running VMs stay.
    scaled = cli.json("scale", "gtest-web", "web", "--min", "2", "--desired", "3", "--max", "5", "--yes")
    assert scaled["status"] == "succeeded", scaled["error"]
    now = job_resources(gcp, job_id)
    assert now["migs"][0]["targetSize"] == 3
    assert now["autoscalers"][0]["autoscalingPolicy"]["maxNumReplicas"] == 5
    names = sorted(v["name"] for v in now["instances"])
    assert len(names) == 3 and set(vms) <= set(names)

    # destroy: nothing of the job remains in the project, DNS record included.
    gone = cli.json("destroy", "--job", job_id, "--yes", "--sandbox", timeout=300)
    assert gone["status"] == "deleted", gone["error"]
    left = {k: [r.get("name", r) for r in v] for k, v in job_resources(gcp, job_id).items() if v}
    assert left == {}
    assert not records(gcp, domain)


@pytest.mark.sandbox
def test_gcp_fixed_exec_update_rotate_destroy(cli: Cli, sandbox: Sandbox, gcp: Gcp, tmp_path) -> None:
    env_file = write_env(tmp_path, "gtest-fixed", example="gcp-fixed.jsonc")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=300)
    assert job["status"] == "succeeded", job["error"]
    assert len(job["steps"]) == 7
    res = assert_private_shape(gcp, job["id"], "10.50.0.0/16", iap=False)
    vms = sorted(v["name"] for v in res["instances"])
    assert vms == ["gtest-fixed-web-0", "gtest-fixed-web-1"]
    assert len({v["zone"] for v in res["instances"]}) == 2  # spread over the zones
    assert {v["Name"]: v["State"] for v in job["config"]["infra"]["VMs"]} == dict.fromkeys(vms, "ready")

    # exec goes through the metadata mailbox; the sandbox's simulated guest runs nothing and says so.
    proc = cli.run("exec", "-o", "json", "gtest-fixed", "gtest-fixed-web-0", "--", "uname", "-a")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["exitCode"] == 0 and out["stdout"] == ""
    assert "simulated" in out["stderr"]
    # Interactive sessions are off for this environment: nothing opens port 22.
    refused = cli.run("exec", "gtest-fixed", "gtest-fixed-web-0", "--interactive")
    assert refused.returncode != 0 and "interactive" in refused.stderr

    # A machine-type change is a vm change: a new template, running VMs only flagged outdated.
    changed = write_env(
        tmp_path, "gtest-fixed", example="gcp-fixed.jsonc", pools={"web": {"mode": "fixed", "size": 2, "diskGb": 30}}
    )
    plan = cli.json("plan", "-f", str(changed), "--sandbox")
    assert {c["path"]: c["impact"] for c in plan["changes"]} == {"pools.web.diskGb": "vm"}
    updated = cli.json("apply", "-f", str(changed), "--sandbox", "--yes")
    assert updated["status"] == "succeeded", updated["error"]
    infra = updated["config"]["infra"]
    assert infra["LaunchTemplateVersion"]["web"] == 2
    assert any("vmplane rotate gtest-fixed" in n for n in updated["config"]["operation"]["notes"])
    ids = {v["name"]: v["id"] for v in job_resources(gcp, job["id"])["instances"]}
    assert sorted(ids) == vms

    rotated = cli.json("rotate", "gtest-fixed", "--yes", timeout=300)
    assert rotated["status"] == "succeeded", rotated["error"]
    now = {v["name"]: v for v in job_resources(gcp, job["id"])["instances"]}
    rotated_names = [f"{n}-v2" for n in vms]  # each replacement ran beside the VM it replaced
    assert sorted(now) == rotated_names
    assert all(now[n]["disks"][0]["diskSizeGb"] == "30" for n in rotated_names)  # built from the new template
    records = rotated["config"]["infra"]["VMs"]
    assert all(v["LaunchTemplateVersion"] == 2 and v["ReplacementID"] is None for v in records)
    assert sorted((v["Name"], v["ID"]) for v in records) == list(zip(vms, rotated_names, strict=True))
    # The slot's name still reaches the VM: exec resolves it through the record.
    again = cli.run("exec", "-o", "json", "gtest-fixed", "gtest-fixed-web-0", "--", "true")
    assert again.returncode == 0 and json.loads(again.stdout)["exitCode"] == 0, again.stderr

    gone = cli.json("destroy", "-f", str(changed), "--sandbox", "--yes", timeout=300)
    assert gone["status"] == "deleted", gone["error"]
    assert not any(job_resources(gcp, job["id"]).values())


def test_gcp_web_lifecycle_with_one_item_pages(cli: Cli, sandbox: Sandbox, gcp: Gcp, tmp_path) -> None:
    """Every compute list answers one item a page (POST /_sandbox/page-size): each vmplane pager must follow
    nextPageToken, or a re-apply would miss what it made and a destroy would leave it behind. The old
    sandbox never paged, so no pager was ever driven past its first page."""
    env_file = write_env(tmp_path, "gtest-pages", example="gcp-web.jsonc")
    sandbox.gcp_control("page-size", {"size": 1})
    try:
        job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=300)
        assert job["status"] == "succeeded", job["error"]
        job_id = job["id"]
        first = job_resources(gcp, job_id)
        assert len(first["firewalls"]) >= 2  # more than one page of what the job made
        again = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=300)
        assert again["status"] == "succeeded", again["error"]
        counts = {k: len(v) for k, v in job_resources(gcp, job_id).items()}
        assert counts == {k: len(v) for k, v in first.items()}  # found across pages: nothing made twice
        gone = cli.json("destroy", "--job", job_id, "--yes", "--sandbox", timeout=300)
        assert gone["status"] == "deleted", gone["error"]
        assert {k: v for k, v in job_resources(gcp, job_id).items() if v} == {}
    finally:
        sandbox.gcp_control("page-size", {"size": 0})
