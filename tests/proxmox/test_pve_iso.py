"""The NoCloud `cidata` ISO: read back with pycdlib, as the guest's cloud-init would find it."""

from __future__ import annotations

import io
import time

import pycdlib
import pytest
import yaml

from vmplane.clouds.proxmox.cloudinit_iso import DHCP_NETWORK_CONFIG, meta_data, nocloud_iso, read_nocloud_iso

USER_DATA = "#cloud-config\nruncmd:\n- [/bin/true]\n"


def test_the_iso_holds_the_three_documents_under_their_nocloud_names() -> None:
    data = nocloud_iso(USER_DATA, meta_data("101-0a1b2c3d4e5f", "demo-web-0"), DHCP_NETWORK_CONFIG)
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(data))
    assert iso.pvd.volume_identifier.decode().strip() == "cidata"
    for path in ("/user-data", "/meta-data", "/network-config"):
        out = io.BytesIO()
        iso.get_file_from_iso_fp(out, rr_path=path)  # the Rock Ridge name a Linux guest mounts
        assert out.getvalue()
    iso.close()
    docs = read_nocloud_iso(data)
    assert docs["user-data"] == USER_DATA
    assert yaml.safe_load(docs["meta-data"]) == {"instance-id": "101-0a1b2c3d4e5f", "local-hostname": "demo-web-0"}
    assert yaml.safe_load(docs["network-config"])["ethernets"]["nic0"]["dhcp4"] is True


def test_same_documents_same_bytes_and_a_change_shows() -> None:
    md = meta_data("101-x", "demo-web-0")
    first = nocloud_iso(USER_DATA, md, None)
    assert nocloud_iso(USER_DATA, md, None) == first
    assert nocloud_iso(USER_DATA + "# changed\n", md, None) != first
    assert "network-config" not in read_nocloud_iso(first)


def test_something_else_is_not_a_seed() -> None:
    assert read_nocloud_iso(b"\0" * 4096) == {}


def test_the_bytes_do_not_depend_on_the_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    md = meta_data("101-x", "demo-web-0")
    here = nocloud_iso(USER_DATA, md, None)
    try:
        monkeypatch.setenv("TZ", "Asia/Kolkata")  # +05:30: hours and minutes both shift
        time.tzset()
        elsewhere = nocloud_iso(USER_DATA, md, None)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert elsewhere == here
