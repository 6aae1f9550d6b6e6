"""Azure, as the rest of vmplane sees it (clouds/descriptor.py): a driver that refuses every job (clouds/azure.py).
Azure has no package of its own yet, so its descriptor sits beside its driver module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmplane.clouds.descriptor import Descriptor
from vmplane.envspec.base import Cloud

if TYPE_CHECKING:
    from vmplane.clouds.base import CloudDriver
    from vmplane.envspec.models import EnvSpec
    from vmplane.target import Target


def _driver(target: Target) -> CloudDriver:
    from vmplane.clouds.azure import AzureDriver

    return AzureDriver()


def _static_problems(spec: EnvSpec) -> list[str]:
    from vmplane.clouds.azure import AzureDriver

    return AzureDriver().validate(spec)  # raises ProviderInvalidError: nothing runs on Azure yet


DESCRIPTOR = Descriptor(cloud=Cloud("azure"), driver=_driver, static_problems=_static_problems)
