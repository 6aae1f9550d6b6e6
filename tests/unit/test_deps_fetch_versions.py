"""Version ordering for the highest-version pick: dpkg's (with dpkg's own cases) and rpmvercmp's."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from vmplane.deps.debver import debian_compare, rpm_compare, rpm_evr_compare

# (a, b, sign of the comparison): dpkg's lib/dpkg/t/t-version.c and Debian Policy 5.6.12's examples.
DPKG_CASES = [
    ("1.0", "1.0", 0),
    ("0:1.0", "1.0", 0),
    ("1.0", "1.00", 0),
    ("1:1.0-1", "1:1.0-1", 0),
    ("1.0-0", "1.0", 0),
    ("0:1.1", "1:1.0", -1),
    ("2:0.1", "1:9.9", 1),
    ("1.2", "1.10", -1),
    ("1.0~rc1", "1.0", -1),
    ("1.0~rc1", "1.0~rc2", -1),
    ("1~~", "1~~a", -1),
    ("1~~a", "1~", -1),
    ("1~", "1", -1),
    ("1", "1a", -1),
    ("1.0a", "1.0+", -1),  # letters sort before other characters
    ("1.0", "1.0-0.1", -1),
    ("1.2.3", "1.2.3-1", -1),
    ("7.6p2-4", "7.6-0", 1),
    ("1.0.3-3", "1.0-1", 1),
    ("1.0-1-1", "1.0-1", 1),  # the revision is after the last hyphen
    ("1.6.20~ds1-1+deb12u3", "1.6.20~ds1-1+deb12u2", 1),
    ("29.1.3-0ubuntu3~24.04.2", "24.0.7-0ubuntu4", 1),
    ("26.1.3-0ubuntu1~24.04.1", "26.1.3-0ubuntu1", -1),
]


@pytest.mark.parametrize(("a", "b", "sign"), DPKG_CASES)
def test_debian_ordering_matches_dpkg_cases(a: str, b: str, sign: int) -> None:
    got = debian_compare(a, b)
    assert (got > 0) - (got < 0) == sign
    back = debian_compare(b, a)
    assert (back > 0) - (back < 0) == -sign


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="dpkg is not installed here")
def test_debian_ordering_agrees_with_dpkg_itself() -> None:
    for a, b, _ in DPKG_CASES:
        for op, want in (("lt", debian_compare(a, b) < 0), ("eq", debian_compare(a, b) == 0)):
            run = subprocess.run(["dpkg", "--compare-versions", a, op, b], check=False)
            assert (run.returncode == 0) == want, (a, op, b)


RPM_CASES = [
    ("1.0", "1.0", 0),
    ("1.0", "1_0", 0),
    ("1.0", "2.0", -1),
    ("2.0.1", "2.0", 1),
    ("2.0.1a", "2.0.1", 1),
    ("5.5p1", "5.5p2", -1),
    ("5.5p10", "5.5p2", 1),
    ("10xyz", "10.1xyz", -1),
    ("xyz10", "xyz10.1", -1),
    ("a", "1", -1),
    ("1b", "1a", 1),
    ("1.0~rc1", "1.0", -1),
    ("1.0~rc1", "1.0~rc2", -1),
    ("1.0^", "1.0", 1),
    ("1.0^git1", "1.0", 1),
    ("1.0^git1", "1.0.1", -1),
    ("1.0^git1", "1.01", -1),
    ("1.7.27", "1.7.25", 1),
]


@pytest.mark.parametrize(("a", "b", "sign"), RPM_CASES)
def test_rpm_ordering_matches_rpmvercmp_cases(a: str, b: str, sign: int) -> None:
    got = rpm_compare(a, b)
    assert (got > 0) - (got < 0) == sign
    assert -((got > 0) - (got < 0)) == ((rpm_compare(b, a) > 0) - (rpm_compare(b, a) < 0))


def test_rpm_epoch_wins_over_version_and_release() -> None:
    assert rpm_evr_compare(("1", "1.0", "1"), ("0", "9.9", "9")) > 0
    assert rpm_evr_compare(("0", "1.0", "2.amzn2023"), ("", "1.0", "1.amzn2023")) > 0
    assert rpm_evr_compare(("0", "1.0", "1"), ("0", "1.0", "1")) == 0
