"""A small SDN emulation for fakepve (which validates SDN requests against PVE's schema but stores none):
zones, VNets and subnets kept in memory and listed back, so drift can read the SNAT flag, see a subnet
deleted, and a teardown's deletes are visible. Served only by `serve(..., sdn=True)`: the other tests
keep fakepve's own made-up SDN answers, which vmplane must never take for its own objects.

What it cannot know and does not model: PVE lists the pending (edited) configuration by default and
`PUT /cluster/sdn` makes it the running one on every node; here an edit is listed at once and the apply
(fakepve's generic answer: a task that succeeds) changes nothing. No dnsmasq, no IPAM, no NAT happens.
The messages are PVE's (`PVE/API2/Network/SDN/*.pm`), so vmplane's error translation sees the real words.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from typing import Any

from fakepve.routing import StatefulRoutes, die, split_list

ZONES, VNETS = "/cluster/sdn/zones", "/cluster/sdn/vnets"
SUBNETS = VNETS + "/{vnet}/subnets"
_META = ("lock-token", "digest", "delete", "pending", "running")


def _digest(objects: dict[str, dict[str, Any]]) -> str:
    return hashlib.sha1(json.dumps(objects, sort_keys=True, default=str).encode()).hexdigest()


def _fields(values: dict[str, Any], *skip: str) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k not in _META and k not in skip and v is not None}


def subnet_id(zone: str, cidr: str) -> str:
    net = ipaddress.ip_network(cidr, strict=False)
    return f"{zone}-{net.network_address}-{net.prefixlen}"


class SdnApi(StatefulRoutes):  # type: ignore[misc]
    """Mixin of FakePve (before it in the bases): the stored SDN objects and their routes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sdn_zones: dict[str, dict[str, Any]] = {}
        self.sdn_vnets: dict[str, dict[str, Any]] = {}
        self.sdn_subnets: dict[str, dict[str, Any]] = {}  # PVE's subnet id -> the subnet

    def _routes_sdn(self) -> list[tuple[str, str, Any]]:
        return [
            ("GET", ZONES, self._zone_list),
            ("POST", ZONES, self._zone_create),
            ("GET", ZONES + "/{zone}", self._zone_read),
            ("PUT", ZONES + "/{zone}", self._zone_update),
            ("DELETE", ZONES + "/{zone}", self._zone_delete),
            ("GET", VNETS, self._vnet_list),
            ("POST", VNETS, self._vnet_create),
            ("GET", VNETS + "/{vnet}", self._vnet_read),
            ("PUT", VNETS + "/{vnet}", self._vnet_update),
            ("DELETE", VNETS + "/{vnet}", self._vnet_delete),
            ("GET", SUBNETS, self._subnet_list),
            ("POST", SUBNETS, self._subnet_create),
            ("GET", SUBNETS + "/{subnet}", self._subnet_read),
            ("PUT", SUBNETS + "/{subnet}", self._subnet_update),
            ("DELETE", SUBNETS + "/{subnet}", self._subnet_delete),
        ]

    # ---- zones ----
    def _listed(self, objects: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        digest = _digest(objects)
        return [{**objects[k], "digest": digest} for k in sorted(objects)]

    async def _zone_list(self, v: dict[str, Any], user: str) -> Any:
        return [z for z in self._listed(self.sdn_zones) if v.get("type") in (None, z.get("type"))]

    async def _zone_create(self, v: dict[str, Any], user: str) -> Any:
        zone = v["zone"]
        if zone in self.sdn_zones:
            raise die(f"sdn zone object ID '{zone}' already defined")
        self.sdn_zones[zone] = _fields(v)

    def _zone(self, zone: str) -> dict[str, Any]:
        if zone not in self.sdn_zones:
            raise die(f"sdn zone object ID '{zone}' does not exist")
        return self.sdn_zones[zone]

    async def _zone_read(self, v: dict[str, Any], user: str) -> Any:
        return {**self._zone(v["zone"]), "digest": _digest(self.sdn_zones)}

    async def _zone_update(self, v: dict[str, Any], user: str) -> Any:
        _update(self._zone(v["zone"]), v, "zone")

    async def _zone_delete(self, v: dict[str, Any], user: str) -> Any:
        zone = v["zone"]
        self._zone(zone)
        used = sorted(n for n, vnet in self.sdn_vnets.items() if vnet.get("zone") == zone)
        if used:
            raise die(f"zone {zone} is used by vnet {used[0]}")
        del self.sdn_zones[zone]

    # ---- vnets ----
    async def _vnet_list(self, v: dict[str, Any], user: str) -> Any:
        return self._listed(self.sdn_vnets)

    async def _vnet_create(self, v: dict[str, Any], user: str) -> Any:
        vnet = v["vnet"]
        if vnet in self.sdn_vnets:
            raise die(f"sdn vnet object ID '{vnet}' already defined")
        if v.get("zone") not in self.sdn_zones:
            raise die(f"zone '{v.get('zone')}' does not exist")
        self.sdn_vnets[vnet] = {"type": "vnet", **_fields(v)}

    def _vnet(self, vnet: str) -> dict[str, Any]:
        if vnet not in self.sdn_vnets:
            raise die(f"sdn vnet object ID '{vnet}' does not exist")
        return self.sdn_vnets[vnet]

    async def _vnet_read(self, v: dict[str, Any], user: str) -> Any:
        return {**self._vnet(v["vnet"]), "digest": _digest(self.sdn_vnets)}

    async def _vnet_update(self, v: dict[str, Any], user: str) -> Any:
        _update(self._vnet(v["vnet"]), v, "vnet")

    async def _vnet_delete(self, v: dict[str, Any], user: str) -> Any:
        vnet = v["vnet"]
        self._vnet(vnet)
        if any(s["vnet"] == vnet for s in self.sdn_subnets.values()):
            raise die(f"Can't delete vnet {vnet}: it is used by subnets")
        del self.sdn_vnets[vnet]

    # ---- subnets ----
    def _of_vnet(self, vnet: str) -> dict[str, dict[str, Any]]:
        self._vnet(vnet)
        return {k: s for k, s in self.sdn_subnets.items() if s["vnet"] == vnet}

    async def _subnet_list(self, v: dict[str, Any], user: str) -> Any:
        return self._listed(self._of_vnet(v["vnet"]))

    async def _subnet_create(self, v: dict[str, Any], user: str) -> Any:
        vnet = v["vnet"]
        zone = str(self._vnet(vnet).get("zone"))
        cidr = str(ipaddress.ip_network(str(v["subnet"]), strict=False))
        sid = subnet_id(zone, cidr)
        if sid in self.sdn_subnets:
            raise die(f"sdn subnet object ID '{sid}' already defined")
        net = ipaddress.ip_network(cidr)
        subnet = {"subnet": sid, "cidr": cidr, "network": str(net.network_address), "mask": str(net.prefixlen)}
        subnet.update(zone=zone, vnet=vnet, **_fields(v, "subnet", "vnet"))
        if "snat" in subnet:
            subnet["snat"] = int(subnet["snat"])
        self.sdn_subnets[sid] = subnet

    def _subnet(self, vnet: str, sid: str) -> dict[str, Any]:
        found = self._of_vnet(vnet).get(sid)
        if found is None:
            raise die(f"sdn subnet object ID '{sid}' does not exist")
        return found

    async def _subnet_read(self, v: dict[str, Any], user: str) -> Any:
        return {**self._subnet(v["vnet"], v["subnet"]), "digest": _digest(self._of_vnet(v["vnet"]))}

    async def _subnet_update(self, v: dict[str, Any], user: str) -> Any:
        subnet = self._subnet(v["vnet"], v["subnet"])
        _update(subnet, v, "subnet", "vnet")
        if "snat" in subnet:
            subnet["snat"] = int(subnet["snat"])

    async def _subnet_delete(self, v: dict[str, Any], user: str) -> Any:
        self._subnet(v["vnet"], v["subnet"])
        del self.sdn_subnets[v["subnet"]]


def _update(obj: dict[str, Any], values: dict[str, Any], *keys: str) -> None:
    """PVE's update: the given fields set, those named in `delete` removed (the ids never change)."""
    obj.update(_fields(values, *keys))
    for key in split_list(values.get("delete")):
        obj.pop(key, None)
