"""`vmplane proxmox init-node`: a node ready for vmplane, over the API (`--apply`) or as a script.

The template comes from a cloud image whose published checksum vmplane reads and hands to PVE's
`download-url`, so the node itself verifies the download before keeping it. Each step checks first and
does only what is missing, so a re-run after a failure (or a kill) converges on what a clean run
leaves; nothing is deleted, except an existing token with `--rotate-token`. The token's secret is
returned once to the caller to print, never logged.
"""

from __future__ import annotations

import contextlib
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from vmplane.clouds.errors import CloudError, ConflictError, NotFoundError
from vmplane.clouds.proxmox.node_init_script import (
    IMAGES,
    Checksum,
    InitOptions,
    bake_script,
    checksum_from_sums,
    commands,
    full_script,
    parse_checksum,
    root_script,
)
from vmplane.clouds.proxmox.session import TASK_TIMEOUT, Pve, PveTarget, token_from_env
from vmplane.clouds.waits import poll

# The CLI reaches the Proxmox package only through this module (pyproject's import contract).
__all__ = [
    "IMAGES",
    "Applied",
    "Checksum",
    "InitOptions",
    "apply",
    "apply_at",
    "commands",
    "fetch_https",
    "full_script",
    "parse_checksum",
    "resolve_checksum",
    "root_script",
]

Fetch = Callable[[str], bytes]
FETCH_TIMEOUT = 30.0
MAX_SUMS_BYTES = 1 << 20  # a SHA512SUMS file is a few KB


def fetch_https(url: str) -> bytes:
    """A checksum file over HTTPS (certificates verified against the system store), never plain HTTP:
    the checksum is what makes the image trustworthy."""
    if urlsplit(url).scheme != "https":
        raise CloudError(f"checksum files are fetched over https only, not {url}", code="InsecureChecksumURL")
    try:
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT) as response:
            if urlsplit(response.geturl()).scheme != "https":  # a redirect may not leave TLS either
                raise CloudError(f"{url} redirected to {response.geturl()}, not https", code="InsecureChecksumURL")
            return bytes(response.read(MAX_SUMS_BYTES))
    except OSError as e:
        raise CloudError(
            f"cannot fetch {url}: {e} (give the image's checksum as --checksum sha512:<hex> to go on without it)",
            code="ChecksumFetch",
        ) from e


def resolve_checksum(o: InitOptions, pinned: Checksum | None, fetch: Fetch, *, read_file: bool) -> Checksum:
    """The checksum to give PVE. A pinned `--checksum` is used as is in a dry run; otherwise (and with
    --apply whenever a checksum file is known) the file is read, and a pin it disagrees with is refused:
    the image was re-released or the pin is wrong, and PVE would reject the download anyway."""
    if o.checksum_url is None or (pinned is not None and not read_file):
        if pinned is None:
            raise CloudError("give --checksum or a checksum file URL for the image", code="NoChecksum")
        return pinned
    text = fetch(o.checksum_url).decode("utf-8", "replace")
    published = checksum_from_sums(text, o.image_file, o.checksum_url)
    if pinned is not None and pinned.tag != published.tag:
        raise CloudError(
            f"--checksum {pinned.algorithm}:{pinned.value[:12]}… does not match {o.checksum_url} "
            f"({published.value[:12]}… for {o.image_file}); nothing was downloaded",
            code="ChecksumMismatch",
        )
    return published


@dataclass
class Outcome:
    key: str
    status: str  # created, updated, skipped
    detail: str


@dataclass
class Applied:
    outcomes: list[Outcome] = field(default_factory=list)
    token_secret: str | None = field(default=None, repr=False)  # only when a token was made this run
    pending_script: str | None = None  # root-only work the template waits for

    def add(self, key: str, status: str, detail: str) -> None:
        self.outcomes.append(Outcome(key, status, detail))


def _absent(fn: Callable[[], Any]) -> Any:
    """`fn()`, or None when PVE says the object does not exist."""
    try:
        return fn()
    except NotFoundError:
        return None


def _vm(pve: Pve, vmid: int) -> dict[str, Any] | None:
    for r in pve.get("cluster/resources", type="vm") or []:
        if str(r.get("vmid")) == str(vmid):
            return dict(r)
    return None


def _ensure_storage(pve: Pve, o: InitOptions, out: Applied) -> None:
    config = pve.get(f"storage/{o.iso_storage}")
    content = [c for c in str(config.get("content", "")).split(",") if c]
    if "import" in content:
        out.add("storage", "skipped", f"{o.iso_storage} already takes import content")
        return
    pve.put(f"storage/{o.iso_storage}", content=",".join([*content, "import"]))
    out.add("storage", "updated", f"{o.iso_storage} content {','.join([*content, 'import'])}")


def _ensure_image(pve: Pve, o: InitOptions, checksum: Checksum, out: Applied) -> None:
    volid = f"{o.iso_storage}:import/{o.import_file(checksum)}"
    # A download a killed run started may still run: let it end (PVE keeps the file only if it verified)
    # rather than start a second one of the same file.
    for task in pve.get(f"nodes/{o.node}/tasks", source="active", typefilter="download") or []:
        mine = task.get("type") == "download" and task.get("id") == o.iso_storage and not task.get("endtime")
        if mine and str(task.get("upid", "")).startswith("UPID:"):
            with contextlib.suppress(CloudError):  # it failed (or is gone): the check below downloads again
                pve.wait_task(o.node, str(task["upid"]), what="an earlier download")
    if _has_volume(pve, o, o.import_file(checksum)):
        out.add("image", "skipped", f"{volid} is there (PVE keeps a download only once its checksum matched)")
        return
    params: dict[str, Any] = {"content": "import", "url": o.image_url, "filename": o.import_file(checksum)}
    params |= {"checksum": checksum.value, "checksum-algorithm": checksum.algorithm}
    path = f"nodes/{o.node}/storage/{o.iso_storage}/download-url"
    pve.run_task("POST", path, node=o.node, what=f"download of {o.image_file}", **params)
    out.add("image", "created", f"{volid} ({checksum.algorithm} verified by the node)")


def _wait_unlocked(pve: Pve, o: InitOptions, node: str) -> dict[str, Any]:
    """The VM's config once no task holds it (a create that an earlier, killed run started may still run)."""

    def unlocked() -> dict[str, Any] | None:
        config = dict(pve.get(f"nodes/{node}/qemu/{o.vmid}/config"))
        return None if config.get("lock") else config

    return poll(unlocked, what=f"VM {o.vmid}'s lock", timeout=TASK_TIMEOUT, cap=3.0)


def _has_volume(pve: Pve, o: InitOptions, file: str) -> bool:
    have = pve.get(f"nodes/{o.node}/storage/{o.iso_storage}/content", content="import") or []
    return any(v.get("volid") == f"{o.iso_storage}:import/{file}" for v in have)


def _ensure_template(pve: Pve, o: InitOptions, checksum: Checksum, out: Applied) -> None:
    """The image, the VM from it and its conversion; a template already there needs none of them."""
    vm = _vm(pve, o.vmid)
    if vm is not None and vm.get("name") != o.name:
        raise ConflictError(f"VMID {o.vmid} is taken by {vm.get('name')!r} on {vm.get('node')}; pass --vmid")
    node = str((vm or {}).get("node") or o.node)
    config = _wait_unlocked(pve, o, node) if vm is not None else {}
    if str(config.get("template", 0)) == "1":
        for key in ("image", "vm", "template"):
            out.add(key, "skipped", f"VM {o.vmid} {o.name} is a template on {node}")
        return
    if vm is None:
        _ensure_image(pve, o, checksum, out)
        if o.bake_agent and not _has_volume(pve, o, o.agent_file(checksum)):
            out.add("vm", "pending", f"waits for {o.agent_file(checksum)}: run the script below, then this again")
            out.pending_script = bake_script(o, checksum)
            return
        params: dict[str, Any] = dict(commands_params(o, checksum))
        pve.run_task("POST", f"nodes/{o.node}/qemu", node=o.node, what=f"create of VM {o.vmid}", **params)
        out.add("vm", "created", f"VM {o.vmid} {o.name} on {o.node} from {o.template_file(checksum)}, agent on")
        config = _wait_unlocked(pve, o, node)
    else:
        out.add("image", "skipped", f"VM {o.vmid} {o.name} exists")
        out.add("vm", "skipped", f"VM {o.vmid} {o.name} exists on {node}")
    if "enabled=1" not in str(config.get("agent", "")) and str(config.get("agent", "")) != "1":
        pve.put(f"nodes/{node}/qemu/{o.vmid}/config", agent="enabled=1")
    pve.run_task("POST", f"nodes/{node}/qemu/{o.vmid}/template", node=node, what=f"template of VM {o.vmid}")
    out.add("template", "created", f"VM {o.vmid} is a template")


def commands_params(o: InitOptions, checksum: Checksum) -> list[tuple[str, str | int]]:
    """`qm create`'s options as API parameters (the same list the script prints)."""
    argv = next(c.argv for c in commands(o, checksum) if c.key == "vm")
    pairs = list(zip(argv[3::2], argv[4::2], strict=True))
    return [("vmid", o.vmid), *((k.removeprefix("--"), v) for k, v in pairs)]


def _ensure_zone(pve: Pve, o: InitOptions, out: Applied) -> None:
    # Match on the exact id: an answer that names another zone is not ours.
    zones = pve.get("cluster/sdn/zones", pending=1) or []
    mine = next((z for z in zones if z.get("zone") == o.zone), None)
    if mine is None:
        pve.post("cluster/sdn/zones", type="simple", zone=o.zone, ipam="pve", dhcp="dnsmasq")
        out.add("zone", "created", f"SDN simple zone {o.zone}")
    elif mine.get("type") != "simple":
        raise ConflictError(f"SDN zone {o.zone} exists with type {mine.get('type')}; pass another --zone")
    else:
        out.add("zone", "skipped", f"SDN zone {o.zone} exists")
        if not mine.get("state"):  # applied already: nothing pending for it
            out.add("sdn-apply", "skipped", "no pending SDN change for the zone")
            return
    upid = pve.put("cluster/sdn")
    if isinstance(upid, str) and upid.startswith("UPID:"):
        pve.wait_task(upid.split(":")[1], upid, what="SDN apply")
    out.add("sdn-apply", "updated", "SDN configuration applied")


def _ensure_access(pve: Pve, o: InitOptions, out: Applied) -> None:
    privs = ",".join(o.privileges)
    role = next((r for r in pve.get("access/roles") or [] if r.get("roleid") == o.role), None)
    if role is None:
        pve.post("access/roles", roleid=o.role, privs=privs)
        out.add("role", "created", f"role {o.role} with {len(o.privileges)} privileges")
    elif set(str(role.get("privs", "")).split(",")) - {""} != set(o.privileges):
        pve.put(f"access/roles/{o.role}", privs=privs)  # no append: exactly these
        out.add("role", "updated", f"role {o.role} set to exactly {len(o.privileges)} privileges")
    else:
        out.add("role", "skipped", f"role {o.role} has exactly the privileges")
    if any(u.get("userid") == o.user for u in pve.get("access/users") or []):
        out.add("user", "skipped", f"user {o.user} exists")
    else:
        pve.post("access/users", userid=o.user, comment="vmplane (API tokens only)")
        out.add("user", "created", f"user {o.user}")
    acl = pve.get("access/acl") or []
    mine = {"path": "/", "roleid": o.role, "ugid": o.user, "type": "user"}
    if any(all(a.get(k) == v for k, v in mine.items()) for a in acl):
        out.add("acl", "skipped", f"{o.user} has {o.role} on /")
    else:
        pve.put("access/acl", path="/", roles=o.role, users=o.user)
        out.add("acl", "created", f"{o.user} has {o.role} on /")
    tokens = _absent(lambda: pve.get(f"access/users/{o.user}/token")) or []
    exists = any(t.get("tokenid") == o.token_name for t in tokens)
    if exists and not o.rotate_token:
        out.add("token", "skipped", f"{o.token_id} exists; its secret was shown once (--rotate-token makes a new one)")
        return
    if exists:
        _absent(lambda: pve.delete(f"access/users/{o.user}/token/{o.token_name}"))
    made = pve.post(f"access/users/{o.user}/token/{o.token_name}", privsep=0, comment="vmplane")
    out.token_secret = str((made or {}).get("value") or "") or None
    out.add("token", "updated" if exists else "created", f"{o.token_id}")


def apply(pve: Pve, o: InitOptions, checksum: Checksum) -> Applied:
    """Every step over the API, each checking first; in the order of the script."""
    out = Applied()
    _ensure_storage(pve, o, out)
    _ensure_template(pve, o, checksum, out)
    _ensure_zone(pve, o, out)
    _ensure_access(pve, o, out)
    return out


def apply_at(
    endpoint: str, ca_file: str | None, o: InitOptions, checksum: Checksum, *, verify_tls: bool = True
) -> Applied:
    """`apply` against the API at `endpoint`, with the admin token from PROXMOX_TOKEN_ID/SECRET."""
    target = PveTarget(endpoint, (o.node,), ca_file=ca_file, verify_tls=verify_tls)
    return apply(Pve(target, token_from_env()), o, checksum)
