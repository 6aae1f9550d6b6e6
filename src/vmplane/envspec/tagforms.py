"""vmplane's tag set in each cloud's own form (imported by the drivers through `clouds.tags`).

The logical set is `Tagger.tags()`: `<prefix>orgId`, `<prefix>jobId`, `<prefix>role`, `<prefix>managedBy`,
`<prefix>env` and the user's tags. AWS stores it as is. GCP label keys and values allow only lowercase
letters, digits, `_` and `-` (keys start with a letter, both at most 63 characters), so keys and values
are folded into that alphabet; the full set then also goes in the resource's description where it has
one. Proxmox tags are single tokens, so each pair becomes one `key-value` token.
"""

from __future__ import annotations

import re

AWS_TAG_KEY = r"^(?!aws:)[\w .:/=+@-]{1,128}$"
GCP_LABEL_KEY = r"^[a-z][a-z0-9_-]{0,62}$"
GCP_LABEL_VALUE = r"^[a-z0-9_-]{0,63}$"
PROXMOX_TAG = r"^[a-z0-9_][a-z0-9_.+-]*$"

_NOT_LABEL = re.compile(r"[^a-z0-9_-]+")
_NOT_TOKEN = re.compile(r"[^a-z0-9_.+-]+")


def _fold(value: str, bad: re.Pattern[str], limit: int) -> str:
    # camelCase keeps its word breaks (orgId -> org_id) so two keys that differ only in case stay apart.
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", value).lower()
    return bad.sub("_", snake).strip("_")[:limit]


def gcp_label_key(key: str) -> str:
    folded = _fold(key, _NOT_LABEL, 63)
    return folded if folded[:1].isalpha() else f"k{folded}"[:63]


def gcp_label_uncut(text: str, *, key: bool) -> str:
    """`text` folded as a label key (or value) is, before the cut to 63 (snake case at most doubles it)."""
    folded = _fold(text, _NOT_LABEL, 2 * len(text) + 1)
    return f"k{folded}" if key and not folded[:1].isalpha() else folded


def gcp_labels(tags: dict[str, str]) -> dict[str, str]:
    """`{"zop:orgId": "Acme"}` -> `{"zop_org_id": "acme"}`; a `Name` tag is the resource's name, not a label."""
    return {gcp_label_key(k): _fold(v, _NOT_LABEL, 63) for k, v in sorted(tags.items()) if k != "Name"}


def proxmox_tags(tags: dict[str, str]) -> list[str]:
    """`{"zop:orgId": "acme"}` -> `["zop_org_id-acme"]`: one token per pair, sorted (PVE keeps them sorted)."""
    return sorted(
        f"{_fold(k, _NOT_TOKEN, 40)}-{_fold(v, _NOT_TOKEN, 60)}".rstrip("-") for k, v in tags.items() if k != "Name"
    )
