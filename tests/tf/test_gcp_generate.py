"""`vmplane tf generate` for provider.cloud gcp: the same managed file set and input split as AWS, and the
shape checked on the item model (no HCL parser is a test dependency): no external IPs, no firewall source
0.0.0.0/0, SSH only from IAP (or no rule), Cloud NAT, labels on every resource that takes them, the service
account's two roles. `terraform fmt` checks the text; `terraform validate` cannot run here (see below)."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from vmplane.bootstrap.cloudinit import render_user_data
from vmplane.clouds.gcp.spec import GcpExec
from vmplane.clouds.tags import gcp_labels
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec, spec_json
from vmplane.errors import UsageError
from vmplane.tf.gcp import common, network
from vmplane.tf.gcp.common import GFE_RANGES, IAP_RANGE, label_locals
from vmplane.tf.generate import HEADER, GenerateError, generate, write
from vmplane.tf.hcl import Attr, Block, Expr, Item, render
from vmplane.tf.stacks import STACKS
from vmplane.tf.vmconfig_files import PLACEHOLDER

CASES = Path(__file__).resolve().parent / "cases"
MANAGED = {
    "vmplane.env.main.tf",
    "vmplane.env.roles.tf",
    "vmplane.env.inputs.runtime.tf",
    "vmplane.env.inputs.vm.tf",
    "vmplane.env.inputs.infra.tf",
    "vmplane.env.outputs.tf",
    "vmplane.env.schema.json",
    "vmplane.env.vmconfig.nginx.amd64.json",  # the pools' manifest, read by the user-data
}
# Resources that take `labels` in hashicorp/google 6.x, among those the stack makes.
LABELLED = {
    "google_compute_region_instance_template",
    "google_compute_instance",
    "google_compute_global_address",
    "google_compute_global_forwarding_rule",
    "google_secret_manager_secret",
}
# Neither labels nor a description field: the tag set cannot be written on these.
UNDESCRIBED = {
    "google_compute_router_nat",
    "google_project_iam_member",
    "google_dns_record_set",
    "google_secret_manager_secret_version",
}


@pytest.fixture(params=["gcp-fixed.jsonc", "gcp-web.jsonc"])
def spec(request: pytest.FixtureRequest) -> EnvSpec:
    return load_spec(CASES / request.param)


def blocks(items: list[Item]) -> Iterator[Block]:
    for item in items:
        if isinstance(item, Block):
            yield item
            yield from blocks(item.body)


def attrs(block: Block) -> dict[str, object]:
    return {i.name: i.value for i in block.body if isinstance(i, Attr)}


def resources(spec: EnvSpec, kind: str = "resource") -> dict[tuple[str, str], Block]:
    structure = STACKS[spec.provider.cloud].structure(spec)
    return {
        (b.labels[0], b.labels[1]): b
        for items in structure.values()
        for b in items
        if isinstance(b, Block) and b.type == kind
    }


def test_the_managed_set_each_with_the_header(spec: EnvSpec) -> None:
    files = generate(spec)
    extra = {"vmplane.env.backend.tf"} if spec.state is not None else set()
    assert set(files) == MANAGED | extra
    assert all(text.startswith(HEADER) for name, text in files.items() if name.endswith(".tf"))
    assert 'source  = "hashicorp/google"' in files["vmplane.env.main.tf"]
    assert "Secret Manager" in files["vmplane.env.inputs.runtime.tf"]


def test_generating_twice_gives_identical_bytes(spec: EnvSpec, tmp_path: Path) -> None:
    write(generate(spec), tmp_path / "a")
    write(generate(spec), tmp_path / "b")
    for name in generate(spec):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_no_external_address_and_no_world_source(spec: EnvSpec) -> None:
    files = generate(spec)
    text = "".join(files[n] for n in files if n.endswith(".tf"))
    assert "access_config" not in text
    assert "0.0.0.0/0" not in text and "::/0" not in text
    for (kind, _), block in resources(spec).items():
        if kind in ("google_compute_region_instance_template", "google_compute_instance"):
            nic = next(b for b in block.body if isinstance(b, Block) and b.type == "network_interface")
            assert attrs(nic) == {"subnetwork": Expr("google_compute_subnetwork.vms.id")}


def firewall_rules(spec: EnvSpec) -> dict[str, tuple[object, object]]:
    out = {}
    for (kind, name), block in resources(spec).items():
        if kind == "google_compute_firewall":
            allow = next(b for b in block.body if isinstance(b, Block) and b.type == "allow")
            out[name] = (attrs(block)["source_ranges"], attrs(allow)["ports"])
            assert attrs(block)["target_tags"] == Expr("[local.vm_tag]")
            assert attrs(allow)["protocol"] == "tcp"
    return out


def test_firewall_sources_and_ssh_from_iap_only(spec: EnvSpec) -> None:
    rules = firewall_rules(spec)
    assert rules["allow_iap_ssh"] == ([IAP_RANGE], ["22"])
    assert rules["allow_internal"] == (
        Expr("[local.identity.network.cidr]"),
        Expr("[for p in local.cloud.network.ingressPorts : tostring(p)]"),
    )
    if spec.load_balancer is not None:
        assert rules["allow_lb"] == (sorted(GFE_RANGES), Expr("local.lb_ports"))
    else:
        assert "allow_lb" not in rules
    # ingressPorts never holds 22 (the model refuses it), so only the IAP rule can admit SSH.
    assert set(rules) == {"allow_internal", "allow_iap_ssh"} | ({"allow_lb"} if spec.load_balancer else set())


def test_no_port_22_rule_without_interactive_sessions(spec: EnvSpec) -> None:
    assert common.interactive(spec) is True
    closed = spec.model_copy(update={"exec_": spec.exec_.model_copy(update={"gcp": GcpExec(interactive=False)})})
    assert common.interactive(closed) is False
    rules = firewall_rules(closed)
    assert "allow_iap_ssh" not in rules and all(ports != ["22"] for _, ports in rules.values())
    assert '"22"' not in render(network.firewall(closed, interactive=common.interactive(closed)))


def test_private_subnetwork_and_cloud_nat(spec: EnvSpec) -> None:
    res = resources(spec)
    assert attrs(res["google_compute_network", "this"])["auto_create_subnetworks"] is False
    subnet = attrs(res["google_compute_subnetwork", "vms"])
    assert subnet["private_ip_google_access"] is True
    nat = attrs(res["google_compute_router_nat", "this"])
    assert nat["nat_ip_allocate_option"] == "AUTO_ONLY"
    assert nat["source_subnetwork_ip_ranges_to_nat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"
    assert nat["router"] == Expr("google_compute_router.this.name")


def test_labels_where_the_provider_takes_them_and_the_tag_set_in_descriptions(spec: EnvSpec) -> None:
    res = resources(spec)
    for (kind, name), block in res.items():
        a = attrs(block)
        if kind in LABELLED:
            assert isinstance(a.get("labels"), Expr) and "local.labels" in a["labels"].text, (kind, name)
        elif kind not in UNDESCRIBED:
            assert isinstance(a.get("description"), Expr) and "jsonencode(local.tags)" in a["description"].text, kind
    for kind in ("google_compute_region_instance_template", "google_compute_instance"):
        for block in (b for (k, _), b in res.items() if k == kind):
            disks = [b for b in blocks(block.body) if b.type in ("disk", "initialize_params")]
            assert disks and all("labels" in attrs(d) for d in disks)
    for block in (b for (k, _), b in res.items() if k == "google_compute_region_instance_group_manager"):
        assert any(b.type == "all_instances_config" and "labels" in attrs(b) for b in blocks(block.body))


def test_hardening_on_every_template_and_instance(spec: EnvSpec) -> None:
    vms = [
        b
        for (k, _), b in resources(spec).items()
        if k in ("google_compute_region_instance_template", "google_compute_instance")
    ]
    assert vms
    for block in vms:
        meta = attrs(block)["metadata"]
        assert isinstance(meta, dict)
        assert {k: v for k, v in meta.items() if k != "user-data"} == {
            "enable-oslogin": "TRUE",
            "block-project-ssh-keys": "TRUE",
            "serial-port-enable": "FALSE",
            "enable-guest-attributes": "TRUE",
            "enable-osconfig": "TRUE",
        }
        assert isinstance(meta["user-data"], Expr) and meta["user-data"].text.startswith("local.user_data[")
        shielded = next(b for b in block.body if isinstance(b, Block) and b.type == "shielded_instance_config")
        assert set(attrs(shielded).values()) == {True} and len(attrs(shielded)) == 3
        sa = next(b for b in block.body if isinstance(b, Block) and b.type == "service_account")
        assert attrs(sa)["email"] == Expr("google_service_account.vm.email")


def test_the_service_account_has_exactly_two_roles(spec: EnvSpec) -> None:
    res = resources(spec)
    iam = [k for k in res if "iam" in k[0]]
    assert iam == [("google_project_iam_member", "vm")]
    for_each = attrs(res["google_project_iam_member", "vm"])["for_each"]
    assert for_each == Expr('toset(["roles/logging.logWriter", "roles/monitoring.metricWriter"])')


def test_pools_become_instances_or_groups(spec: EnvSpec) -> None:
    res = resources(spec)
    fixed = any(p.mode == "fixed" for p in spec.pools.values())
    asg = any(p.mode == "asg" for p in spec.pools.values())
    assert (("google_compute_instance", "vm") in res) == fixed
    assert (("google_compute_region_instance_group_manager", "pool") in res) == asg
    assert (("google_compute_region_autoscaler", "pool") in res) == asg
    if asg:
        policy = next(
            b
            for b in res["google_compute_region_instance_group_manager", "pool"].body
            if isinstance(b, Block) and b.type == "update_policy"
        )
        assert attrs(policy)["max_unavailable_fixed"] == 0
        scaler = render([res["google_compute_region_autoscaler", "pool"]])
        assert "target = try(each.value.targetCpuPercent, 60) / 100" in scaler
    if spec.load_balancer is not None:
        for kind in (
            "google_compute_managed_ssl_certificate",
            "google_compute_target_https_proxy",
            "google_dns_record_set",
        ):
            assert any(k == kind for k, _ in res)
        rules = {attrs(b)["port_range"] for (k, _), b in res.items() if k == "google_compute_global_forwarding_rule"}
        assert rules == {"443", "80"}
        assert (("google_compute_instance_group", "fixed") in res) == fixed
        assert ("google_dns_managed_zone", "this") in resources(spec, "data")


def test_a_mig_behind_the_lb_heals_on_its_health_check_as_the_driver_sets_it() -> None:
    """The stack's MIG carries the driver's autohealing (clouds/gcp/autohealing.py): the LB's health check,
    the bootstrap timeout as the initial delay capped at Google's hour; without a load balancer there
    is no health check, so no policy."""
    from vmplane.clouds.gcp.autohealing import MAX_INITIAL_DELAY_SEC

    spec = load_spec(CASES / "gcp-web.jsonc")
    assert spec.load_balancer is not None
    mig = resources(spec)["google_compute_region_instance_group_manager", "pool"]
    [heal] = [b for b in mig.body if isinstance(b, Block) and b.type == "auto_healing_policies"]
    assert render([heal]).split("\n")[1:3] == [
        "  health_check      = google_compute_health_check.this.id",
        f"  initial_delay_sec = min(local.cloud.bootstrap.timeoutSeconds, {MAX_INITIAL_DELAY_SEC})",
    ]
    doc = copy.deepcopy(spec_json(spec))
    del doc["loadBalancer"]
    bare = resources(EnvSpec.model_validate(doc))["google_compute_region_instance_group_manager", "pool"]
    assert not [b for b in bare.body if isinstance(b, Block) and b.type == "auto_healing_policies"]


# One edit per impact class, and the only inputs file it may change.
EDITS = [
    ({"path": ["runtime", "env"], "value": {"LOG_LEVEL": "debug"}}, "vmplane.env.inputs.runtime.tf"),
    ({"path": ["pools", "web", "instanceType"], "value": "e2-medium"}, "vmplane.env.inputs.vm.tf"),
    ({"path": ["pools", "web", "image"], "value": "ubuntu-22.04"}, "vmplane.env.inputs.vm.tf"),
    ({"path": ["network", "ingressPorts"], "value": [80, 9090]}, "vmplane.env.inputs.infra.tf"),
    ({"path": ["tags", "owner"], "value": "ops"}, "vmplane.env.inputs.infra.tf"),
    ({"path": ["network", "cidr"], "value": "10.77.0.0/16"}, "vmplane.env.inputs.infra.tf"),
    ({"path": ["provider", "region"], "value": "europe-west4"}, "vmplane.env.inputs.infra.tf"),
]


def edited(spec: EnvSpec, change: dict[str, object]) -> EnvSpec:
    doc = copy.deepcopy(spec_json(spec))
    node = doc
    *parents, leaf = change["path"]  # type: ignore[misc]
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = change["value"]
    return EnvSpec.model_validate(doc)


@pytest.mark.parametrize(("change", "only"), EDITS, ids=[".".join(c["path"]) for c, _ in EDITS])  # type: ignore[arg-type]
def test_one_edit_changes_only_the_inputs_file_of_its_impact(spec: EnvSpec, change: dict, only: str) -> None:
    before, after = generate(spec), generate(edited(spec, change))
    assert {name for name in before if before[name] != after[name]} == {only}


@pytest.mark.parametrize("path", [["healthCheck", "path"], ["gcp", "dnsZone"], ["domain"]])
def test_load_balancer_edits_change_only_the_infra_inputs(path: list[str]) -> None:
    spec = load_spec(CASES / "gcp-web.jsonc")
    value = {"path": "/ready", "dnsZone": "other-zone", "domain": "www.example.com"}[path[-1]]
    before, after = generate(spec), generate(edited(spec, {"path": ["loadBalancer", *path], "value": value}))
    assert {name for name in before if before[name] != after[name]} == {"vmplane.env.inputs.infra.tf"}


def test_user_data_of_each_pool_is_embedded_verbatim(spec: EnvSpec) -> None:
    vm = generate(spec)["vmplane.env.inputs.vm.tf"]
    for pool in spec.pools:
        # Several pools' heredocs are `=`-aligned (terraform fmt treats each as one line).
        found = re.search(rf"\n +{pool} += <<USERDATA\n(.*?\n)USERDATA\n", vm, re.DOTALL)
        assert found, pool
        body = found.group(1)
        assert body.replace("$${", "${").replace("%%{", "%{") == render_user_data(
            spec, pool, manifest_content=PLACEHOLDER
        )


def test_gcs_backend_under_the_environments_path() -> None:
    spec = load_spec(CASES / "gcp-web.jsonc")
    backend = generate(spec)["vmplane.env.backend.tf"]
    assert 'backend "gcs" {' in backend
    assert 'bucket = "acme-tf-state"' in backend and 'prefix = "vmplane/acme/demo-web"' in backend


def test_what_the_stack_cannot_express_is_refused_naming_the_field() -> None:
    doc = spec_json(load_spec(CASES / "gcp-fixed.jsonc"))
    existing = {**doc, "network": {**doc["network"], "existingVpcId": "shared", "existingPrivateSubnetIds": ["vms"]}}
    with pytest.raises(GenerateError, match=r"network\.existingVpcId \(existingNetwork\)"):
        generate(EnvSpec.model_validate(existing))
    long = {**doc, "name": "a" * 32, "pools": {"b" * 30: doc["pools"]["web"]}}
    with pytest.raises(GenerateError, match=r"pools\.b+: .* 63 characters"):
        generate(EnvSpec.model_validate(long))
    with pytest.raises(GenerateError, match=r"state\.region"):
        generate(EnvSpec.model_validate({**doc, "state": {"bucket": "acme-tf-state", "region": "eu"}}))
    with pytest.raises(UsageError, match="--sandbox"):
        generate(load_spec(CASES / "gcp-fixed.jsonc"), "http://127.0.0.1:4566")


def terraform() -> str:
    found = shutil.which("terraform") or shutil.which("tofu")
    if not found:
        pytest.skip("neither terraform nor tofu is on PATH")
    return found


def run(exe: str, cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")} | {"CHECKPOINT_DISABLE": "1"}
    return subprocess.run(
        [exe, *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=120, check=False
    )


def test_fmt_clean(spec: EnvSpec, tmp_path: Path) -> None:
    exe = terraform()
    write(generate(spec), tmp_path)
    proc = run(exe, tmp_path, "fmt", "-check", "-diff")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_labels_fold_in_hcl_as_clouds_tags_folds_them(tmp_path: Path) -> None:
    """The stack folds tags into labels in HCL (so a tag edit stays in the inputs); evaluate that HCL
    with `terraform console` (locals only: no provider needed) and compare with gcp_labels."""
    exe = terraform()
    doc = spec_json(load_spec(CASES / "gcp-fixed.jsonc"))
    tags = {"costCenter": "CC-1234", "Team Name": "Platform/Ops", "9lives": "x", "__x__": "Ünïcode ok"}
    spec = EnvSpec.model_validate({**doc, "tags": tags})
    files = generate(spec)
    (tmp_path / "inputs.tf").write_text(files["vmplane.env.inputs.infra.tf"])
    loc = Block("locals").attr("prefix", Expr("local.identity.tagPrefix"))
    loc.attr("stack_id", Expr('"tf-${local.identity.org}-${local.identity.name}"'))
    loc.attr("role_key", Expr('"${local.prefix}role"'))
    for name, value in label_locals().items():
        loc.attr(name, value)
    (tmp_path / "labels.tf").write_text(render([loc]))
    proc = run(exe, tmp_path, "console", stdin="jsonencode([local.labels, local.role_label])\n")
    assert proc.returncode == 0, proc.stderr
    got, role = json.loads(json.loads(proc.stdout.strip().splitlines()[-1]))
    expected = gcp_labels(
        {
            **tags,
            "zop:orgId": spec.org,
            "zop:jobId": f"tf-{spec.org}-{spec.name}",
            "zop:managedBy": "vmplane",
            "zop:env": spec.name,
        }
    )
    assert got == expected and role == "zop_role"


def test_validates_offline_where_the_google_provider_is_mirrored(spec: EnvSpec, tmp_path: Path) -> None:
    """`terraform validate` needs the google provider's schema. This machine's provider mirror holds only
    hashicorp/aws and there is no network registry, so here it skips with that reason."""
    from tests.helpers import terraform_env

    mirror = Path(os.environ.get("VMPLANE_TF_MIRROR") or "/opt/tf-plugins") / "registry.terraform.io"
    if not (mirror / "hashicorp" / "google").is_dir():
        pytest.skip(f"terraform validate on the GCP stack needs hashicorp/google, which {mirror} does not hold")
    env, why = terraform_env(tmp_path)
    if env is None:
        pytest.skip(why)
    write(generate(spec), tmp_path / "stack")
    for args in (["init", "-input=false", "-backend=false"], ["validate", "-no-color"]):
        proc = subprocess.run(
            ["terraform", *args], cwd=tmp_path / "stack", env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
