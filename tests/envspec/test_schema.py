import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from vmplane.envspec.jsonc import parse_jsonc
from vmplane.envspec.models import Cloud
from vmplane.envspec.schema import SCHEMA_FILENAME, env_json_schema, write_schema
from vmplane.envspec.starter import render_starter

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fixed.jsonc"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = env_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture
def example() -> dict[str, Any]:
    value, _ = parse_jsonc(EXAMPLE.read_text())
    return value


def error_messages(validator: jsonschema.Draft202012Validator, doc: Any) -> list[str]:
    return [e.message for e in validator.iter_errors(doc)]


def test_schema_identity_and_dialect():
    schema = env_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "urn:vmplane:schema:env"
    assert schema["title"] == "vmplane environment"
    assert schema["description"]
    assert {"$schema", "name", "pools", "exec", "loadBalancer"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False


def test_schema_is_deterministic():
    first = json.dumps(env_json_schema(), sort_keys=True)
    assert json.dumps(env_json_schema(), sort_keys=True) == first
    # Callers may mutate what they get; the next call must not see it.
    mutated = env_json_schema()
    mutated["properties"].clear()
    assert json.dumps(env_json_schema(), sort_keys=True) == first


def test_property_titles_are_dropped_but_model_titles_kept():
    schema = env_json_schema()
    assert "title" not in schema["$defs"]["FixedPool"]["properties"]["instanceType"]
    assert schema["$defs"]["FixedPool"]["title"] == "FixedPool"


def test_example_validates(validator, example):
    assert error_messages(validator, example) == []


def test_starter_validates(validator):
    value, _ = parse_jsonc(render_starter("shop", "acme"))
    assert error_messages(validator, value) == []


def test_unknown_root_key_is_rejected(validator, example):
    doc = {**example, "sise": 3}
    messages = error_messages(validator, doc)
    assert len(messages) == 1
    assert "'sise' was unexpected" in messages[0]


def test_unknown_pool_key_is_rejected(validator, example):
    doc = copy.deepcopy(example)
    doc["pools"]["web"]["sise"] = 3
    assert error_messages(validator, doc)


def test_pool_mode_selects_the_member(validator, example):
    doc = copy.deepcopy(example)
    doc["pools"]["q"] = {"mode": "asg", "min": 1, "max": 2, "desired": 1}
    assert error_messages(validator, doc) == []
    doc["pools"]["q"]["size"] = 2  # a fixed-pool field on an asg pool
    assert error_messages(validator, doc)


def test_validator_rules_mirrored_for_editors(validator, example):
    bad_name = copy.deepcopy(example)
    bad_name["pools"]["Web"] = bad_name["pools"].pop("web")
    assert error_messages(validator, bad_name)
    ssh = copy.deepcopy(example)
    ssh["network"]["ingressPorts"] = [80, 22]
    assert error_messages(validator, ssh)


def test_write_schema(tmp_path: Path):
    target = tmp_path / "nested" / "dir"
    path = write_schema(target)
    assert path == target / SCHEMA_FILENAME
    text = path.read_text()
    assert text.endswith("}\n")
    assert not text.endswith("\n\n")
    assert json.loads(text) == env_json_schema()
    assert text == json.dumps(env_json_schema(), indent=2, sort_keys=True) + "\n"
    assert write_schema(target).read_text() == text  # rewriting is byte-identical


def test_provider_is_a_union_selected_by_cloud(validator, example):
    provider = env_json_schema()["properties"]["provider"]
    assert provider["discriminator"]["propertyName"] == "cloud"
    assert set(provider["discriminator"]["mapping"]) == {"aws", "gcp", "azure", "proxmox"}
    doc = copy.deepcopy(example)
    doc["provider"] = {"cloud": "gcp", "project": "shop-prod-1", "region": "us-central1"}
    doc["exec"] = {"mode": "OSConfig"}
    assert error_messages(validator, doc) == []
    doc["provider"]["profile"] = "default"  # an AWS field on a GCP provider
    assert error_messages(validator, doc)
    doc["provider"] = {"cloud": "gcp", "project": "Bad_", "region": "us-central1"}
    assert error_messages(validator, doc)


def test_proxmox_needs_node_or_nodes(validator, example):
    doc = copy.deepcopy(example)
    doc["provider"] = {"cloud": "proxmox", "endpoint": "https://pve.example:8006", "node": "pve1"}
    assert error_messages(validator, doc) == []
    doc["provider"]["nodes"] = ["pve2"]
    assert error_messages(validator, doc)
    del doc["provider"]["node"], doc["provider"]["nodes"]
    assert error_messages(validator, doc)


def test_neutral_network_keys_are_in_the_schema(validator, example):
    doc = copy.deepcopy(example)
    doc["network"] = {"existingNetwork": "vpc-0abc", "existingSubnets": ["subnet-01"]}
    assert error_messages(validator, doc) == []
    doc["network"]["existingVpcId"] = "vpc-0abc"
    assert error_messages(validator, doc)


@pytest.mark.parametrize("cloud", [Cloud.gcp, Cloud.proxmox])
def test_starters_of_other_clouds_validate(validator, cloud):
    value, _ = parse_jsonc(render_starter("shop", "acme", cloud=cloud))
    assert error_messages(validator, value) == []
