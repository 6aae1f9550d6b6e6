"""Secrets by reference, the spec: the reference syntax, each cloud's stores, validate's warnings and their
positions, the impact of a changed reference, and the JSON Schema editors check the file with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from tests.helpers import EXAMPLES, Cli

from vmplane.clouds.specs import SPECS
from vmplane.envspec.impact import Impact, diff
from vmplane.envspec.load import SpecError, parse_spec_text
from vmplane.envspec.models import EnvSpec, Secret
from vmplane.envspec.schema import env_json_schema
from vmplane.envspec.secrets import SecretRef, SecretStore, parse_ref, plain_secret_warnings, secret_refs
from vmplane.jobs.precheck import _path_keys
from vmplane.jobs.service import spec_json

BASE = (EXAMPLES / "fixed.jsonc").read_text()
RUNTIME = '"env": { "LOG_LEVEL": "info" },'
PROVIDERS = {
    "aws": '{ "cloud": "aws", "region": "us-east-1" }',
    "gcp": '{ "cloud": "gcp", "project": "my-project-1", "region": "us-central1" }',
    "proxmox": '{ "cloud": "proxmox", "endpoint": "https://pve.example:8006", "node": "pve1" }',
}


def spec_text(env: dict[str, Any], files: dict[str, Any] | None = None, cloud: str = "aws") -> str:
    """examples/fixed.jsonc with this runtime block, on `cloud` (its pool and exec fitted to it)."""
    text = BASE.replace(RUNTIME, f'"env": {json.dumps(env)},\n    "files": {json.dumps(files or {})},')
    text = text.replace('{ "cloud": "aws", "region": "us-east-1" }', PROVIDERS[cloud])
    if cloud == "gcp":
        text = text.replace('"t3.small"', '"e2-small"').replace('"al2023"', '"ubuntu-24.04"')
        text = text.replace('"SSM"', '"OSConfig"')
    if cloud == "proxmox":
        text = text.replace('"instanceType": "t3.small",', '"template": "debian-12-cloud",')
        text = text.replace('"image": "al2023", // resolved through the public SSM parameter', '"cores": 2,')
        text = text.replace('"SSM"', '"QemuGuestAgent"')
    return text


def issues(text: str) -> dict[str, tuple[int, int, str]]:
    with pytest.raises(SpecError) as err:
        parse_spec_text(text, "s.jsonc")
    return {i.path: (i.line, i.col, i.message) for i in err.value.issues}


# -- the reference syntax -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("aws-sm:prod/db", SecretRef(SecretStore.aws_sm, "prod/db")),
        ("aws-sm:prod/db#password", SecretRef(SecretStore.aws_sm, "prod/db", json_key="password")),
        (
            "aws-sm:arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf#pw",
            SecretRef(
                SecretStore.aws_sm, "arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf", None, "pw"
            ),
        ),
        ("aws-ssm:/prod/app/key", SecretRef(SecretStore.aws_ssm, "/prod/app/key")),
        ("aws-ssm:/prod/app/key:3", SecretRef(SecretStore.aws_ssm, "/prod/app/key", "3")),
        ("gcp-sm:db-password", SecretRef(SecretStore.gcp_sm, "db-password")),
        ("gcp-sm:db-password/versions/7", SecretRef(SecretStore.gcp_sm, "db-password", "7")),
        ("gcp-sm:db-password/versions/latest", SecretRef(SecretStore.gcp_sm, "db-password")),
        ("gcp-sm:projects/my-project-1/secrets/db", SecretRef(SecretStore.gcp_sm, "projects/my-project-1/secrets/db")),
        # Google's own resource names carry the project number: the console's copy button gives this form.
        (
            "gcp-sm:projects/123456789012/secrets/db/versions/2",
            SecretRef(SecretStore.gcp_sm, "projects/123456789012/secrets/db", "2"),
        ),
        ("env:DB_PASSWORD", SecretRef(SecretStore.env, "DB_PASSWORD")),
    ],
)
def test_valid_references_parse_and_print_back(text: str, ref: SecretRef) -> None:
    assert parse_ref(text) == ref
    assert ref.pinned is (ref.version is not None)
    # `latest` is the same as no version: the reference prints without it.
    assert ref.text == text.removesuffix("/versions/latest")
    assert Secret(secret=text).ref == ref


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("prod/db", "is not a secret reference; use one of: aws-sm:NAME[#json-key]"),
        ("vault:prod/db", "is not a secret reference"),
        ("aws-sm:", "does not match aws-sm:NAME[#json-key] (a secret name or ARN)"),
        ("aws-sm:prod db", "does not match aws-sm:"),
        ("aws-sm:prod/db#", "does not match aws-sm:"),
        ("aws-sm:a#b#c", "does not match aws-sm:"),
        ("aws-ssm:prod/app", "does not match aws-ssm:/path[:N] (a parameter path from /, N a version)"),
        ("aws-ssm:/", "does not match aws-ssm:"),
        ("aws-ssm:/a/b:0", "does not match aws-ssm:"),
        ("aws-ssm:/a/b:x", "does not match aws-ssm:"),
        ("gcp-sm:db/versions/0", "does not match gcp-sm:NAME[/versions/N]"),
        ("gcp-sm:db/versions/", "does not match gcp-sm:"),
        ("gcp-sm:projects/X/secrets/db", "does not match gcp-sm:"),
        ("gcp-sm:db.password", "does not match gcp-sm:"),
        ("env:1VAR", "does not match env:VAR (an environment variable name)"),
        ("env:", "does not match env:VAR"),
    ],
)
def test_invalid_references_name_the_syntax_they_break(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"does not match|is not a secret reference") as err:
        parse_ref(text)
    assert message in str(err.value)
    assert repr(text) in str(err.value)  # the reference is quoted: it is no secret, and the reader finds it


def test_a_bad_reference_in_the_file_is_one_error_at_its_secret_field() -> None:
    text = spec_text({"A": {"secret": "aws-ssm:noslash"}}, {"/etc/app/tls.pem": {"secret": "aws-sm:"}})
    found = issues(text)
    assert set(found) == {"runtime.env.A.secret", 'runtime.files["/etc/app/tls.pem"].secret'}
    line, col, message = found["runtime.env.A.secret"]
    row = text.splitlines()[line - 1]
    assert row[col - 1 :].startswith('"aws-ssm:noslash"')  # at the reference's value
    assert "does not match aws-ssm:/path[:N]" in message
    line, col, _ = found['runtime.files["/etc/app/tls.pem"].secret']
    assert text.splitlines()[line - 1][col - 1 :].startswith('"aws-sm:"')


@pytest.mark.parametrize(
    ("value", "path", "message"),
    [
        ({"secret": "aws-sm:x", "version": "2"}, "runtime.env.A.version", "unknown field 'version'"),
        ({}, "runtime.env.A", "missing required field 'secret'"),
        ({"secret": 5}, "runtime.env.A.secret", "expected a string"),
        (5, "runtime.env.A", "expected a string"),
    ],
)
def test_a_malformed_value_is_named_at_its_field(value: Any, path: str, message: str) -> None:
    found = issues(spec_text({"A": value}))
    assert list(found) == [path]
    assert message in found[path][2]


def test_references_are_kept_in_the_model_and_listed_by_field_path() -> None:
    spec = parse_spec_text(
        spec_text(
            {"LOG_LEVEL": "info", "DB_PASSWORD": {"secret": "aws-sm:prod/db#password"}},
            {"/etc/app/tls.pem": {"secret": "aws-ssm:/prod/tls:4"}, "/etc/app/a.conf": "x=1"},
        ),
        "s.jsonc",
    )
    assert spec.runtime.plain_env() == {"LOG_LEVEL": "info"}
    assert spec.runtime.plain_files() == {"/etc/app/a.conf": "x=1"}
    assert secret_refs(spec) == {
        "runtime.env.DB_PASSWORD": SecretRef(SecretStore.aws_sm, "prod/db", json_key="password"),
        'runtime.files["/etc/app/tls.pem"]': SecretRef(SecretStore.aws_ssm, "/prod/tls", "4"),
    }
    # The job record holds the spec's JSON: the reference as written, nothing resolved.
    runtime = spec_json(spec)["runtime"]
    assert runtime["env"]["DB_PASSWORD"] == {"secret": "aws-sm:prod/db#password"}
    assert runtime["files"]["/etc/app/tls.pem"] == {"secret": "aws-ssm:/prod/tls:4"}


def test_precheck_path_keys_read_quoted_keys_and_indexes() -> None:
    assert _path_keys('runtime.files["/etc/a.pem"].secret') == ("runtime", "files", "/etc/a.pem", "secret")
    assert _path_keys('tags["cost.center"]') == ("tags", "cost.center")
    assert _path_keys("network.ingressPorts[1]") == ("network", "ingressPorts", 1)
    assert _path_keys("runtime.env.DB_PASSWORD.secret") == ("runtime", "env", "DB_PASSWORD", "secret")
    assert _path_keys("$") == ()


# -- each cloud's stores --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cloud", "ref", "allowed"),
    [
        ("aws", "env:DB_PASSWORD", "use aws-sm: (AWS Secrets Manager) or aws-ssm:"),
        ("aws", "gcp-sm:db", "use aws-sm:"),
        ("gcp", "env:DB_PASSWORD", "use gcp-sm: (Google Secret Manager)"),
        ("gcp", "aws-sm:prod/db", "use gcp-sm:"),
        ("gcp", "aws-ssm:/prod/db", "use gcp-sm:"),
        ("proxmox", "aws-sm:prod/db", "use env: (the operator's environment at push time)"),
        ("proxmox", "gcp-sm:db", "use env:"),
    ],
)
def test_another_clouds_store_is_refused_at_the_field(cloud: str, ref: str, allowed: str) -> None:
    store = ref.partition(":")[0]
    for env, files, path in (
        ({"DB_PASSWORD": {"secret": ref}}, {}, "runtime.env.DB_PASSWORD.secret"),
        ({}, {"/etc/app/db.pw": {"secret": ref}}, 'runtime.files["/etc/app/db.pw"].secret'),
    ):
        found = issues(spec_text(env, files, cloud))
        assert list(found) == [path], found
        assert found[path][2].startswith(f"{store}: is not a secret store on {cloud}; ")
        assert allowed in found[path][2]


@pytest.mark.parametrize("cloud", ["aws", "gcp", "proxmox"])
def test_each_clouds_own_stores_are_accepted(cloud: str) -> None:
    examples = {
        SecretStore.aws_sm: "aws-sm:prod/db#password",
        SecretStore.aws_ssm: "aws-ssm:/prod/db",
        SecretStore.gcp_sm: "gcp-sm:db/versions/2",
        SecretStore.env: "env:DB_PASSWORD",
    }

    stores = SPECS[cloud].secret_stores
    env = {f"S{i}": {"secret": examples[s]} for i, s in enumerate(stores)}
    spec = parse_spec_text(spec_text(env, cloud=cloud), "s.jsonc")
    assert {r.store for r in secret_refs(spec).values()} == set(stores)


# -- validate's warnings for plain values that look secret ----------------------------------------


def test_plain_values_named_like_secrets_are_warned_with_the_clouds_syntax() -> None:
    spec = parse_spec_text(
        spec_text(
            {
                "LOG_LEVEL": "info",
                "DB_PASSWORD": "hunter2",
                "API_TOKEN": "t",
                "EMPTY_SECRET": "",
                "MY_KEY": {"secret": "aws-sm:k"},
            },
            {"/etc/ssl/server.key": "pem", "/etc/app/a.conf": "x=1"},
        ),
        "s.jsonc",
    )
    warned = plain_secret_warnings(spec, SecretStore.aws_sm)
    # Not LOG_LEVEL, not an empty value, not a reference; a file by its base name.
    assert [w.split(":")[0] for w in warned] == [
        "runtime.env.API_TOKEN",
        "runtime.env.DB_PASSWORD",
        'runtime.files["/etc/ssl/server.key"]',
    ]
    assert "PASSWORD in its name" in warned[1]
    assert 'use {"secret": "aws-sm:NAME[#json-key]"}' in warned[1]
    assert "hunter2" not in " ".join(warned)  # the warning names the field, never the value
    assert 'use {"secret": "aws-sm:NAME[#json-key] | aws-ssm:' in plain_secret_warnings(spec, None)[0]


def test_validate_prints_warnings_at_file_line_col_and_in_json(tmp_path: Path) -> None:
    text = spec_text(
        {"LOG_LEVEL": "info", "DB_PASSWORD": "hunter2-plain"}, {"/etc/app/db.pw": {"secret": "aws-sm:prod/db"}}
    )
    file = tmp_path / "s.jsonc"
    file.write_text(text)
    cli = Cli(home=tmp_path / "h", sandbox_port=1)
    proc = cli.run("validate", "-f", str(file), "--output", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["valid"] is True
    [w] = out["warnings"]
    assert w["path"] == "runtime.env.DB_PASSWORD"
    assert text.splitlines()[w["line"] - 1][w["col"] - 1 :].startswith('"hunter2-plain"')
    assert f"{file}:{w['line']}:{w['col']}: warning: runtime.env.DB_PASSWORD: looks like a secret" in proc.stderr
    assert "hunter2-plain" not in proc.stderr + proc.stdout

    refused = tmp_path / "r.jsonc"
    refused.write_text(spec_text({"DB_PASSWORD": {"secret": "env:DB_PASSWORD"}}))
    proc = cli.run("validate", "-f", str(refused))
    assert proc.returncode == 2
    assert (
        f"{refused}:" in proc.stderr
        and "runtime.env.DB_PASSWORD.secret: env: is not a secret store on aws" in proc.stderr
    )


# -- impact of a changed reference ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("plain-value", {"secret": "aws-sm:prod/db"}),  # plain -> secret
        ({"secret": "aws-sm:prod/db"}, "plain-value"),  # secret -> plain
        ({"secret": "aws-sm:prod/db"}, {"secret": "aws-ssm:/prod/db"}),  # another secret
        ({"secret": "aws-sm:prod/db#a"}, {"secret": "aws-sm:prod/db#b"}),  # another key of it
        ({"secret": "aws-ssm:/prod/db:1"}, {"secret": "aws-ssm:/prod/db:2"}),  # a pinned version
    ],
)
def test_a_changed_reference_is_a_runtime_change(before: Any, after: Any) -> None:
    def spec(value: Any) -> EnvSpec:
        return parse_spec_text(spec_text({"DB_PASSWORD": value}, {"/etc/app/db.pw": value}), "s.jsonc")

    changes = diff(spec_json(spec(before)), spec_json(spec(after)))
    assert changes, "the change must be seen"
    assert {c.impact for c in changes} == {Impact.runtime}
    assert {c.path.split(".secret")[0] for c in changes} == {
        "runtime.env.DB_PASSWORD",
        'runtime.files["/etc/app/db.pw"]',
    }


# -- the JSON Schema ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(env_json_schema())


def _doc(env: dict[str, Any], files: dict[str, Any]) -> dict[str, Any]:
    from vmplane.envspec.jsonc import parse_jsonc

    value, _ = parse_jsonc(spec_text(env, files))
    return dict(value)


def test_the_schema_accepts_references_in_env_and_files(validator: jsonschema.Draft202012Validator) -> None:
    doc = _doc(
        {"A": "plain", "B": {"secret": "aws-sm:prod/db#pw"}}, {"/etc/x": {"secret": "aws-ssm:/x:2"}, "/etc/y": "y"}
    )
    assert [e.message for e in validator.iter_errors(doc)] == []


@pytest.mark.parametrize(
    "bad",
    [{"secret": "prod/db"}, {"secret": "aws-sm:"}, {"secret": "aws-sm:a", "extra": 1}, {}, {"secret": 5}, 5],
)
def test_the_schema_rejects_a_malformed_reference(validator: jsonschema.Draft202012Validator, bad: Any) -> None:
    for env, files in (({"B": bad}, {}), ({}, {"/etc/x": bad})):
        assert list(validator.iter_errors(_doc(env, files))), f"{bad!r} passed the schema"


def test_schema_stdout_describes_the_reference(tmp_path: Path) -> None:
    proc = Cli(home=tmp_path / "h", sandbox_port=1).run("schema", "--stdout")
    assert proc.returncode == 0, proc.stderr
    validator = jsonschema.Draft202012Validator(json.loads(proc.stdout))
    assert not list(validator.iter_errors(_doc({"B": {"secret": "gcp-sm:db/versions/2"}}, {})))
    assert list(validator.iter_errors(_doc({"B": {"secret": "nope"}}, {})))
    assert "Only the reference is ever stored" in proc.stdout


# -- the starter ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cloud", ["aws", "gcp", "proxmox"])
def test_the_starter_shows_a_reference_of_its_clouds_store_that_validates_uncommented(cloud: str) -> None:
    from vmplane.envspec.base import Cloud
    from vmplane.envspec.starter import render_starter

    text = render_starter("shop", "acme", cloud=Cloud(cloud))
    assert secret_refs(parse_spec_text(text, "starter.jsonc")) == {}  # commented out: the starter stays plain
    lines = text.splitlines()
    commented = [i for i, ln in enumerate(lines) if '{ "secret": ' in ln]
    assert len(commented) == 2 and all(lines[i].lstrip().startswith("//") for i in commented)
    for i in commented:
        lines[i] = lines[i].replace("// ", "", 1)
    refs = secret_refs(parse_spec_text("\n".join(lines), "starter.jsonc"))
    assert set(refs) == {"runtime.env.DB_PASSWORD", 'runtime.files["/etc/app/api.key"]'}
    assert {r.store for r in refs.values()} <= set(SPECS[cloud].secret_stores)
