"""What a fake cluster holds, read the way an operator would: through the PVE API with proxmoxer (not
through vmplane's own session, so a driver bug cannot hide itself): the SDN objects the fake stores
(fakesdn.py; replayed from the recorded requests for a fake served with `sdn=False`) and the disk volumes
on its storages."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from proxmoxer import ProxmoxAPI
from tests.proxmox.fakecluster import TOKEN_NAME, TOKEN_SECRET, TOKEN_USER, Serving

API = "/api2/json/"
SDN_KINDS = ("zones", "vnets", "subnets")


def client(serving: Serving) -> Any:
    url = urlsplit(serving.pve.url)
    return ProxmoxAPI(
        url.hostname,
        port=url.port,
        user=TOKEN_USER,
        token_name=TOKEN_NAME,
        token_value=TOKEN_SECRET,
        verify_ssl=serving.cafile,  # type: ignore[attr-defined]
    )


def requests(serving: Serving) -> list[tuple[str, str, dict[str, str]]]:
    """Every request the fake saw as (method, path under /api2/json/, form fields)."""
    out = []
    for method, path, body in serving.run(lambda: list(serving.pve.requests)):
        fields: dict[str, str] = {}
        if isinstance(body, bytes) and body and not body.startswith(b"--"):  # multipart uploads: not parsed
            fields = {k: v[-1] for k, v in parse_qs(body.decode(errors="replace")).items()}
        out.append((method, path.removeprefix(API), fields))
    return out


def sdn_state(serving: Serving) -> dict[str, dict[str, dict[str, str]]]:
    """The SDN objects, keyed and spelt as `replayed_sdn` has them (a subnet by `<vnet> <cidr>`, its
    `subnet` the CIDR, every value a string): read through the API when the fake stores them."""
    if not hasattr(serving.pve, "sdn_zones"):
        return replayed_sdn(serving)
    px = client(serving)

    def fields(obj: dict[str, Any], **extra: str) -> dict[str, str]:
        return {k: str(v) for k, v in {**obj, **extra}.items() if k != "digest"}

    vnets = px.cluster.sdn.vnets.get()
    return {
        "zones": {z["zone"]: fields(z) for z in px.cluster.sdn.zones.get()},
        "vnets": {v["vnet"]: fields(v) for v in vnets},
        "subnets": {
            f"{v['vnet']} {s['cidr']}": fields(s, subnet=s["cidr"])
            for v in vnets
            for s in px.cluster.sdn.vnets(v["vnet"]).subnets.get()
        },
    }


def replayed_sdn(serving: Serving) -> dict[str, dict[str, dict[str, str]]]:
    """The SDN objects a real cluster would hold after these requests: each create (POST) adds its
    object with the fields it was given, an update (PUT) changes them, a DELETE removes it."""
    state: dict[str, dict[str, dict[str, str]]] = {kind: {} for kind in SDN_KINDS}
    for method, path, fields in requests(serving):
        parts = path.split("/")
        if parts[:2] != ["cluster", "sdn"] or len(parts) < 3:
            continue
        kind, rest = _sdn_kind(parts[2:])
        if kind is None:
            continue
        if method == "POST" and not rest:
            key = fields.get({"zones": "zone", "vnets": "vnet"}.get(kind, ""), "")
            if kind == "subnets":
                key = f"{parts[3]} {fields.get('subnet', '')}"
            state[kind][key] = dict(fields)
        elif method == "PUT" and rest and rest in state[kind]:
            state[kind][rest].update(fields)
        elif method == "DELETE" and rest:
            state[kind].pop(rest, None)
    return state


def _sdn_kind(parts: list[str]) -> tuple[str | None, str]:
    """`["zones", "vz1"]` -> ("zones", "vz1"); a subnet, whose PVE id is `<zone>-<network>-<prefix>`:
    `["vnets", "vn1", "subnets", "vz1-10.60.0.0-24"]` -> ("subnets", "vn1 10.60.0.0/24")."""
    if len(parts) >= 3 and parts[0] == "vnets" and parts[2] == "subnets":
        if len(parts) == 3:
            return "subnets", ""
        pieces = parts[3].rsplit("-", 2)
        return "subnets", f"{parts[1]} {pieces[1]}/{pieces[2]}" if len(pieces) == 3 else f"{parts[1]} {parts[3]}"
    if parts[0] in ("zones", "vnets"):
        return parts[0], parts[1] if len(parts) > 1 else ""
    return None, ""


def disk_volumes(serving: Serving, px: Any, templates: set[int]) -> list[dict[str, Any]]:
    """Every VM disk volume on every storage that holds images, but the templates' (volid, size)."""
    out = {
        c["volid"]: {"volid": c["volid"], "size": c.get("size")}
        for node in sorted(serving.run(lambda: list(serving.pve.nodes)))
        for s in px.nodes(node).storage.get(content="images")
        for c in px.nodes(node).storage(s["storage"]).content.get(content="images")
        if int(c.get("vmid") or 0) not in templates
    }
    return [out[k] for k in sorted(out)]


def cluster_state(serving: Serving) -> dict[str, Any]:
    """Every VM but the templates (config, power, pool, tags, firewall), every pool with its members, every
    cluster security group with its rules, every ISO on every storage that holds them, every disk volume
    but the templates', the SDN objects."""
    px = client(serving)
    vms = []
    templates: set[int] = set()
    for r in px.cluster.resources.get(type="vm"):
        if r.get("template"):
            templates.add(int(r["vmid"]))
            continue
        q = px.nodes(r["node"]).qemu(r["vmid"])
        vms.append(
            {
                "name": r["name"],
                "vmid": r["vmid"],
                "node": r["node"],
                "status": r["status"],
                "pool": r.get("pool"),
                "config": q.config.get(),
                "firewall": {"options": q.firewall.options.get(), "rules": q.firewall.rules.get()},
            }
        )
    pools = {p["poolid"]: px.pools(p["poolid"]).get() for p in px.pools.get()}
    groups = {
        g["group"]: {"comment": g.get("comment"), "rules": px.cluster.firewall.groups(g["group"]).get()}
        for g in px.cluster.firewall.groups.get()
    }
    isos = sorted(
        c["volid"]
        for node in sorted(serving.run(lambda: list(serving.pve.nodes)))
        for s in px.nodes(node).storage.get(content="iso")
        for c in px.nodes(node).storage(s["storage"]).content.get(content="iso")
    )
    volumes = disk_volumes(serving, px, templates)
    return {
        "vms": vms,
        "pools": pools,
        "groups": groups,
        "isos": sorted(set(isos)),
        "volumes": volumes,
        "sdn": sdn_state(serving),
    }
