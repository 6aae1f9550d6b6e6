import subprocess
import sys
from pathlib import Path

import pytest

from vmplane.envspec.load import SpecError, SpecIssue, load_spec, parse_spec_text
from vmplane.envspec.models import AsgPool, EnvSpec, FixedPool
from vmplane.envspec.starter import render_starter

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fixed.jsonc"


def spec_text(pools: str = '"web": { "mode": "fixed", "size": 2 }', extra: str = "") -> str:
    """A valid spec whose pools start on line 5; `extra` members go on line 6."""
    return f"""{{
  "name": "demo",
  "org": "acme",
  "provider": {{ "cloud": "aws", "region": "us-east-1" }},
  "pools": {{ {pools} }},
  {extra}
}}
"""


def issues_of(text: str) -> list[SpecIssue]:
    with pytest.raises(SpecError) as exc:
        parse_spec_text(text, "env.jsonc")
    return exc.value.issues


def only_issue(text: str) -> SpecIssue:
    issues = issues_of(text)
    assert len(issues) == 1, issues
    return issues[0]


# -- valid files ---------------------------------------------------------------------------------


def test_example_file_loads():
    spec = load_spec(EXAMPLE)
    assert isinstance(spec, EnvSpec)
    assert spec.name == "demo-fixed"
    assert spec.schema_ == "./vmplane.env.schema.json"
    assert isinstance(spec.pools["web"], FixedPool)
    assert spec.pools["web"].size == 2
    assert spec.network.ingress_ports == [80]
    assert spec.exec_mode == "SSM"


def test_load_spec_accepts_str_path_and_utf8_bom(tmp_path: Path):
    path = tmp_path / "env.jsonc"
    path.write_bytes(b"\xef\xbb\xbf" + spec_text(extra='"nme": 1').encode())
    with pytest.raises(SpecError) as exc:
        load_spec(str(path))
    # The BOM must not shift columns on line 1 or anywhere else.
    assert (exc.value.issues[0].line, exc.value.issues[0].col) == (6, 3)
    assert exc.value.file == str(path)


def test_asg_pool_loads():
    spec = parse_spec_text(spec_text('"q": { "mode": "asg", "min": 1, "max": 3, "desired": 2 }'), "env.jsonc")
    assert isinstance(spec.pools["q"], AsgPool)


# -- file problems -------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path):
    path = tmp_path / "nope.jsonc"
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert exc.value.issues == [SpecIssue("$", "file not found", 1, 1)]
    assert exc.value.format() == f"{path}:1:1: $: file not found"


def test_directory_instead_of_file(tmp_path: Path):
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)


def test_not_utf8(tmp_path: Path):
    path = tmp_path / "env.jsonc"
    path.write_bytes(b'{"name": "\xff"}')
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert exc.value.issues == [SpecIssue("$", "not UTF-8 text (bad byte at offset 10)", 1, 1)]


def test_syntax_error_becomes_one_issue():
    issue = only_issue('{\n  "name": "demo"\n  "org": "acme"\n}')
    assert issue == SpecIssue("$", "expected ',' or '}' after object member", 3, 3)


def test_duplicate_key_has_its_path():
    issue = only_issue(spec_text(pools='"web": { "mode": "fixed", "size": 2, "size": 3 }'))
    assert issue == SpecIssue("pools.web.size", "duplicate key 'size'", 5, 51)


def test_root_must_be_an_object():
    assert only_issue("[1, 2]") == SpecIssue("$", "expected an object, got an array", 1, 1)


# -- unknown and missing fields ------------------------------------------------------------------


def test_unknown_field_with_did_you_mean_points_at_key():
    issues = issues_of(spec_text(pools='"web": { "mode": "fixed", "sise": 2 }'))
    # The typo also leaves "size" missing: both are reported, the missing one at the pool's brace.
    assert issues == [
        SpecIssue("pools.web", "missing required field 'size'", 5, 21),
        SpecIssue("pools.web.sise", "unknown field 'sise'; did you mean 'size'?", 5, 40),
    ]


def test_unknown_root_field_position_and_suggestion():
    issue = only_issue(spec_text(extra='"loadBalancr": null'))
    assert issue == SpecIssue("loadBalancr", "unknown field 'loadBalancr'; did you mean 'loadBalancer'?", 6, 3)


def test_unknown_field_without_close_match():
    issue = only_issue(spec_text(extra='"xyzzy": "x"'))
    assert issue.message == "unknown field 'xyzzy'"


def test_unknown_field_case_slip_still_suggests():
    issue = only_issue(spec_text(pools='"web": { "mode": "fixed", "size": 1, "INSTANCE_TYPE": "t3.micro" }'))
    assert issue.message == "unknown field 'INSTANCE_TYPE'; did you mean 'instanceType'?"


def test_unknown_field_suggestions_follow_the_pool_mode():
    fixed = only_issue(spec_text(pools='"web": { "mode": "fixed", "size": 1, "maxx": 3 }'))
    assert fixed.message == "unknown field 'maxx'"
    asg = only_issue(spec_text(pools='"q": { "mode": "asg", "min": 1, "maxx": 3, "max": 3, "desired": 1 }'))
    assert asg == SpecIssue("pools.q.maxx", "unknown field 'maxx'; did you mean 'max'?", 5, 46)


def test_unknown_nested_field():
    text = spec_text(extra='"loadBalancer": { "domain": "a.example.com", "healthCheck": { "pth": "/" } }')
    issue = only_issue(text)
    assert issue == SpecIssue("loadBalancer.healthCheck.pth", "unknown field 'pth'; did you mean 'path'?", 6, 65)


def test_missing_required_field_points_at_enclosing_brace():
    issue = only_issue(spec_text(pools='"web": { "mode": "fixed" }'))
    assert issue == SpecIssue("pools.web", "missing required field 'size'", 5, 21)


def test_missing_root_fields_point_at_root():
    issues = issues_of('\n  {"provider": {"cloud": "aws", "region": "r"}}')
    assert [(i.path, i.message, i.line, i.col) for i in issues] == [
        ("$", "missing required field 'name'", 2, 3),
        ("$", "missing required field 'org'", 2, 3),
        ("$", "missing required field 'pools'", 2, 3),
    ]


# -- discriminated pool union --------------------------------------------------------------------


def test_bad_pool_mode_points_at_mode_value():
    issue = only_issue(spec_text(pools='"web": { "mode": "fixd", "size": 2 }'))
    assert issue == SpecIssue(
        "pools.web.mode", "must be one of 'fixed', 'asg', got 'fixd'; did you mean 'fixed'?", 5, 31
    )


def test_non_string_pool_mode():
    issue = only_issue(spec_text(pools='"web": { "mode": 3, "size": 2 }'))
    assert issue.message == "must be one of 'fixed', 'asg', got the number 3"


def test_missing_pool_mode():
    issue = only_issue(spec_text(pools='"web": { "size": 2 }'))
    assert issue == SpecIssue("pools.web", "missing required field 'mode'", 5, 21)


def test_tag_is_stripped_from_paths():
    issue = only_issue(spec_text(pools='"web": { "mode": "fixed", "size": 0 }'))
    assert issue == SpecIssue("pools.web.size", "must be greater than or equal to 1", 5, 48)


def test_pool_must_be_an_object():
    issue = only_issue(spec_text(pools='"web": 2'))
    assert issue == SpecIssue("pools.web", "expected an object, got the number 2", 5, 21)


def test_pools_cannot_be_empty():
    assert only_issue(spec_text(pools="")) == SpecIssue("pools", "needs at least 1 entry", 5, 12)


# -- validators in the models --------------------------------------------------------------------


def test_asg_min_greater_than_max_points_at_pool():
    issue = only_issue(spec_text(pools='"q": { "mode": "asg", "min": 4, "max": 2, "desired": 3 }'))
    assert issue == SpecIssue("pools.q", "need min <= desired <= max, got 4 <= 3 <= 2", 5, 19)


def test_port_22_is_refused():
    issue = only_issue(spec_text(extra='"network": { "ingressPorts": [80, 22] }'))
    assert issue.path == "network.ingressPorts"
    assert issue.message.startswith("port 22 is never opened")
    assert (issue.line, issue.col) == (6, 32)


def test_existing_vpc_without_subnets_points_at_network():
    issue = only_issue(spec_text(extra='"network": { "existingVpcId": "vpc-0abc" }'))
    assert issue == SpecIssue("network", "existingPrivateSubnetIds is required when existingVpcId is set", 6, 14)


def test_field_validator_message_is_human():
    issue = only_issue(spec_text(extra='"network": { "cidr": "8.8.8.0/24" }'))
    assert issue == SpecIssue("network.cidr", "must be a private range (10/8, 172.16/12 or 192.168/16)", 6, 24)


def test_pool_name_must_be_dns_safe():
    issue = only_issue(spec_text(pools='"Web": { "mode": "fixed", "size": 1 }'))
    assert issue.path == "pools"
    assert issue.message == "pool name 'Web' must be DNS-safe (lowercase letters, digits, '-')"


# -- type, enum and pattern messages -------------------------------------------------------------


def test_strings_are_not_coerced_to_numbers():
    issue = only_issue(spec_text(pools='"web": { "mode": "fixed", "size": "2" }'))
    assert issue == SpecIssue("pools.web.size", "expected an integer, got the string '2'", 5, 48)


def test_list_element_path_uses_index():
    issue = only_issue(spec_text(extra='"network": { "ingressPorts": [80, "443"] }'))
    assert issue == SpecIssue("network.ingressPorts[1]", "expected an integer, got the string '443'", 6, 37)


def test_enum_case_slip_suggests():
    issue = only_issue(spec_text(extra='"exec": { "mode": "ssm" }'))
    assert issue.message == (
        "must be one of 'SSM', 'OSConfig', 'AzureRunCmd', 'QemuGuestAgent', got 'ssm'; did you mean 'SSM'?"
    )


def test_dns_label_pattern_has_a_readable_message():
    text = spec_text().replace('"name": "demo"', '"name": "Demo_1"')
    issue = only_issue(text)
    assert issue.path == "name"
    assert issue.message.startswith("must be a DNS label")
    assert (issue.line, issue.col) == (2, 11)


def test_keys_that_are_not_identifiers_are_quoted_in_paths():
    issue = only_issue(spec_text(extra='"runtime": { "files": { "/etc/app.conf": 5 } }'))
    assert issue.path == 'runtime.files["/etc/app.conf"]'


def test_long_input_values_are_cut_short():
    long = "x" * 500
    issue = only_issue(spec_text(extra=f'"exec": {{ "mode": "{long}" }}'))
    assert len(issue.message) < 150
    assert "…" in issue.message


def test_no_pydantic_prefixes_in_messages():
    text = spec_text(
        pools='"q": { "mode": "asg", "min": 4, "max": 2, "desired": 3 }',
        extra='"network": { "ingressPorts": [22] }, "runtime": { "env": { "1BAD": "x" } }',
    )
    for issue in issues_of(text):
        assert "Value error" not in issue.message
        assert "Input should" not in issue.message


# -- many errors at once -------------------------------------------------------------------------


def test_all_errors_are_reported_in_file_order():
    text = """{
  "name": "demo",
  "org": "acme",
  "provider": { "cloud": "aws", "region": "us-east-1" },
  "network": { "zones": 9 },
  "pools": {
    "web": { "mode": "fixed", "sise": 2, "size": 2 },
  },
  "bootstrap": { "mode": "nginx", "timeoutSeconds": 1 },
}
"""
    with pytest.raises(SpecError) as exc:
        parse_spec_text(text, "env.jsonc")
    assert exc.value.format().splitlines() == [
        "env.jsonc:5:25: network.zones: must be less than or equal to 6",
        "env.jsonc:7:31: pools.web.sise: unknown field 'sise'; did you mean 'size'?",
        "env.jsonc:9:53: bootstrap.timeoutSeconds: must be greater than or equal to 10",
    ]
    assert str(exc.value) == exc.value.format()
    assert exc.value.file == "env.jsonc"


def test_issues_are_sorted_by_position_not_by_model_order():
    # "pools" comes before "name" in the file although the model declares name first.
    text = '{"pools": {"web": {"mode": "fixed", "size": 0}},\n "name": "X", "org": "acme",\n'
    text += ' "provider": {"cloud": "aws", "region": "r"}}'
    issues = issues_of(text)
    assert [(i.path, i.line) for i in issues] == [("pools.web.size", 1), ("name", 2)]


# -- starter -------------------------------------------------------------------------------------


def test_starter_renders_and_loads():
    text = render_starter("shop", "acme", region="eu-west-1")
    assert '"$schema": "./vmplane.env.schema.json"' in text
    spec = parse_spec_text(text, "starter.jsonc")
    assert (spec.name, spec.org, spec.provider.region) == ("shop", "acme", "eu-west-1")
    assert isinstance(spec.pools["web"], FixedPool)
    assert spec.pools["web"].size == 2
    assert spec.load_balancer is None


def test_starter_load_balancer_block_is_valid_once_uncommented():
    lines = render_starter("shop", "acme").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('  // "loadBalancer"'))
    for i in range(start, len(lines)):
        if lines[i].startswith("  // "):
            lines[i] = lines[i].replace("// ", "", 1)
    spec = parse_spec_text("\n".join(lines), "starter.jsonc")
    assert spec.load_balancer is not None
    assert spec.load_balancer.domain == "app.example.com"


@pytest.mark.parametrize(
    ("name", "org", "region", "match"),
    [
        ("Shop", "acme", "us-east-1", "name 'Shop' is not a DNS label"),
        ("shop-", "acme", "us-east-1", "name 'shop-' is not a DNS label"),
        ("shop", "a" * 33, "us-east-1", "org 'a+' is not a DNS label"),
        ("shop", "acme\n", "us-east-1", "org 'acme\\\\n' is not a DNS label"),
        ("shop", "acme", 'us-east-1"', "region .* is not a region name"),
        ("shop", "acme", "", "region '' is not a region name"),
    ],
)
def test_starter_rejects_bad_input(name, org, region, match):
    with pytest.raises(ValueError, match=match):
        render_starter(name, org, region)


# -- import cost ---------------------------------------------------------------------------------


def test_loader_does_not_import_heavy_packages():
    code = (
        "import sys, vmplane.envspec.load, vmplane.envspec.schema, vmplane.envspec.starter;"
        "heavy = sorted(m for m in ('boto3', 'botocore', 'dbos', 'moto', 'sqlalchemy', 'typer')"
        " if m in sys.modules);"
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
