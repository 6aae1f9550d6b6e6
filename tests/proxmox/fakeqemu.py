"""What fakepve leaves out of a QEMU guest's life and the Proxmox tests need, added as a mixin of FakePve
(before it in the bases), as fakesdn.py does for SDN:

- `PUT /nodes/{node}/qemu/{vmid}/resize` applied (fakepve answers it from the schema and changes nothing):
  the drive's `size=` and its volume on the storage grow, by `+<n>[KMGT]` or to an absolute size; a
  smaller size, a CD-ROM, a missing drive and a locked VM are refused with PVE's messages (the sources are
  fakepve's PVE error catalogue: `qemu-server/src/PVE/API2/Qemu.pm`, resize_vm). Like PVE 8 and 9 it runs
  as a `resize` task (the schema's answer is a UPID).
- Tasks that take time (fakepve's `time_scale` 0 ends every task before its UPID is answered): each task
  type runs for `task_secs[type]` PVE seconds after its checks, `running` until then, so a client that does
  not wait on the UPID sees a clone still locked (`lock: clone`: its config changes are refused with `VM is
  locked (clone)`) and a VM not yet started, and a crash test can kill a run during a clone.
- A VM's NIC needs `SDN.Use` on its bridge or VNet (pve-guest-common's check_vnet_access, which PVE 8+
  runs on every qemu config change that sets a `netN`; fakepve checks it for containers only).

What it cannot know: PVE's real durations (a full clone copies the whole disk; here a fixed time, the same
for every size), and that PVE allocates a clone's disks when the task starts (fakepve's clone allocates
them at its end, after the wait: a leaked volume of a half-done clone is not modelled).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

from fakepve.lxc import SIZE_UNITS, format_size, split_props
from fakepve.model import TaskError
from fakepve.qemu import is_cdrom, join_drive, split_drive, volume_ref
from fakepve.routing import StatefulRoutes, die, param_error
from fakepve.server import USER, params

RESIZE = "/nodes/{node}/qemu/{vmid}/resize"
NET_KEY = re.compile(r"^net\d+$")
SIZE = re.compile(r"^(\+)?(\d+(?:\.\d+)?)([KMGT])?$")  # the schema's pattern, read as resize_vm reads it
# PVE seconds per task type (scaled by time_scale, serve() sets 0.05: a clone takes 0.3 s of wall time).
TASK_SECS = {"qmclone": 6.0, "qmstart": 4.0, "qmstop": 2.0, "qmshutdown": 2.0, "qmdestroy": 2.0, "resize": 2.0}


def drive_bytes(props: dict[str, str]) -> int:
    """The `size=` of a drive's options in bytes (0 when absent)."""
    found = SIZE.match(str(props.get("size", "")))
    if not found:
        return 0
    return int(float(found.group(2)) * SIZE_UNITS.get(found.group(3) or "", 1))


class QemuExtras(StatefulRoutes):  # type: ignore[misc]
    """Mixin of FakePve: resize applied, tasks with a duration."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task_secs: dict[str, float] = dict(TASK_SECS)
        self.held: set[str] = set()  # task types whose next task is held (hold())
        self.gates: dict[int, asyncio.Event] = {}  # VMID -> the gate its held task waits on
        self.met_running: list[int] = []  # VMIDs whose held task a client met still running

    def hold(self, ttype: str) -> None:
        """The next task of `ttype` stays `running` (its VM locked) until a client reads that VM's
        `status/current` while it runs: a crash test's resumed run then meets the task still running,
        whatever the machine's speed (no race between the kill and the task's end). Needs a time_scale:
        at 0 a task runs inside its request, which would then never answer."""
        if not self.time_scale:
            raise ValueError("hold() needs tasks that run after their UPID is answered (time_scale > 0)")
        self.held.add(ttype)

    async def task(  # fakepve's Model.task, each body delayed by its type's duration
        self,
        node: str,
        ttype: str,
        tid: Any,
        user: str,
        body: Callable[[], Awaitable[Any]],
        vm: Any = None,
        lock: bool = True,
        log: Any = (),
    ) -> Any:
        secs = self.task_secs.get(ttype, 0.0)
        gate = None
        if ttype in self.held and vm is not None:
            self.held.discard(ttype)
            gate = self.gates[vm.vmid] = asyncio.Event()

        async def timed() -> Any:
            if gate is not None:
                await gate.wait()
            await self.pause(secs)
            return await body()

        return await super().task(node, ttype, tid, user, timed if secs or gate else body, vm=vm, lock=lock, log=log)

    async def _status_current(self, request: Any) -> Any:
        """fakepve's answer, then the VM's held task (if any) is let go: the client saw it running."""
        response = await super()._status_current(request)
        gate = self.gates.pop(int(request.match_info["vmid"]), None)
        if gate is not None:
            self.met_running.append(int(request.match_info["vmid"]))
            gate.set()
        return response

    def _check_bridges(self, request: Any, p: dict[str, Any]) -> None:
        """PVE 8+'s check_bridge_access, before the config is written or its task forked (a 403, not a task
        error; fakepve checks it for containers only): a NIC on a bridge or VNet needs SDN.Use on
        `/sdn/zones/<the VNet's zone, or localnetwork>/<bridge>`."""
        for key in sorted(k for k in p if NET_KEY.match(k)):
            bridge = split_props(str(p[key]))[1].get("bridge")
            if bridge:
                vnet = getattr(self, "sdn_vnets", {}).get(bridge)
                zone = vnet.get("zone") if vnet else "localnetwork"
                self.require(request[USER], f"/sdn/zones/{zone}/{bridge}", "SDN.Use")

    async def _config_put(self, request: Any) -> Any:
        self._check_bridges(request, await params(request))
        return await super()._config_put(request)

    async def _config_post(self, request: Any) -> Any:
        self._check_bridges(request, await params(request))
        return await super()._config_post(request)

    def _routes_resize(self) -> list[tuple[str, str, Any]]:
        return [("PUT", RESIZE, self._qm_resize)]

    async def _qm_resize(self, v: dict[str, Any], user: str) -> Any:
        """qemu-server's resize_vm: checks first (HTTP errors), then the growth in a `resize` task."""
        vm = self.find(v["node"], v["vmid"])
        if v.get("skiplock") and user != "root@pam":
            raise param_error(skiplock="Only root may use this option.")
        if v.get("digest") and v["digest"] != vm.digest():
            raise die("checksum mismatch (file change by other user?)")
        if not v.get("skiplock"):
            self._check_lock(vm)
        disk = v["disk"]
        if disk not in vm.config:
            raise die(f"disk '{disk}' does not exist")
        volume, props = split_drive(vm.config[disk])
        if is_cdrom(volume, props):
            raise die("you can't resize a cdrom")
        sid = volume_ref(volume)[0]
        if sid is None:
            raise die(f"disk '{disk}' has no associated volume")
        self.require(user, f"/storage/{sid}", "Datastore.AllocateSpace")
        stored = self._qm_volume(volume)
        size = int(stored.get("size") or 0) if stored else drive_bytes(props)
        found = SIZE.match(str(v["size"]))
        if not found:  # the schema's pattern already refused it; kept for a direct call
            raise param_error(size=f"value does not match the regex pattern: {v['size']}")
        amount = int(float(found.group(2)) * SIZE_UNITS.get(found.group(3) or "", 1))
        new = size + amount if found.group(1) else amount
        if new < size:
            raise die("shrinking disks is not supported")

        async def body() -> None:
            if vm.lock:
                raise TaskError(f"VM is locked ({vm.lock})")
            if new == size:
                return
            current = self._qm_volume(volume)
            if current is not None:
                store = self.storages[sid]
                if "avail" in store:
                    store["avail"] -= new - int(current.get("size") or 0)
                current["size"] = new
            vm.config[disk] = join_drive(volume, {**props, "size": format_size(new)})

        return await self.task(vm.node, "resize", vm.vmid, user, body, vm=vm)
