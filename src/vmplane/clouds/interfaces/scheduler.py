"""The scheduler part (optional: `scheduler = None` on a cloud without one; stepValidate refuses a
scheduled pool there from `capabilities.schedules`)."""

from __future__ import annotations

import abc

from vmplane.clouds.context import Context


class Scheduler(abc.ABC):
    @abc.abstractmethod
    def ensure(self, ctx: Context) -> None:
        """Make the cloud's own schedulers match every pool's `schedule`: create, update in place, and
        remove those of pools that no longer have one. Runs after the VMs exist (stepCreateVMs, scale,
        rotate), because a schedule may name the pool's instances."""

    @abc.abstractmethod
    def delete(self, ctx: Context) -> None:
        """Remove every schedule of the job (found in the cloud, not only in the record), before its VMs go."""
