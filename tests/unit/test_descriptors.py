"""clouds/descriptor.py and the registry: every per-cloud fact the rest of vmplane uses comes from the cloud's
descriptor, so a cloud registered from outside the list (a plugin, a toy) is served through the same seams."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from vmplane.clouds import registry
from vmplane.clouds.descriptor import Descriptor
from vmplane.clouds.errors import UnsupportedError
from vmplane.cost.estimate import estimate
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import Cloud
from vmplane.settings import Settings
from vmplane.target import Target

from .support import variant

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def toy() -> Iterator[Descriptor]:
    """A toy cloud in the place of Azure (a member of the Cloud enum the spec can name), put back after."""
    before = registry.descriptor_for(Cloud.azure)
    made: list[Target] = []

    def driver(target: Target) -> Any:
        made.append(target)
        return SimpleNamespace(cloud=Cloud.azure, target=target)

    toy = Descriptor(
        cloud=Cloud.azure,
        driver=driver,
        static_problems=lambda spec: [f"toy: {spec.name} checked"],
        sandbox_port=lambda settings: 4999,
        unpriced="toy: nothing here is rented",
    )
    registry.register(toy)
    yield toy
    registry.register(before)


def test_a_registered_cloud_is_served_through_every_seam(toy: Descriptor, spec: Any) -> None:
    on_toy = variant(spec, provider={"cloud": "azure", "region": "westeurope"}, exec={"mode": "AzureRunCmd"})
    target = Target(cloud=Cloud.azure, region="westeurope")
    assert registry.driver_for(target).target is target
    assert registry.static_problems(on_toy) == [f"toy: {on_toy.name} checked"]
    assert registry.sandbox_address(Cloud.azure, Settings()) == "http://127.0.0.1:4999"
    running = SimpleNamespace(endpoint="http://aws", endpoint_for=lambda cloud: f"http://{cloud.value}")
    assert registry.sandbox_endpoint(Cloud.azure, running) == "http://azure"
    assert estimate(on_toy).missing == ["toy: nothing here is rented"]
    assert Cloud.azure in registry.FACTORIES and registry.descriptor_for("azure") is toy


def test_registering_again_replaces_the_cached_driver(toy: Descriptor) -> None:
    target = Target(cloud=Cloud.azure, region="westeurope")
    first = registry.driver_for(target)
    registry.register(replace(toy))
    assert registry.driver_for(target) is not first


def test_a_cloud_the_sandbox_does_not_emulate_gets_the_aws_endpoint() -> None:
    running = SimpleNamespace(endpoint="http://aws", endpoint_for=lambda cloud: f"http://{cloud.value}")
    assert registry.sandbox_endpoint(Cloud.proxmox, running) == "http://aws"
    assert registry.sandbox_endpoint(Cloud.gcp, running) == "http://gcp"
    assert registry.sandbox_endpoint(None, running) == "http://aws"
    ports = Settings(sandbox_port=4100, gcp_sandbox_port=4200)
    assert [registry.sandbox_address(c, ports) for c in (Cloud.aws, Cloud.gcp, Cloud.proxmox, None)] == [
        "http://127.0.0.1:4100",
        "http://127.0.0.1:4200",
        "http://127.0.0.1:4100",
        "http://127.0.0.1:4100",
    ]


def test_an_unknown_cloud_is_a_typed_refusal() -> None:
    with pytest.raises(UnsupportedError, match="'toy' is not a known cloud"):
        registry.descriptor_for("toy")


def test_proxmox_nodes_travel_in_the_placement_and_an_old_record_still_works() -> None:
    pve = load_spec(EXAMPLES / "proxmox.jsonc")
    target = Target.for_spec(pve, None)
    assert target.placement and target.region == ",".join(target.placement)
    old = Target.model_validate({k: v for k, v in target.model_dump().items() if k != "placement"})
    assert old.placement == () and registry.driver_for(old).target.nodes == target.placement
