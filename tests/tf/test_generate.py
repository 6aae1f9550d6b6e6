"""`vmplane tf generate`: the managed file set, determinism, user files left alone, and each input in
the file of its impact class (golden: one edited field changes exactly one inputs file)."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest

from vmplane.bootstrap.cloudinit import render_user_data
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec
from vmplane.jobs.service import spec_json
from vmplane.tf.generate import HEADER, SANDBOX_FILE, GenerateError, generate, write
from vmplane.tf.hcl import Block, Expr, Heredoc, quote, render
from vmplane.tf.vmconfig_files import PLACEHOLDER

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
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


@pytest.fixture(params=["fixed.jsonc", "web.jsonc"])
def spec(request: pytest.FixtureRequest) -> EnvSpec:
    return load_spec(EXAMPLES / request.param)


def edited(spec: EnvSpec, change: dict) -> EnvSpec:
    doc = copy.deepcopy(spec_json(spec))
    node = doc
    *parents, leaf = change["path"]
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = change["value"]
    return EnvSpec.model_validate(doc)


def test_the_managed_set_each_with_the_header(spec: EnvSpec) -> None:
    files = generate(spec)
    assert set(files) == MANAGED
    assert all(text.startswith(HEADER) for name, text in files.items() if name.endswith(".tf"))
    assert json.loads(files["vmplane.env.schema.json"])["title"]
    assert SANDBOX_FILE in generate(spec, "http://127.0.0.1:4566")


def test_generating_twice_gives_identical_bytes(spec: EnvSpec, tmp_path: Path) -> None:
    write(generate(spec), tmp_path / "a")
    write(generate(spec), tmp_path / "b")
    for name in MANAGED:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    again = write(generate(spec), tmp_path / "a")
    assert again.written == [] and sorted(again.unchanged) == sorted(MANAGED)


def test_user_files_survive_generate_and_upgrade(spec: EnvSpec, tmp_path: Path) -> None:
    custom = tmp_path / "custom.tf"
    custom.write_text('resource "null_resource" "mine" {}\n')
    tfvars = tmp_path / "terraform.tfvars"
    tfvars.write_text('x = "1"\n')
    os.utime(custom, (1_000_000, 1_000_000))
    write(generate(spec, "http://127.0.0.1:4566"), tmp_path)
    result = write(generate(spec), tmp_path)  # an upgrade without --sandbox
    assert result.removed == [SANDBOX_FILE]  # our own file no longer produced: removed
    assert custom.read_text() == 'resource "null_resource" "mine" {}\n' and custom.stat().st_mtime == 1_000_000
    assert tfvars.read_text() == 'x = "1"\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({*MANAGED, "custom.tf", "terraform.tfvars"})


def test_a_users_file_under_a_managed_name_is_never_overwritten(spec: EnvSpec, tmp_path: Path) -> None:
    mine = tmp_path / "vmplane.env.main.tf"
    mine.write_text("# my own main\n")
    with pytest.raises(GenerateError, match="was not written by vmplane"):
        write(generate(spec), tmp_path)
    assert mine.read_text() == "# my own main\n"


# One edit per impact class, and the only inputs file it may change.
EDITS = [
    ({"path": ["runtime", "env"], "value": {"LOG_LEVEL": "debug"}}, "vmplane.env.inputs.runtime.tf"),
    ({"path": ["pools", "web", "instanceType"], "value": "t3.medium"}, "vmplane.env.inputs.vm.tf"),
    ({"path": ["bootstrap", "mode"], "value": "bare"}, "vmplane.env.inputs.vm.tf"),
    ({"path": ["network", "ingressPorts"], "value": [80, 8080]}, "vmplane.env.inputs.infra.tf"),
    ({"path": ["tags", "owner"], "value": "ops"}, "vmplane.env.inputs.infra.tf"),
    ({"path": ["network", "cidr"], "value": "10.77.0.0/16"}, "vmplane.env.inputs.infra.tf"),
]


@pytest.mark.parametrize(("change", "only"), EDITS, ids=[".".join(c["path"]) for c, _ in EDITS])
def test_one_edit_changes_only_the_inputs_file_of_its_impact(spec: EnvSpec, change: dict, only: str) -> None:
    before, after = generate(spec), generate(edited(spec, change))
    # The .tf files (a manifest copy follows the pools' kind and arch: bootstrap.mode renames it).
    changed = {name for name in before if name.endswith(".tf") and before[name] != after[name]}
    assert changed == {only}


def test_identity_values_sit_in_the_not_changeable_block(spec: EnvSpec) -> None:
    infra = generate(spec)["vmplane.env.inputs.infra.tf"]
    identity = infra[infra.index("NOT changeable in place") :]
    cloud = infra[: infra.index("NOT changeable in place")]
    for field, value in (("cidr", spec.network.cidr), ("name", spec.name), ("region", spec.provider.region)):
        assert re.search(rf'\n\s+{field}\s+= "{re.escape(value)}"\n', identity), field
        assert not re.search(rf'\n\s+{field}\s+= "{re.escape(value)}"\n', cloud), field


def test_user_data_is_embedded_verbatim_with_template_sequences_escaped(spec: EnvSpec) -> None:
    vm = generate(spec)["vmplane.env.inputs.vm.tf"]
    body = vm.split("web = <<USERDATA\n", 1)[1].split("\nUSERDATA\n", 1)[0] + "\n"
    assert body.replace("$${", "${").replace("%%{", "%{") == render_user_data(spec, "web", manifest_content=PLACEHOLDER)
    assert "${" not in body.replace("$${", "")


def test_hcl_writer_aligns_runs_and_escapes_templates() -> None:
    b = Block("locals").attr("a", 1).attr("long_name", "x").attr("m", {"k": "v", "longer": Expr("local.y")})
    b.attr("h", Heredoc("line ${x}\n")).attr("after", True)
    assert render([b]) == (
        "locals {\n"
        "  a         = 1\n"
        '  long_name = "x"\n'
        "  m = {\n"
        '    k      = "v"\n'
        "    longer = local.y\n"
        "  }\n"
        "  h     = <<EOT\n"  # terraform fmt aligns a heredoc with its neighbours: it is one token
        "line $${x}\n"
        "EOT\n"
        "  after = true\n"
        "}\n"
    )
    assert quote('say "${hi}" %{ if }') == '"say \\"$${hi}\\" %%{ if }"'


def test_other_clouds_and_existing_vpcs_are_refused_clearly(spec: EnvSpec) -> None:
    doc = spec_json(spec)
    azure_doc = {**doc, "provider": {"cloud": "azure", "region": "westeurope"}}
    azure_doc.pop("exec", None)  # the exec channel defaults per cloud
    if "loadBalancer" in azure_doc:
        azure_doc["loadBalancer"] = {**azure_doc["loadBalancer"], "certSource": "AzureKeyVault"}
    azure = EnvSpec.model_validate(azure_doc)
    with pytest.raises(GenerateError, match=r"provider\.cloud: tf generate supports aws, gcp, not azure"):
        generate(azure)
    existing = {
        **doc,
        "network": {**doc["network"], "existingVpcId": "vpc-0abc", "existingPrivateSubnetIds": ["subnet-0abc"]},
    }
    with pytest.raises(GenerateError, match=r"network\.existingVpcId"):
        generate(EnvSpec.model_validate(existing))
