"""The NoCloud seed vmplane boots a Proxmox VM with: an ISO 9660 image labelled `cidata` holding
`user-data`, `meta-data` and `network-config` (cloud-init's NoCloud datasource reads a volume with
that label). Built with pycdlib because the API cannot upload a snippet (`content=snippets` is refused);
the ISO goes up as `iso` content and is attached as a CD-ROM.

Deterministic: the same documents give the same bytes (every date pinned), so a re-run compares the
file on the storage with what it would upload and uploads only when they differ.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from time import struct_time
from typing import Any

import yaml

VOLUME_ID = "cidata"  # what cloud-init's NoCloud datasource looks for
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # pinned: no date of the build in the bytes
_CLOCKED = ("dates", "headervd", "inplaceeditor", "pycdlib", "udf", "utils")  # pycdlib modules that `import time`
_BUILD_LOCK = threading.Lock()
# DHCP on the first NIC, whatever the guest calls it (the SDN subnet's dnsmasq answers).
DHCP_NETWORK_CONFIG = yaml.safe_dump(
    {"version": 2, "ethernets": {"nic0": {"match": {"name": "e*"}, "dhcp4": True}}}, sort_keys=True
)


@dataclass(frozen=True)
class Seed:
    """The three NoCloud documents of one VM."""

    user_data: str
    meta_data: str
    network_config: str | None = DHCP_NETWORK_CONFIG


def meta_data(instance_id: str, hostname: str) -> str:
    """cloud-init runs its per-instance modules again only for a new `instance-id`: it is the VM's id
    plus its pool's config version, so a changed bootstrap re-runs on a replaced VM, never on a reboot."""
    return yaml.safe_dump({"instance-id": instance_id, "local-hostname": hostname}, sort_keys=True)


def nocloud_iso(user_data: str, meta_data: str, network_config: str | None) -> bytes:
    """The `cidata` ISO's bytes (Joliet and Rock Ridge names, so the guest sees `user-data`, not `USERDATA.;1`)."""
    import pycdlib

    files = [("user-data", user_data), ("meta-data", meta_data)]
    if network_config is not None:
        files.append(("network-config", network_config))
    out = io.BytesIO()
    with _fixed_dates():
        iso = pycdlib.PyCdlib()
        iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident=VOLUME_ID)
        for name, text in files:
            data = text.encode()
            iso_name = "/" + name.replace("-", "").upper()[:8] + ".;1"
            iso.add_fp(io.BytesIO(data), len(data), iso_name, rr_name=name, joliet_path=f"/{name}")
        iso.write_fp(out)
        iso.close()
    return out.getvalue()


def read_nocloud_iso(data: bytes) -> dict[str, str]:
    """The documents in a `cidata` ISO by name (what the guest would read); {} if it is not one."""
    import pycdlib
    from pycdlib.pycdlibexception import PyCdlibException

    iso = pycdlib.PyCdlib()
    try:
        iso.open_fp(io.BytesIO(data))
    except PyCdlibException:
        return {}
    try:
        if iso.pvd.volume_identifier.decode().strip() != VOLUME_ID:
            return {}
        out = {}
        for child in iso.list_children(joliet_path="/"):
            name = child.file_identifier().decode("utf-16_be")
            if name in (".", "..", "\x00", "\x01"):
                continue
            buf = io.BytesIO()
            iso.get_file_from_iso_fp(buf, joliet_path=f"/{name}")
            out[name] = buf.getvalue().decode()
        return out
    finally:
        iso.close()


class _FixedClock:
    """What pycdlib's modules see as `time` while vmplane builds an ISO: a clock stopped at `_EPOCH`, in
    UTC (pycdlib stamps every record with `time.time()` in local time)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def time(self) -> float:
        return _EPOCH.timestamp()

    def localtime(self, secs: float | None = None) -> struct_time:
        return time.gmtime(_EPOCH.timestamp() if secs is None else secs)


@contextmanager
def _fixed_dates() -> Iterator[None]:
    """pycdlib's own `time` references pointed at `_FixedClock` (the global `time` module is untouched;
    pycdlib is used only here, one build at a time)."""
    import pycdlib

    modules = [getattr(pycdlib, m) for m in _CLOCKED if hasattr(pycdlib, m)]
    with _BUILD_LOCK:
        saved = [m.time for m in modules]
        for m in modules:
            m.time = _FixedClock()
        try:
            yield
        finally:
            for m, t in zip(modules, saved, strict=True):
                m.time = t
