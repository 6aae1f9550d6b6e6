"""What apply and destroy create and delete, named as the steps name them (being built: see issue 10)."""

from __future__ import annotations

from vmplane.clouds.base import PlannedResource
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig


def provision_resources(spec: EnvSpec, infra: InfraConfig, project: str) -> list[PlannedResource]:
    raise NotImplementedError


def lb_resources(spec: EnvSpec) -> list[PlannedResource]:
    raise NotImplementedError


def teardown_resources(infra: InfraConfig) -> list[PlannedResource]:
    raise NotImplementedError


def lb_teardown_resources(infra: InfraConfig) -> list[PlannedResource]:
    raise NotImplementedError
