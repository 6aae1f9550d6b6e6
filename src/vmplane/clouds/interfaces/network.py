"""The network part: the VPC (or bridge), its subnets, egress and the VMs' firewall."""

from __future__ import annotations

import abc

from vmplane.clouds.context import Context


class Network(abc.ABC):
    @abc.abstractmethod
    def ensure(self, ctx: Context) -> None:
        """stepCreateNetwork: the network, its subnets and egress, and the VMs' firewall (announcing the
        `public` milestone where the cloud has one)."""

    @abc.abstractmethod
    def delete_firewall(self, ctx: Context) -> None:
        """stepDeleteSecurityGroup: the VMs' security group / firewall rules, once no VM or LB uses them."""

    @abc.abstractmethod
    def delete(self, ctx: Context) -> None:
        """stepDeleteNetwork: the network if vmplane created it (an existing one is never touched)."""
