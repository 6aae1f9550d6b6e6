"""The toy cloud as the rest of vmplane sees it (vmplane.clouds.descriptor): nothing heavy at import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.toycloud.spec import TOY

from vmplane.clouds.descriptor import Descriptor

if TYPE_CHECKING:
    from vmplane.clouds.base import CloudDriver
    from vmplane.envspec.models import EnvSpec
    from vmplane.target import Target


def _driver(target: Target) -> CloudDriver:
    from tests.toycloud.driver import ToyDriver

    return ToyDriver(target)


def _static_problems(spec: EnvSpec) -> list[str]:
    from tests.toycloud.driver import static_problems

    return static_problems(spec)


DESCRIPTOR = Descriptor(
    cloud=TOY,
    driver=_driver,
    static_problems=_static_problems,
    unpriced="toy: a JSON file costs nothing",
)
