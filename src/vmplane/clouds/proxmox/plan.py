"""What applying or destroying a Proxmox environment does, named as the steps name it (pure)."""

from __future__ import annotations

from vmplane.clouds.base import PlannedResource
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig


def provision_resources(spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
    raise NotImplementedError


def teardown_resources(infra: InfraConfig) -> list[PlannedResource]:
    raise NotImplementedError
