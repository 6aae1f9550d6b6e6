"""`provider`: where the environment runs, one shape per cloud, selected by `cloud`.

The shapes are the registered clouds' (`vmplane.clouds.specs`), looked up when a spec validates, so a
cloud registered at run time validates like the shipped ones. Errors stay as a discriminated union gives
them: an unknown `cloud` lists the clouds, and a member's errors sit under `provider` (`provider.region`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, PlainValidator, SerializeAsAny, ValidationInfo
from pydantic_core import PydanticCustomError, PydanticKnownError

from vmplane.clouds.specs import SPECS
from vmplane.envspec.cloudspec import CloudSpec, ProviderBase

__all__ = ["SPECS", "Provider", "ProviderBase", "cloud_spec", "spec_for"]


def cloud_spec(name: Any) -> CloudSpec | None:
    """The registered cloud called `name` (a str or the Cloud enum), or None."""
    return SPECS.get(str(name)) if isinstance(name, str) else None


def spec_for(provider: Any) -> CloudSpec | None:
    """The cloud a raw or validated `provider` value names, or None (then the provider's own error is reported)."""
    value = provider.get("cloud") if isinstance(provider, dict) else getattr(provider, "cloud", None)
    return cloud_spec(value)


def _validate(value: Any, info: ValidationInfo) -> ProviderBase:
    if isinstance(value, ProviderBase):
        return value
    if not isinstance(value, dict):
        raise PydanticKnownError("model_attributes_type")
    if "cloud" not in value:
        raise PydanticKnownError("union_tag_not_found", {"discriminator": "'cloud'"})
    spec = spec_for(value)
    if spec is None:
        expected = ", ".join(f"'{name}'" for name in SPECS)
        tag = value["cloud"] if isinstance(value["cloud"], str) else json.dumps(value["cloud"])
        raise PydanticKnownError(
            "union_tag_invalid", {"discriminator": "'cloud'", "tag": tag, "expected_tags": expected}
        )
    # A file is read in strict JSON mode (no "2" for 2); in JSON mode the member is validated the same way.
    if info.mode == "json":
        return spec.provider.model_validate_json(json.dumps(value), strict=True)
    return spec.provider.model_validate(value)


def _json_schema_members() -> Any:
    members = tuple(s.provider for s in SPECS.values())
    if not members:
        raise PydanticCustomError("no_clouds", "no cloud is registered")
    union: Any = members[0]
    for member in members[1:]:
        union = union | member
    return Annotated[union, Field(discriminator="cloud")]


# The schema lists the clouds registered when the models are built (the shipped ones).
Provider = Annotated[
    SerializeAsAny[ProviderBase], PlainValidator(_validate, json_schema_input_type=_json_schema_members())
]
