"""Fixtures for the fast unit tests: the example spec and a real `AwsClients` talking to moto's
in-process mock (no server, no network, and never the developer's own AWS credentials or config)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import botocore.loaders
import botocore.session
import pytest
from moto import mock_aws

from vmplane.clouds.aws.session import AwsClients, AwsTarget
from vmplane.clouds.faults import FAULT_PAUSE_ENV
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec

from .support import EXAMPLE, REGION


@pytest.fixture(scope="package", autouse=True)
def _shared_botocore_loader() -> Iterator[None]:
    """Every AwsClients builds a new boto3 Session, and each Session re-reads and re-parses the service
    models from disk (~0.2 s for ec2 + iam). Share one caching loader across this package's sessions:
    same data files, same clients, a fraction of the time. Undone when the package is done."""
    loader = botocore.loaders.create_loader()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(botocore.session, "create_loader", lambda *_args, **_kwargs: loader)
        yield


@pytest.fixture(scope="session", autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """In-process tests never read the developer's ~/.vmplane (a price cache there would change estimates),
    nor reach the internet for a real target's manifests: the deps mirrors point at a closed port (a test
    that fetches sets its own fake upstreams)."""
    from tests.deps_servers import closed_mirrors

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VMPLANE_HOME", str(tmp_path_factory.mktemp("vmplane-home")))
        for name, value in closed_mirrors().items():
            mp.setenv(name, value)
        yield


@pytest.fixture(scope="session")
def spec() -> EnvSpec:
    return load_spec(EXAMPLE)


def _mocked_clients(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, iam_policies: bool) -> Iterator[AwsClients]:
    # Loading AWS's managed IAM policies costs ~0.5 s per test, so only the tests that need them ask.
    if iam_policies:
        monkeypatch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
    else:
        monkeypatch.delenv("MOTO_IAM_LOAD_MANAGED_POLICIES", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    # Nothing of the developer's own AWS setup may leak into (or be touched by) a unit test.
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL", FAULT_PAUSE_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    with mock_aws():
        yield AwsClients(AwsTarget(region=REGION))
        # Leaving the mock resets every backend, which would load the ~1,500 managed policies again
        # (per partition) just to throw them away: drop the switch first (monkeypatch restores it).
        os.environ.pop("MOTO_IAM_LOAD_MANAGED_POLICIES", None)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[AwsClients]:
    """A real AwsClients inside moto's in-process mock of one fresh account."""
    yield from _mocked_clients(monkeypatch, tmp_path, iam_policies=False)


@pytest.fixture
def aws_iam(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[AwsClients]:
    """Like `aws`, with AWS's managed policies (AmazonSSMManagedInstanceCore) present in IAM."""
    yield from _mocked_clients(monkeypatch, tmp_path, iam_policies=True)
