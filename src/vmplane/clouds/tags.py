"""vmplane's tag set in each cloud's own form: the folding lives in `envspec.tagforms`, so that
`vmplane validate` can check the very labels and tokens the drivers will send (see there)."""

from __future__ import annotations

from vmplane.envspec.tagforms import (
    AWS_TAG_KEY,
    GCP_LABEL_KEY,
    GCP_LABEL_VALUE,
    PROXMOX_TAG,
    gcp_label_key,
    gcp_labels,
    proxmox_tags,
)

__all__ = [
    "AWS_TAG_KEY",
    "GCP_LABEL_KEY",
    "GCP_LABEL_VALUE",
    "PROXMOX_TAG",
    "gcp_label_key",
    "gcp_labels",
    "proxmox_tags",
]
