"""The pure diffs behind the security group and ASG steps, from small cases and without a cloud."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vmplane.clouds.aws.asg import policy_change, size_update
from vmplane.clouds.aws.security_groups import diff_ingress
from vmplane.envspec.models import AsgPool

SG_CASES = json.loads((Path(__file__).parent / "cases" / "sg_ingress.json").read_text())


@pytest.mark.parametrize("case", SG_CASES, ids=[c["name"] for c in SG_CASES])
def test_security_group_ingress_diff(case):
    diff = diff_ingress({(port, source) for port, source in case["desired"]}, case["observed"])
    assert diff.authorize == case["authorize"]
    assert diff.revoke == case["revoke"]


def _pool(**sizes) -> AsgPool:
    base = {"mode": "asg", "min": 2, "desired": 2, "max": 4, "instanceType": "t3.small", "image": "al2023"}
    return AsgPool.model_validate({**base, **sizes})


@pytest.mark.parametrize(
    ("group", "pool", "expected"),
    [
        ({"MinSize": 2, "MaxSize": 4, "DesiredCapacity": 2}, {}, None),
        ({"MinSize": 2, "MaxSize": 4, "DesiredCapacity": 3}, {}, {"MinSize": 2, "MaxSize": 4, "DesiredCapacity": 2}),
        (
            {"MinSize": 2, "MaxSize": 4, "DesiredCapacity": 2},
            {"max": 6},
            {"MinSize": 2, "MaxSize": 6, "DesiredCapacity": 2},
        ),
    ],
)
def test_asg_size_update(group, pool, expected):
    assert size_update(group, _pool(**pool)) == expected


@pytest.mark.parametrize(
    ("target", "present", "expected"),
    [(60, None, "put"), (60, True, "put"), (None, True, "delete"), (None, False, None), (None, None, None)],
)
def test_asg_policy_change(target, present, expected):
    pool = _pool(**({"targetCpuPercent": target} if target else {}))
    assert policy_change(pool, present) == expected
