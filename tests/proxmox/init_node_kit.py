"""Shared by the `vmplane proxmox init-node` tests (test_pve_init_node*.py): the published-sums values, the
in-process CLI's result, and the helpers that build the command and read what the fake was asked."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from tests.proxmox.fakecluster import Serving
from tests.proxmox.netkit import forms

IMAGE = "debian-12-genericcloud-amd64.qcow2"
SHA = hashlib.sha512(b"the image").hexdigest()
OTHER = hashlib.sha512(b"another image").hexdigest()


@dataclass
class Ran:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def image_args(base: str, *extra: str) -> list[str]:
    return ["--image-url", f"{base}/{IMAGE}", "--checksum-url", f"{base}/SHA512SUMS", *extra]


def run_apply(vmplane_main: Callable[..., Ran], serving: Serving, base: str, *extra: str) -> Ran:
    args = ["proxmox", "init-node", "--endpoint", serving.pve.url, "--ca-file", serving.cafile, "--node", "pve1"]
    return vmplane_main([*args, *image_args(base, "--vmid", "9001", "--name", "debian-12-cloud", *extra)])


def init_writes(serving: Serving) -> list[tuple[str, str, dict[str, list[str]]]]:
    """The non-GET requests the fake saw, as (method, path without `/api2/json/`, form fields)."""
    return [(m, p.removeprefix("/"), fields) for m, p, fields in forms(serving) if m != "GET"]
