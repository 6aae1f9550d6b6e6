"""The typed face of proxmoxer, the little of it vmplane touches.

proxmoxer builds a resource per path at run time (`api("nodes/pve1/qemu")`) and sends a request when one
of the four verb methods is called with the path's parameters, so the library has no types. Every call
vmplane makes goes through `Pve.request` (session.py), which takes the verb as `Method`: a misspelled verb
is a type error instead of an AttributeError from proxmoxer. Answers stay `Any`: they are whatever JSON
PVE returns for the path (a dict, a list of dicts, a UPID string, or None).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

Method = Literal["GET", "POST", "PUT", "DELETE"]


class Resource(Protocol):
    """`ProxmoxResource`: one path; each verb sends its request with the parameters as keywords."""

    def get(self, **params: Any) -> Any: ...
    def post(self, **params: Any) -> Any: ...
    def put(self, **params: Any) -> Any: ...
    def delete(self, **params: Any) -> Any: ...


class ProxmoxApi(Protocol):
    """`ProxmoxAPI`: called with a path (no leading slash), it gives that path's resource."""

    def __call__(self, path: str) -> Resource: ...
