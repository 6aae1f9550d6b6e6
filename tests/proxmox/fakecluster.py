"""A fake Proxmox VE cluster for the tests: fakepve (unmodified, AGPL-3.0, a test-only extra) served on
127.0.0.1 over TLS, with a template VM, an API token, and a guest player.

What fakepve cannot know, and how the tests deal with it:
- Nothing boots. `GuestPlayer` plays each clone's QEMU guest agent once the VM runs: it reads the NoCloud
  ISO vmplane uploaded and attached (the bytes the fake received), and only when that ISO carries a
  cloud-config does it answer as a guest that ran it (the sentinel file present, commands answering).
- Agent file writes are validated but not stored. SDN objects are stored (tests/proxmox/fakesdn.py), as
  PVE 8+ has SDN on every cluster; `serve(..., sdn=False)` keeps fakepve's own made-up SDN answers.
- Tasks take time (tests/proxmox/fakeqemu.py: a clone 0.3 s, a start 0.2 s; `timed=False` ends each task
  before its UPID is answered, fakepve's default) and `resize` grows the disk and its volume.
- A clone keeps pointing at the template's cloud-init CD-ROM volume (real PVE makes `vm-<newid>-cloudinit`),
  so purging a clone deletes the template's volume. The template here has no cloud-init drive, as
  `vmplane proxmox init-node` makes it (vmplane delivers cloud-init on its own ISO).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fakepve import FakePve
from fakepve.certs import make_cert
from tests.proxmox.fakeqemu import QemuExtras
from tests.proxmox.fakesdn import SdnApi

HOST = "127.0.0.1"
TOKEN_USER = "vmplane@pve"
TOKEN_NAME = "ci"
TOKEN_SECRET = "0c5e1d2a-7f41-4b1e-9d3c-5a6b7c8d9e0f"  # the fake's own; nothing real
TEMPLATE_VMID = 9000
TEMPLATE_NAME = "debian-12-cloud"


class RecordingPve(FakePve):  # type: ignore[misc]
    """FakePve that keeps every uploaded file's bytes (the fake keeps only the last upload's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.files: dict[str, bytes] = {}  # "<storage>:iso/<name>" -> bytes

    async def _upload(self, request: Any) -> Any:
        response = await super()._upload(request)
        fields = self.uploaded or {}
        if "filename" in fields:
            self.files[f"{request.match_info['storage']}:{fields.get('content')}/{fields['filename']}"] = bytes(
                fields.get("data", b"")
            )
        return response


class Serving:
    """A RecordingPve on its own event loop in a daemon thread (like fakepve's pytest plugin)."""

    def __init__(self, pve: RecordingPve, certfile: str, keyfile: str) -> None:
        self.pve = pve
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fakepve", daemon=True)
        self.thread.start()
        self.call(pve.start(certfile, keyfile))

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def run(self, fn: Any, *args: Any) -> Any:
        """Run `fn(*args)` on the fake's loop: the model is not thread-safe."""

        async def inner() -> Any:
            return fn(*args)

        return self.call(inner())

    def stop(self) -> None:
        try:
            self.call(self.pve.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(30)


def add_template(pve: FakePve, vmid: int = TEMPLATE_VMID, name: str = TEMPLATE_NAME, node: str = "pve1") -> Any:
    """A cloud-image template as `vmplane proxmox init-node` makes it: one scsi disk on local-lvm, the agent
    on, a virtio NIC on vmbr0, a serial console; no cloud-init drive (vmplane attaches its own ISO)."""
    # The base volume the config names, with its size, so a clone and a resize have a size to start from.
    pve.storages["local-lvm"].setdefault("volumes", {})[f"base-{vmid}-disk-0"] = {
        "content": "images",
        "format": "raw",
        "size": 3 * 1024**3,
        "vmid": vmid,
        "ctime": 0,
    }
    vm = pve.add_vm(
        vmid,
        name,
        node=node,
        template=True,
        config={
            "scsi0": f"local-lvm:base-{vmid}-disk-0,size=3G",
            "scsihw": "virtio-scsi-single",
            "boot": "order=scsi0",
            "agent": "enabled=1",
            "net0": "virtio=BC:24:11:00:90:00,bridge=vmbr0",
            "serial0": "socket",
            "vga": "serial0",
            "ostype": "l26",
            "cores": 1,
            "memory": 1024,
        },
    )
    return vm


class QemuPve(QemuExtras, RecordingPve):
    """RecordingPve with resize applied and tasks that take time (fakeqemu.py), without stored SDN."""


class SdnPve(QemuExtras, SdnApi, RecordingPve):
    """QemuPve that also stores its SDN objects (fakesdn.py): the default."""


TIME_SCALE = 0.05  # PVE seconds -> real ones: fakeqemu's 6 s clone takes 0.3 s; PVE's 10 s lock wait 0.5 s


@contextmanager
def serve(
    pki_dir: Path, *, nodes: tuple[str, ...] = ("pve1",), sdn: bool = True, timed: bool = True
) -> Iterator[Serving]:
    certfile, keyfile = make_cert(str(pki_dir), hosts=(HOST,))[:2]
    pve = (SdnPve if sdn else QemuPve)(user="root@pam", password="secret", host=HOST, port=0)
    pve.time_scale = TIME_SCALE if timed else 0
    for node in nodes:
        pve.add_node(node)
    pve.apitokens[f"{TOKEN_USER}!{TOKEN_NAME}"] = TOKEN_SECRET
    add_template(pve)
    serving = Serving(pve, certfile, keyfile)
    serving.cafile = certfile  # type: ignore[attr-defined]
    try:
        yield serving
    finally:
        serving.stop()


def token_env() -> dict[str, str]:
    return {"PROXMOX_TOKEN_ID": f"{TOKEN_USER}!{TOKEN_NAME}", "PROXMOX_TOKEN_SECRET": TOKEN_SECRET}
