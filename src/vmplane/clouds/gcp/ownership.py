"""How a GCP resource says it is vmplane's: labels where the resource takes them, the full tag set as
JSON in `description` everywhere (most compute resources take no labels), and the deterministic name.

Label keys allow only `[a-z0-9_-]`, so the tag set is folded (`zop:orgId` -> `zop_org_id`; see
clouds/tags.py); the description keeps the exact keys and values, which is what `owned_by` reads.
"""

from __future__ import annotations

import json
from typing import Any

from vmplane.clouds.base import Tagger
from vmplane.clouds.tags import gcp_labels

MAX_DESCRIPTION = 2048


def labels(tagger: Tagger, role: str) -> dict[str, str]:
    return gcp_labels(tagger.tags(role))


def description(tagger: Tagger, role: str) -> str:
    text = json.dumps(tagger.tags(role), sort_keys=True, separators=(",", ":"))
    return text[:MAX_DESCRIPTION]


def tags_of(resource: Any) -> dict[str, str]:
    """The tag set a resource's description carries ({} if it is not vmplane's JSON)."""
    text = getattr(resource, "description", None) or (resource.get("description") if isinstance(resource, dict) else "")
    try:
        data = json.loads(text or "")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def owned_by(resource: Any, tagger: Tagger) -> bool:
    """True if `resource` carries this job's id (in its description)."""
    return tags_of(resource).get(tagger.job_key) == tagger.job_id


def owner_of(resource: Any, tagger: Tagger) -> str:
    """Who owns a resource, in words for a conflict error."""
    tags = tags_of(resource)
    if not tags:
        return "not vmplane (no vmplane description)"
    org, job = tags.get(f"{tagger.prefix}orgId", "?"), tags.get(tagger.job_key, "?")
    return f"org {org}, job {job}"
