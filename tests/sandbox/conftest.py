"""Fixtures for the Google Cloud sandbox tests: official clients against the session sandbox, each test
in a project of its own (any valid project id exists in the sandbox on first use)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from google.cloud import compute_v1
from tests.helpers import Sandbox


class Gcp:
    def __init__(self, sandbox: Sandbox, project: str) -> None:
        self.sandbox = sandbox
        self.project = project
        self._clients: dict[type[Any], Any] = {}

    def __getattr__(self, name: str) -> Any:
        """gcp.networks -> compute_v1.NetworksClient, gcp.region_instance_group_managers -> ..."""
        cls = getattr(compute_v1, "".join(p.capitalize() for p in name.split("_")) + "Client")
        if cls not in self._clients:
            self._clients[cls] = self.sandbox.gcp_compute(cls)
        return self._clients[cls]

    def wait(self, op: Any) -> Any:
        """Poll an operation to DONE with the matching operations client (never ExtendedOperation.result())."""
        if op.zone:
            client, where = self.zone_operations, {"zone": op.zone.rsplit("/", 1)[1]}
        elif op.region:
            client, where = self.region_operations, {"region": op.region.rsplit("/", 1)[1]}
        else:
            client, where = self.global_operations, {}
        done = client.wait(project=self.project, operation=op.name, **where)
        assert done.status == compute_v1.Operation.Status.DONE
        return done

    def failure(self, op: Any) -> tuple[str, str]:
        """The HTTP call answered RUNNING; the operation ends DONE with Google's error: (code, message)."""
        assert op.status != compute_v1.Operation.Status.DONE and not op.error.errors
        done = self.wait(op)
        assert done.error.errors, f"operation {op.name} succeeded"
        return done.error.errors[0].code, done.error.errors[0].message

    def link(self, path: str) -> str:
        return f"https://www.googleapis.com/compute/v1/projects/{self.project}/{path}"


def boot_disk(size_gb: int = 10) -> compute_v1.AttachedDisk:
    """Google requires a boot disk, first, no smaller than its image (rules compute.disk-*)."""
    params = compute_v1.AttachedDiskInitializeParams(
        source_image="projects/debian-cloud/global/images/family/debian-12", disk_size_gb=size_gb
    )
    return compute_v1.AttachedDisk(boot=True, auto_delete=True, initialize_params=params)


@pytest.fixture
def gcp(sandbox: Sandbox) -> Gcp:
    return Gcp(sandbox, f"t-{uuid.uuid4().hex[:12]}")
