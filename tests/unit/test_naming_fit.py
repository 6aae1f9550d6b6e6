"""clouds/naming.fit, the one way a driver trims a name to its cloud's limit. Existing environments are
found by name, so every name the drivers gave before it replaced their three copies must come out byte for
byte the same: checked against outputs recorded from the old code, and against the old code itself."""

from __future__ import annotations

import hashlib
import json
import random
import string

import pytest

from vmplane.clouds.aws import naming as aws
from vmplane.clouds.naming import fit
from vmplane.envspec.base import DNS_LABEL_RE

from . import naming_record


def old_fit(name: str, limit: int) -> str:
    """The copy aws/naming.py, gcp/naming.py (`_name`, limit 63) and proxmox/naming.py (`vm_name`, 63) each
    held, verbatim: the reference `fit` must match."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def test_every_recorded_name_is_unchanged() -> None:
    recorded = json.loads(naming_record.RECORDED.read_text())
    now = naming_record.names()
    assert len(recorded) > 1000  # the examples' and their long variants' names, not an empty file
    changed = {k: (v, now.get(k)) for k, v in recorded.items() if now.get(k) != v}
    assert not changed, changed


def _random_name(rng: random.Random) -> str:
    alphabet = string.ascii_lowercase + string.digits + "-"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120)))


def test_fit_matches_the_old_copies_on_random_names() -> None:
    rng = random.Random(27)
    fitted = trimmed = 0
    for _ in range(20_000):
        name, limit = _random_name(rng), rng.choice([32, 63, 64, 70, 251])
        got = fit(name, limit)
        assert got == old_fit(name, limit), (name, limit)
        assert len(got) <= limit
        if len(name) <= limit:
            fitted += 1
            assert got == name  # a name that fits is never touched
        else:
            trimmed += 1
    assert fitted > 1000 and trimmed > 1000  # both branches were exercised


def test_long_names_sharing_a_head_stay_distinct() -> None:
    head = "web-" + "x" * 60
    assert fit(head + "-1", 63) != fit(head + "-2", 63)
    assert fit(head + "-1", 63) == fit(head + "-1", 63)  # stable: a resumed step finds what it made
    assert not fit("a" * 54 + "-" * 20, 63).startswith("a" * 54 + "-" * 2)  # no '--' before the digest


def test_fit_refuses_a_limit_with_no_room_for_the_digest() -> None:
    assert fit("short", 9) == "short"  # fits: no digest needed
    with pytest.raises(ValueError, match="no room"):
        fit("a-name-too-long", 9)


def test_aws_instance_names_fit_the_name_tag_with_their_suffixes() -> None:
    # The longest env and pool a spec allows, and the largest Fixed pool index: far within the tag's 256.
    longest = "a" * 32
    assert DNS_LABEL_RE.fullmatch(longest)
    spec = next(s for label, s in naming_record.specs() if label == "fixed")
    name = aws.instance_name(spec.model_copy(update={"name": longest}), longest, 99)
    assert name == f"{longest}-{longest}-99"
    assert len(name + "-root") <= aws.NAME_TAG_LIMIT
    huge = aws.instance_name(spec.model_copy(update={"name": "e" * 300}), "web", 0)
    assert len(huge + "-root") <= aws.NAME_TAG_LIMIT and huge == old_fit("e" * 300 + "-web-0", 251)
