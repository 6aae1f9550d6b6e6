"""Amazon Web Services, as the rest of vmplane sees it (clouds/descriptor.py). Nothing heavy at import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmplane.clouds.aws.pricing import PRICING
from vmplane.clouds.descriptor import Descriptor, Entry
from vmplane.envspec.base import Cloud

if TYPE_CHECKING:
    from vmplane.clouds.base import CloudDriver
    from vmplane.envspec.models import EnvSpec
    from vmplane.settings import Settings
    from vmplane.target import Target


def _driver(target: Target) -> CloudDriver:
    from vmplane.clouds.aws.driver import AwsDriver
    from vmplane.clouds.aws.session import AwsTarget

    return AwsDriver(AwsTarget(region=target.region, profile=target.profile, endpoint_url=target.endpoint_url))


def _static_problems(spec: EnvSpec) -> list[str]:
    from vmplane.clouds.aws.capabilities import static_problems

    return static_problems(spec)


def _sandbox_port(settings: Settings) -> int:
    return settings.sandbox_port


DESCRIPTOR = Descriptor(
    cloud=Cloud("aws"),
    driver=_driver,
    static_problems=_static_problems,
    sandbox_port=_sandbox_port,
    pricing=PRICING,
    tf_stack=Entry("vmplane.tf.stacks", "AwsStack"),
    sandbox_exec_note=" (moto records SendCommand)",
)
