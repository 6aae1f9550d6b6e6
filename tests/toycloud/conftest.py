"""The toy cloud registered in the tests' own process too (they read its files with load_spec), and the
lists put back after: other tests register toys named "toy" (tests/envspec/test_cloudspec.py) or expect
no such cloud (tests/unit/test_descriptors.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vmplane.clouds import registry, specs


@pytest.fixture(autouse=True, scope="module")
def toy_registered() -> Iterator[None]:
    # Imported here: the plugin registers on import, and collection must not leave the toy registered.
    from tests.toycloud.plugin import register

    register()
    yield
    specs.unregister("toy")
    registry.unregister("toy")
