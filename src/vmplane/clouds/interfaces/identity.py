"""The identity part: what the VMs act as in the cloud (an instance profile, a service account).

Optional: a cloud whose VMs carry no cloud identity has `identity = None`; stepCreateIAM and stepDeleteIAM
then log `Parts.no_identity` and succeed.
"""

from __future__ import annotations

import abc

from vmplane.clouds.context import Context


class Identity(abc.ABC):
    @abc.abstractmethod
    def ensure(self, ctx: Context) -> None:
        """stepCreateIAM: the VMs' role or service account and what it may read."""

    @abc.abstractmethod
    def delete(self, ctx: Context) -> None:
        """stepDeleteIAM."""
