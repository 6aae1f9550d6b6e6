"""clouds/tags.py: vmplane's tag set in each cloud's own form."""

from __future__ import annotations

import re

from vmplane.clouds.base import Tagger
from vmplane.clouds.tags import GCP_LABEL_KEY, GCP_LABEL_VALUE, PROXMOX_TAG, gcp_label_key, gcp_labels, proxmox_tags

TAGGER = Tagger(prefix="zop:", org="acme", job_id="job-20261201-ab12cd34", env="web", extra={"CostCenter": "CC-1234"})


def test_gcp_label_keys_and_values_fit_googles_alphabet():
    labels = gcp_labels(TAGGER.tags("vm", "web-web-0"))
    assert labels == {
        "cost_center": "cc-1234",
        "zop_env": "web",
        "zop_job_id": "job-20261201-ab12cd34",
        "zop_managed_by": "vmplane",
        "zop_org_id": "acme",
        "zop_role": "vm",
    }
    assert all(re.fullmatch(GCP_LABEL_KEY, k) and re.fullmatch(GCP_LABEL_VALUE, v) for k, v in labels.items())


def test_gcp_label_keys_start_with_a_letter_and_stay_within_63_chars():
    assert gcp_label_key("1st:Key") == "k1st_key"
    assert len(gcp_label_key("x" * 100)) == 63
    assert gcp_label_key("Team/Owner") == "team_owner"


def test_proxmox_tags_are_single_tokens():
    tokens = proxmox_tags(TAGGER.tags("vm", "web-web-0"))
    assert "zop_org_id-acme" in tokens and "zop_job_id-job-20261201-ab12cd34" in tokens
    assert tokens == sorted(tokens)
    assert all(re.fullmatch(PROXMOX_TAG, t) for t in tokens)
