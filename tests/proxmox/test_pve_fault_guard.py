"""The fault hook on Proxmox: only the emulator is a sandbox. A loopback address is not enough (a real
cluster reached through an SSH tunnel answers on 127.0.0.1 too): the API must say it is fakepve."""

from __future__ import annotations

from typing import Any

import pytest
from tests.proxmox.fakecluster import Serving
from tests.proxmox.netkit import NODES, cluster, pve
from tests.unit.test_transport import arm

from vmplane.clouds.faults import FAULT_PAUSE_ENV
from vmplane.clouds.proxmox.session import Pve, PveTarget

__all__ = ["cluster", "pve"]  # fixtures

# What a real PVE answers on GET /version (its build's commit as repoid).
REAL_VERSION = {"version": "8.2.4", "release": "8.2", "repoid": "faa83925c9641325"}


class _Api:
    """The proxmoxer client, answering GET /version from `version` and recording each path asked."""

    def __init__(self, version: Any) -> None:
        self.version = version
        self.asked: list[str] = []

    def __call__(self, path: str) -> _Api:
        self.asked.append(path)
        return self

    def get(self, **_: Any) -> Any:
        if isinstance(self.version, Exception):
            raise self.version
        return self.version

    def post(self, **_: Any) -> Any:
        return "UPID:pve1:1:x"


@pytest.fixture
def armed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return arm(monkeypatch, "POST /pools")


def _pve(endpoint: str, version: Any) -> tuple[Pve, _Api]:
    pve = Pve(PveTarget(endpoint, NODES))
    api = _Api(version)
    pve._api = api
    return pve, api


@pytest.mark.parametrize(
    "version",
    [REAL_VERSION, {"version": "8.2.4"}, ["not", "a", "dict"], ConnectionError("refused")],
    ids=["real-pve", "no-repoid", "odd-answer", "no-answer"],
)
def test_a_loopback_api_that_is_not_the_emulator_is_never_hooked(armed: list[str], version: Any) -> None:
    pve, api = _pve("https://127.0.0.1:8006", version)
    assert pve.target.loopback
    pve.post("pools", poolid="p")
    assert pve.transport.hook() is None and armed == []
    assert api.asked.count("version") == 1  # asked once, then remembered


def test_a_remote_api_is_never_asked_what_it_is(armed: list[str]) -> None:
    pve, api = _pve("https://pve.example:8006", {"repoid": "fakepve"})
    pve.post("pools", poolid="p")
    assert pve.transport.hook() is None and armed == [] and "version" not in api.asked


def test_without_the_variable_nothing_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAULT_PAUSE_ENV, raising=False)
    pve, api = _pve("https://127.0.0.1:8006", {"repoid": "fakepve"})
    pve.post("pools", poolid="p")
    assert pve.transport.hook() is None and api.asked == ["pools"]


def test_the_emulator_is_hooked_after_its_mutating_calls_only(cluster: Serving, pve: Pve, armed: list[str]) -> None:
    assert pve.emulator()  # fakepve itself says so
    pve.get("pools")
    pve.post("pools", poolid="vmplane-guard-test", comment="x")
    assert armed == ["POST /pools"]
    pve.delete("pools/vmplane-guard-test")
