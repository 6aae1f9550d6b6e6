"""The guest player: what a booted clone's QEMU guest agent would answer, played on fakepve.

Nothing boots and nothing runs. Every 50 ms the player looks at the fake's VMs (on the fake's loop
thread, through `Serving.run`); a running clone whose CD-ROM `ide3` names an ISO whose uploaded bytes
(`Serving.pve.files`) are a NoCloud `cidata` image carrying vmplane's `#cloud-config` bootstrap gets an
agent (`vm.agent`): the sentinel file reads present through `agent/file-read` (saying `"simulated": true`,
which the driver logs), and `agent/exec` answers exit 0 (or what a test programmed with `answer`). A
clone whose ISO is missing, empty or not vmplane's never gets an agent: it never becomes ready, which is
how the tests prove the ISO is what boots it.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.proxmox.fakecluster import Serving

from vmplane.bootstrap.vmconfig import BOOTSTRAP_LOG_PATH
from vmplane.clouds.proxmox.cloudinit_iso import read_nocloud_iso
from vmplane.envspec.models import SENTINEL_PATH

SCRIPT_ARGV = ("/bin/bash", "-c")  # how agent_exec runs a script: the fake keys answers by the joined argv
BOOTSTRAP_MARK = "# vmplane bootstrap:"
CDROM = "ide3"
# The bootstrap's sentinel shape, saying who wrote it (the driver logs that no VM booted).
SENTINEL = json.dumps({"completedAt": "2000-01-01T00:00:00Z", "mode": "nginx", "simulated": True}) + "\n"


def exec_key(script: str) -> str:
    return " ".join([*SCRIPT_ARGV, script])


class GuestPlayer:
    """Plays the guest agent of every clone that boots with a vmplane NoCloud ISO (see the module doc)."""

    def __init__(self, serving: Serving, interval: float = 0.05) -> None:
        self.serving = serving
        self.interval = interval
        self.booted: dict[int, dict[str, str]] = {}  # vmid -> the NoCloud documents it booted with
        self.answers: dict[str, dict[str, Any]] = {}  # exec key -> exec-status answer, for every played VM
        self.bootstrap_fails: set[int] = set()  # vmids whose bootstrap "fails": no sentinel, a log line instead
        self.silenced: set[int] = set()  # vmids whose agent stopped answering (it crashed in the guest)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="guest-player", daemon=True)

    def start(self) -> GuestPlayer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def answer(self, script: str, exitcode: int = 0, out: str = "", err: str = "") -> None:
        """What `agent/exec` of `script` (as agent_exec sends it) answers, on every played VM."""
        self.answers[exec_key(script)] = {"exited": 1, "exitcode": exitcode, "out-data": out, "err-data": err}
        self.serving.run(self._refresh)

    def fail_bootstrap(self, vmid: int) -> None:
        """The VM's bootstrap ends without the sentinel (its log says why)."""
        self.bootstrap_fails.add(vmid)

    def silence(self, vmid: int) -> None:
        """The VM's agent stops answering (and is not played again): PVE says it is not running."""
        self.silenced.add(vmid)

        def off() -> None:
            for vm in self.serving.pve.vms:
                if vm.vmid == vmid:
                    vm.agent = None

        self.serving.run(off)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.serving.run(self.tick)
            except Exception:  # the fake stopped under us at the end of a test
                return

    def tick(self) -> None:
        """One look at the fake's VMs (runs on the fake's loop thread)."""
        pve = self.serving.pve
        for vm in list(pve.vms):
            if vm.template or vm.status != "running" or vm.agent is not None or vm.vmid in self.silenced:
                continue
            docs = self._seed(str(vm.config.get(CDROM, "")))
            user_data = docs.get("user-data", "")
            if not (user_data.startswith("#cloud-config") and BOOTSTRAP_MARK in user_data):
                continue
            self.booted[vm.vmid] = docs
            vm.agent = self._agent(vm.vmid)

    def _seed(self, drive: str) -> dict[str, str]:
        volume = drive.split(",", 1)[0]
        data = self.serving.pve.files.get(volume, b"")
        return read_nocloud_iso(data) if data else {}

    def _agent(self, vmid: int) -> dict[str, Any]:
        files = (
            {BOOTSTRAP_LOG_PATH: "vmplane-bootstrap: FAILED: artifact nginx unpinned\n"}
            if vmid in self.bootstrap_fails
            else {SENTINEL_PATH: SENTINEL}
        )
        return {"exec": dict(self.answers), "files": files}

    def _refresh(self) -> None:
        for vm in self.serving.pve.vms:
            if vm.vmid in self.booted and vm.agent is not None:
                vm.agent["exec"] = dict(self.answers)
