"""The JSON Schema editors use to complete and check spec files, generated from the pydantic models.

The models stay the single source of truth: this only adds identity, drops noise and mirrors the few
validator rules that a schema can express, so editors flag them while typing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vmplane.envspec.models import NETWORK_SYNONYMS, EnvSpec

SCHEMA_FILENAME = "vmplane.env.schema.json"
SCHEMA_ID = "urn:vmplane:schema:env"
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def env_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a spec file; the same input always gives the same output."""
    schema = EnvSpec.model_json_schema(by_alias=True)
    _drop_property_titles(schema)
    _network_synonyms(schema["$defs"]["Network"])
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": SCHEMA_ID,
        **schema,
        "title": "vmplane environment",
        "description": (
            "One VM environment: provider, private network, VM pools, bootstrap, exec channel, tags "
            "and runtime settings. Validate with `vmplane validate`."
        ),
    }


def write_schema(directory: Path) -> Path:
    """Write `vmplane.env.schema.json` into `directory` (created if needed) and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SCHEMA_FILENAME
    path.write_text(json.dumps(env_json_schema(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _network_synonyms(network: dict[str, Any]) -> None:
    """The cloud-neutral keys are mapped before validation, so the models do not list them."""
    props = network["properties"]
    for neutral, key in NETWORK_SYNONYMS.items():
        props[neutral] = {**props[key], "description": f"The cloud-neutral name of {key} (give one of them)."}
    network["allOf"] = [{"not": {"required": [neutral, key]}} for neutral, key in NETWORK_SYNONYMS.items()]


def _drop_property_titles(node: Any) -> None:
    """Pydantic titles properties from their alias ("Instancetype"); editors read better without them."""
    if isinstance(node, dict):
        for prop in (node.get("properties") or {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        for value in node.values():
            _drop_property_titles(value)
    elif isinstance(node, list):
        for value in node:
            _drop_property_titles(value)
