"""The driver contract (tests/contract/suite.py), once per cloud: each class names its adapter and its marks."""

from __future__ import annotations

from tests.contract.aws import AwsAdapter
from tests.contract.gcp import GcpAdapter
from tests.contract.proxmox import ProxmoxAdapter
from tests.contract.suite import DriverContract


class TestAws(DriverContract):
    adapter = AwsAdapter()
    pytestmark = list(AwsAdapter.marks)


class TestGcp(DriverContract):
    adapter = GcpAdapter()
    pytestmark = list(GcpAdapter.marks)


class TestProxmox(DriverContract):
    adapter = ProxmoxAdapter()
    pytestmark = list(ProxmoxAdapter.marks)
