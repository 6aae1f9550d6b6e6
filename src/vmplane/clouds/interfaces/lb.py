"""The load balancer part (optional: a driver without one has `lb = None`).

Its parts in neutral words; the step names are the seed's: the frontend (stepCreateLoadBalancer: the ALB,
or GCP's address and forwarding side), the backend (stepCreateTargetGroup: what the VMs are registered
in), the listeners (stepCreateListener) and the DNS record. `prepare` starts what takes the cloud long
(a certificate's DNS validation) inside stepCreateIAM, which needs nothing but the spec.
"""

from __future__ import annotations

import abc

from vmplane.clouds.context import Context
from vmplane.clouds.records import PlannedResource
from vmplane.envspec.models import EnvSpec
from vmplane.state import InfraConfig


class LoadBalancer(abc.ABC):
    def prepare(self, ctx: Context) -> None:
        """Start what the LB steps wait for later (a certificate request); nothing by default."""
        return None

    @abc.abstractmethod
    def ensure_frontend(self, ctx: Context) -> None:
        """stepCreateLoadBalancer."""

    @abc.abstractmethod
    def ensure_backend(self, ctx: Context) -> None:
        """stepCreateTargetGroup, and after a scale: registers the VMs."""

    @abc.abstractmethod
    def ensure_listener(self, ctx: Context) -> None:
        """stepCreateListener."""

    @abc.abstractmethod
    def ensure_dns_record(self, ctx: Context) -> None:
        """stepCreateDNSRecord."""

    @abc.abstractmethod
    def detach(self, ctx: Context, *, keep_vms: bool) -> None:
        """Remove the LB and what only it needs; `keep_vms`: the VMs stay and get their internal ingress back."""

    @abc.abstractmethod
    def resources(self, spec: EnvSpec) -> list[PlannedResource]:
        """What the LB steps create (also the plan of `vmplane lb attach`); pure."""

    @abc.abstractmethod
    def teardown_resources(self, infra: InfraConfig) -> list[PlannedResource]:
        """What detaching the recorded LB deletes; pure."""
