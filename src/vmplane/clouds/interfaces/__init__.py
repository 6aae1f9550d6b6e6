"""The narrow parts a driver is made of (libcloud's split of compute, load balancer and DNS drivers).

A driver (`clouds.base.CloudDriver`) is their composition: `network`, `identity` (or None: the cloud gives
VMs no identity), `pools`, `lb` (or None: no load balancer), `exec_channel`, `scheduler` (or None) and
`inventory`. What a driver lacks is a missing part, so a capability follows from the object, not from a
message; the pipeline's steps (`pipeline.steps`) call these parts.
"""

from vmplane.clouds.interfaces.composition import Parts
from vmplane.clouds.interfaces.exec import ExecChannel
from vmplane.clouds.interfaces.identity import Identity
from vmplane.clouds.interfaces.inventory import Inventory
from vmplane.clouds.interfaces.lb import LoadBalancer
from vmplane.clouds.interfaces.network import Network
from vmplane.clouds.interfaces.pools import Pools
from vmplane.clouds.interfaces.scheduler import Scheduler

__all__ = ["ExecChannel", "Identity", "Inventory", "LoadBalancer", "Network", "Parts", "Pools", "Scheduler"]
