"""The driver contract for the toy cloud (tests/toycloud), a plugin: nothing of vmplane names it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.contract.suite import DriverContract
from tests.contract.toy import ToyAdapter

from vmplane.clouds import registry, specs


class TestToy(DriverContract):
    adapter = ToyAdapter()

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def toy_registered(cls) -> Iterator[None]:
        """In this process too (the suite reads the toy's files with load_spec); the lists put back after."""
        from tests.toycloud.plugin import register

        register()
        yield
        specs.unregister("toy")
        registry.unregister("toy")
