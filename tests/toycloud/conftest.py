"""The toy cloud registered in the tests' own process too (they read its files with load_spec), and the
list put back after, so another test's toy named "toy" (tests/envspec/test_cloudspec.py) can register."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.toycloud.plugin import register

from vmplane.clouds import specs


@pytest.fixture(autouse=True, scope="module")
def toy_registered() -> Iterator[None]:
    register()
    yield
    specs.unregister("toy")
