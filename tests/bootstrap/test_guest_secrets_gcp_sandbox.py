"""The fetcher against the GCP sandbox's own Secret Manager and its per-instance metadata stand-in: it reads
as the instance's service account, so the accessor binding on the secret decides, as on Google."""

from __future__ import annotations

import stat
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.bootstrap.guest_secrets_fakes import run_fetcher
from tests.helpers import gcp_sandbox_alone
from tests.sandbox.test_gcp_secretmanager import AUTO, b64, client, raw

from vmplane.bootstrap import guest_secrets as gs
from vmplane.bootstrap.runtime import RUNTIME_ENV_PATH
from vmplane.envspec.models import EnvSpec
from vmplane.sandbox.gcp.rules.examples import ZONE, P, net, sub, vm_body


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    yield from gcp_sandbox_alone()


def vm_with_account(endpoint: str, project: str) -> str:
    """Instance vm1 running as a service account of its own; the account's email."""
    accounts = client(endpoint, "iam").projects().serviceAccounts()
    email: str = accounts.create(name=f"projects/{project}", body={"accountId": "vmp-web-1"}).execute()["email"]
    for step in (net(), sub()):
        assert raw(endpoint, step.http, step.path.format(p=project), step.body)[0] == 200
    body = vm_body(
        "vm1", serviceAccounts=[{"email": email, "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]
    )
    assert raw(endpoint, "POST", f"{P}/zones/{ZONE}/instances".format(p=project), body)[0] == 200
    return email


def test_the_fetcher_reads_as_the_vms_account_once_the_secret_grants_it(endpoint: str, tmp_path: Path) -> None:
    project = f"t-{uuid.uuid4().hex[:12]}"
    email = vm_with_account(endpoint, project)
    secrets = client(endpoint).projects().secrets()
    name = secrets.create(parent=f"projects/{project}", secretId="db", body=AUTO).execute()["name"]
    for value in (b"sb-db-v1", b"sb-db-v2"):
        secrets.addVersion(parent=name, body={"payload": {"data": b64(value)}}).execute()
    spec = EnvSpec.model_validate(
        {
            "name": "rt",
            "org": "acme",
            "provider": {"cloud": "gcp", "project": project, "region": "us-central1"},
            "pools": {"web": {"mode": "fixed", "size": 1}},
            "runtime": {"env": {"DB": {"secret": "gcp-sm:db"}, "DB_OLD": {"secret": "gcp-sm:db/versions/1"}}},
        }
    )
    metadata = f"{endpoint}/_sandbox/metadata/projects/{project}/zones/{ZONE}/instances/vm1"
    source: dict[str, Any] = {
        "cloud": "gcp",
        "project": project,
        "endpoints": {"metadata": metadata, "secretmanager": endpoint},
    }
    root = tmp_path / "vm"
    plan = gs.fetch_plan(spec, source, RUNTIME_ENV_PATH, str(root))

    # A refusal is retried to the deadline (a grant takes a while to reach the store), then named.
    denied = run_fetcher({**plan, "deadlineSeconds": 2}, tmp_path)
    assert denied.returncode == 1 and "(gcp-sm:db): HTTP 403 PERMISSION_DENIED, still failing" in denied.stderr
    assert "sb-db" not in denied.stderr and not root.exists()

    # The grant arrives while the fetcher is retrying: it reads as soon as the store lets it.
    binding = {"role": "roles/secretmanager.secretAccessor", "members": [f"serviceAccount:{email}"]}
    grant = threading.Timer(
        1.5, lambda: secrets.setIamPolicy(resource=name, body={"policy": {"bindings": [binding]}}).execute()
    )
    grant.start()
    proc = run_fetcher({**plan, "deadlineSeconds": 30}, tmp_path)
    grant.join()
    assert proc.returncode == 0, proc.stderr
    env_file = root / RUNTIME_ENV_PATH.lstrip("/")
    assert env_file.read_text() == "DB=sb-db-v2\nDB_OLD=sb-db-v1\n"  # the sandbox's dataCrc32c checked, too
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    accesses = raw(endpoint, "GET", f"/_sandbox/secret-accesses?project={project}")[1]["accesses"]
    assert {(a["caller"], a["outcome"]) for a in accesses} == {
        (f"serviceAccount:{email}", "PERMISSION_DENIED"),
        (f"serviceAccount:{email}", "OK"),
    }
