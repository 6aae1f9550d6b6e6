"""state_bucket's answers to what the sandbox cannot show: Google's 403 on a bucket another account owns
(the sandbox has no IAM, so it answers 200 there) versus a 401 for bad credentials."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import httplib2
import pytest
from googleapiclient.errors import HttpError

from vmplane.clouds.errors import AuthError
from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.clouds.gcp.state_bucket import ensure_bucket
from vmplane.errors import UsageError


def _svc(status: int, reason: str) -> Any:
    body = {"error": {"code": status, "message": "denied", "errors": [{"reason": reason, "message": "denied"}]}}

    def execute() -> Any:
        raise HttpError(httplib2.Response({"status": status}), json.dumps(body).encode())

    request = SimpleNamespace(execute=execute)
    return SimpleNamespace(buckets=lambda: SimpleNamespace(get=lambda bucket: request))


@pytest.fixture
def clients() -> GcpClients:
    return GcpClients(GcpTarget("p-1", "us-central1", "http://127.0.0.1:9"))


def test_a_bucket_these_credentials_cannot_read_is_refused_as_someone_elses(clients: GcpClients) -> None:
    with pytest.raises(UsageError, match=r"gs://taken exists but these credentials cannot read it \(forbidden\)"):
        ensure_bucket(clients, _svc(403, "forbidden"), "taken", "us-central1", {"zop_org_id": "acme"}, "zop_org_id")


def test_bad_credentials_stay_an_auth_error(clients: GcpClients) -> None:
    with pytest.raises(AuthError):
        ensure_bucket(clients, _svc(401, "required"), "mine", "us-central1", {"zop_org_id": "acme"}, "zop_org_id")
