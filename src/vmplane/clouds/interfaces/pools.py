"""The pools part: launch templates and the VMs (fixed VMs or scaling groups) made from them."""

from __future__ import annotations

import abc

from vmplane.clouds.context import Context


class Pools(abc.ABC):
    @abc.abstractmethod
    def ensure_templates(self, ctx: Context) -> None:
        """stepCreateLaunchTemplate: one template per pool, a new version when what it renders changed."""

    @abc.abstractmethod
    def ensure_vms(self, ctx: Context) -> None:
        """stepCreateVMs (and a scale): every pool at its size, running, bootstrap checked (announcing the
        `running` milestone once they run)."""

    @abc.abstractmethod
    def delete_vms(self, ctx: Context) -> None:
        """stepTerminateVMs."""

    @abc.abstractmethod
    def delete_templates(self, ctx: Context) -> None:
        """stepDeleteLaunchTemplate."""

    @abc.abstractmethod
    def rotate(self, ctx: Context, pool_name: str) -> list[str]:
        """Replace the pool's outdated VMs; returns notes for the user (e.g. what the endpoint lacks)."""

    @abc.abstractmethod
    def stop(self, ctx: Context, pool_name: str) -> None:
        """Stop the pool now: Fixed VMs stopped (State=stopped, disks kept), a scaling group sized to 0;
        the pool is added to `infra.StoppedPools`. Idempotent: a stopped pool is done."""

    @abc.abstractmethod
    def start(self, ctx: Context, pool_name: str) -> None:
        """Start a stopped pool: Fixed VMs started and checked ready, a scaling group back to the spec's
        sizes and its VMs waited for; the pool leaves `infra.StoppedPools`. A running pool is done."""
