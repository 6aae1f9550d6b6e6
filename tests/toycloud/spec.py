"""The toy cloud's half of the file: its provider shape and defaults (vmplane.envspec.cloudspec)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from vmplane.envspec.base import Cloud, ExecMode
from vmplane.envspec.cloudspec import CloudSpec, IdPattern, ProviderBase, plain_pool_defaults

TOY = Cloud.extend("toy")  # a plugin's cloud is not a member of the shipped enum


class ToyProvider(ProviderBase):
    # A Literal, as the shipped providers' (`provider` is a union discriminated by it); a value made at run
    # time is no Literal to mypy, which sees the enum.
    if TYPE_CHECKING:
        cloud: Cloud
    else:
        cloud: Literal[TOY] = Field(description="The tests' toy cloud: its resources live in one JSON file.")
    region: str = Field(default="toy-1", pattern=r"^toy-[0-9]$")
    state_file: str = Field(description="The JSON file that is the cloud (created on first use).")

    def target_fields(self, sandbox: bool) -> dict[str, Any]:
        # The file is the cloud's API: it travels in the job's Target as its endpoint.
        return {"api_endpoint": self.state_file}


SPEC = CloudSpec(
    name="toy",
    label="Toy cloud",
    provider=ToyProvider,
    exec_mode=ExecMode.SSM,  # the neutral default; the toy's exec channel only records the command
    secret_stores=(),
    network_id=IdPattern(r"^toy-network-[0-9]+$", "a toy network (toy-network-N)"),
    subnet_id=None,
    fill_pool=plain_pool_defaults({"instanceType": "toy.small", "image": "toy-os"}),
)
